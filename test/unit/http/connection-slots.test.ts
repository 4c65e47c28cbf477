// Issue 26, finding 7: which connection a full HTTP port closes for a new one. Real sockets are
// not needed to decide it: a stand-in with the two things ConnectionSlots uses (remoteAddress,
// destroy, and 'close'). test/e2e/http-slowloris.test.ts runs it against the real server.
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ConnectionSlots } from '../../../src/http/connection-slots';

class FakeSocket extends EventEmitter {
  destroyed = false;
  constructor(readonly remoteAddress: string) {
    super();
  }
  destroy(): this {
    if (!this.destroyed) {
      this.destroyed = true;
      this.emit('close');
    }
    return this;
  }
}

const open = (slots: ConnectionSlots, peer: string): FakeSocket => {
  const s = new FakeSocket(peer);
  slots.admit(s as unknown as Socket);
  return s;
};

describe('ConnectionSlots', () => {
  it('a full port closes the longest-waiting connection, not the new one', () => {
    const slots = new ConnectionSlots({ maxConnections: 3, maxPerPeer: 3 });
    const [a, b, c] = ['p', 'p', 'p'].map((p) => open(slots, p)) as [FakeSocket, FakeSocket, FakeSocket];
    const d = open(slots, 'p');
    expect([a.destroyed, b.destroyed, c.destroyed, d.destroyed]).toEqual([true, false, false, false]);
    expect(slots.size).toBe(3);
    expect(slots.evicted).toBe(1);
  });

  it('a connection being answered is never closed; when all are, the new one is refused', () => {
    const slots = new ConnectionSlots({ maxConnections: 2, maxPerPeer: 2 });
    const a = open(slots, 'p');
    const b = open(slots, 'p');
    slots.busy(a as unknown as Socket);
    const c = open(slots, 'p');
    expect([a.destroyed, b.destroyed, c.destroyed]).toEqual([false, true, false]);
    slots.busy(c as unknown as Socket);
    const d = open(slots, 'p');
    expect(d.destroyed).toBe(true);
    // Once answered, a connection waits again, as the newest.
    slots.answered(a as unknown as Socket);
    slots.answered(c as unknown as Socket);
    const e = open(slots, 'p');
    expect([a.destroyed, c.destroyed, e.destroyed]).toEqual([true, false, false]);
  });

  it('a connection answering pipelined requests stays busy until its last answer is out', () => {
    const slots = new ConnectionSlots({ maxConnections: 2, maxPerPeer: 2 });
    const a = open(slots, 'p');
    const b = open(slots, 'p');
    // Two requests read whole from `a` in one chunk; the first answer goes out, the second not yet.
    slots.busy(a as unknown as Socket);
    slots.busy(a as unknown as Socket);
    slots.answered(a as unknown as Socket);
    slots.busy(b as unknown as Socket);
    const c = open(slots, 'p');
    expect([a.destroyed, b.destroyed, c.destroyed]).toEqual([false, false, true]);
    slots.answered(a as unknown as Socket);
    const d = open(slots, 'p');
    expect([a.destroyed, d.destroyed]).toEqual([true, false]);
  });

  it('a peer at its share closes its own oldest; a full port takes from the peer holding most', () => {
    const slots = new ConnectionSlots({ maxConnections: 4, maxPerPeer: 3 });
    const other = open(slots, 'other');
    const mine = [open(slots, 'attacker'), open(slots, 'attacker'), open(slots, 'attacker')];
    // The attacker's fourth closes its own first; the other peer's older connection stays.
    const fourth = open(slots, 'attacker');
    expect(mine[0]?.destroyed).toBe(true);
    expect(other.destroyed).toBe(false);
    expect(fourth.destroyed).toBe(false);
    // The port is full (4): a new peer's connection closes the attacker's oldest, not `other`.
    const probe = open(slots, 'probe');
    expect(mine[1]?.destroyed).toBe(true);
    expect(other.destroyed).toBe(false);
    expect(probe.destroyed).toBe(false);
    expect(slots.size).toBe(4);
  });
});
