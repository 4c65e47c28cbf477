// The connection slots of a gRPC port (issue 26, finding 2): a full port makes room for a new
// connection, and which one goes. EventEmitters stand in for sockets (the slots read their
// remote address and port, and destroy them); the clock is passed in.
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ConnectionSlots } from '../../../src/grpc/connection-slots';

class FakeSocket extends EventEmitter {
  destroyed = false;
  constructor(
    readonly remoteAddress: string,
    readonly remotePort: number,
  ) {
    super();
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit('close');
  }
}

let port = 40_000;
function connect(slots: ConnectionSlots, peer: string, nowMs: number): FakeSocket {
  const s = new FakeSocket(peer, port++);
  slots.admit(s as unknown as Socket, nowMs);
  return s;
}

/** Marks the connection as having finished a call at `atMs` (what the guard does at a stream's close). */
function finishCall(slots: ConnectionSlots, s: FakeSocket, atMs: number): void {
  const slot = slots.attach({ socket: s } as never);
  if (slot === undefined) throw new Error('no slot');
  slot.proven = true;
  slot.lastCallMs = atMs;
}

describe('ConnectionSlots', () => {
  it('never refuses: a full port closes a connection without a finished call, from the peer holding most of them', () => {
    const slots = new ConnectionSlots(4, 10_000);
    const envoy = connect(slots, '10.0.0.1', 0);
    finishCall(slots, envoy, 5);
    const holders = [connect(slots, '10.0.0.9', 1), connect(slots, '10.0.0.9', 2)];
    const lone = connect(slots, '10.0.0.2', 3);
    const fresh = connect(slots, '10.0.0.3', 4);
    expect(slots.size).toBe(4);
    expect(holders[0]?.destroyed).toBe(true);
    expect([envoy, holders[1], lone, fresh].map((s) => s?.destroyed)).toEqual([false, false, false, false]);
    expect(slots.takeEvicted()).toBe(1);
  });

  it('when every connection has finished a call, the one idle longest makes room', () => {
    const slots = new ConnectionSlots(2, 10_000);
    const a = connect(slots, '10.0.0.1', 0);
    const b = connect(slots, '10.0.0.2', 0);
    finishCall(slots, a, 100);
    finishCall(slots, b, 50);
    connect(slots, '10.0.0.3', 200);
    // b's session is absent here, so it is closed at once rather than with GOAWAY.
    expect(b.destroyed).toBe(true);
    expect(a.destroyed).toBe(false);
  });

  it('closes a connection without a finished call past GRPC_MAX_FIRST_CALL_TIME, and only those', () => {
    const slots = new ConnectionSlots(10, 1000);
    const idle = connect(slots, '10.0.0.1', 0);
    const client = connect(slots, '10.0.0.2', 0);
    finishCall(slots, client, 10);
    const young = connect(slots, '10.0.0.3', 600);
    slots.sweep(999);
    expect(idle.destroyed).toBe(false);
    slots.sweep(1000);
    expect([idle.destroyed, client.destroyed, young.destroyed]).toEqual([true, false, false]);
    expect(slots.size).toBe(2);
  });

  it('a session finds its connection through its socket, or the TLS socket over it', () => {
    const slots = new ConnectionSlots(4, 10_000);
    const raw = connect(slots, '10.0.0.1', 0);
    expect(slots.attach({ socket: raw } as never)).toBeDefined();
    const other = connect(slots, '10.0.0.2', 0);
    const tlsOver = { _parent: other };
    expect(slots.attach({ socket: tlsOver } as never)?.peer).toBe('10.0.0.2');
  });

  it('a closed connection gives its slot back', () => {
    const slots = new ConnectionSlots(1, 10_000);
    const a = connect(slots, '10.0.0.1', 0);
    a.destroy();
    expect(slots.size).toBe(0);
    const b = connect(slots, '10.0.0.1', 1);
    expect(b.destroyed).toBe(false);
    expect(slots.takeEvicted()).toBe(0);
  });
});

describe('ConnectionSlots: connections in their eviction grace (review of issue 26, finding 5)', () => {
  it('at most a quarter of the slots wait in grace: past that the oldest of them is cut', () => {
    const slots = new ConnectionSlots(4, 10_000);
    const session = (): object => ({ destroyed: false, goaway: () => undefined, close: () => undefined });
    const proven = (peer: string, at: number): FakeSocket => {
      const s = connect(slots, peer, at);
      const slot = slots.attach({ socket: s, ...session() } as never);
      if (slot === undefined) throw new Error('no slot');
      slot.proven = true;
      slot.lastCallMs = at;
      return s;
    };
    const evicted = [proven('10.0.0.1', 0), proven('10.0.0.2', 1), proven('10.0.0.3', 2), proven('10.0.0.4', 3)];
    // Each newcomer proves itself at once, and the idlest proven connection makes room for the next.
    for (let i = 0; i < 4; i++) proven(`10.0.1.${i}`, 10 + i);
    expect(slots.size).toBe(4);
    // All four were evicted with GOAWAY; their sockets stay open in the grace, but only one of them.
    expect(evicted.filter((s) => !s.destroyed)).toHaveLength(1);
    expect(evicted[3]?.destroyed).toBe(false);
  });
});
