// Issue 27: the order per counter of a process' STOP-mode requests. Requests on one server
// (shared) run side by side and at once; a request over several servers (exclusive) runs alone on
// its counters, after every request before it and before every one after it on them.
import { describe, expect, it } from 'vitest';
import { DeadlineExceededError } from '../../../src/base/errors';
import { StopOrdering } from '../../../src/limiter/redis/stop-ordering';

/** A run that ends when `end()` is called, recording its start in `log`. */
function gate(log: string[], name: string) {
  let end: () => void = () => {};
  const ended = new Promise<void>((r) => (end = r));
  return {
    run: () => {
      log.push(`${name} starts`);
      return ended.then(() => {
        log.push(`${name} ends`);
        return name;
      });
    },
    end: () => end(),
  };
}

const later = Date.now() + 60_000;
const settle = () => new Promise((r) => setImmediate(r));

describe('StopOrdering', () => {
  it('runs shared requests at once, side by side, in the same turn', () => {
    const order = new StopOrdering();
    const log: string[] = [];
    const [a, b] = [gate(log, 'a'), gate(log, 'b')];
    void order.shared(['k'], later, a.run);
    void order.shared(['k'], later, b.run);
    expect(log).toEqual(['a starts', 'b starts']);
    a.end();
    b.end();
  });

  it('runs an exclusive request after the shared ones before it, and the shared ones after it after it', async () => {
    const order = new StopOrdering();
    const log: string[] = [];
    const [s1, x, s2, other] = [gate(log, 's1'), gate(log, 'x'), gate(log, 's2'), gate(log, 'other')];
    const done = [
      order.shared(['k1'], later, s1.run),
      order.exclusive(['k1', 'k2'], later, x.run),
      order.shared(['k2'], later, s2.run),
      // Another counter: not held up.
      order.shared(['k3'], later, other.run),
    ];
    await settle();
    expect(log).toEqual(['s1 starts', 'other starts']);
    s1.end();
    await settle();
    expect(log).toEqual(['s1 starts', 'other starts', 's1 ends', 'x starts']);
    x.end();
    await settle();
    expect(log.slice(4)).toEqual(['x ends', 's2 starts']);
    s2.end();
    other.end();
    expect(await Promise.all(done)).toEqual(['s1', 'x', 's2', 'other']);
    expect(order.size).toBe(0);
  });

  it('orders exclusive requests that share a counter first come, first served, with no deadlock', async () => {
    const order = new StopOrdering();
    const log: string[] = [];
    const [x1, x2, x3] = [gate(log, 'x1'), gate(log, 'x2'), gate(log, 'x3')];
    const done = [
      order.exclusive(['a', 'b'], later, x1.run),
      order.exclusive(['b', 'c'], later, x2.run),
      order.exclusive(['c', 'a'], later, x3.run),
    ];
    for (const g of [x1, x2, x3]) {
      await settle();
      g.end();
    }
    await Promise.all(done);
    expect(log).toEqual(['x1 starts', 'x1 ends', 'x2 starts', 'x2 ends', 'x3 starts', 'x3 ends']);
    expect(order.size).toBe(0);
  });

  it('refuses a waiting request at its deadline, and it keeps its place (what comes after it still waits for it)', async () => {
    const order = new StopOrdering();
    const log: string[] = [];
    const [x, s, t] = [gate(log, 'x'), gate(log, 's'), gate(log, 't')];
    const first = order.exclusive(['k'], later, x.run);
    const waiting = order.shared(['k'], Date.now() + 20, s.run);
    await expect(waiting).rejects.toBeInstanceOf(DeadlineExceededError);
    const next = order.exclusive(['k'], later, t.run);
    x.end();
    await first;
    await settle();
    // s runs in its turn (its calls would find no time left), then t.
    expect(log).toEqual(['x starts', 'x ends', 's starts']);
    s.end();
    await settle();
    t.end();
    expect(await next).toBe('t');
    expect(order.size).toBe(0);
  });

  it('releases a counter whose request failed', async () => {
    const order = new StopOrdering();
    await expect(order.exclusive(['k'], later, () => Promise.reject(new Error('redis')))).rejects.toThrow('redis');
    expect(await order.shared(['k'], later, () => Promise.resolve('after'))).toBe('after');
    expect(order.size).toBe(0);
  });
});
