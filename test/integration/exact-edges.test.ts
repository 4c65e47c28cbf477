import Redis, { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Algorithm } from '../../src/domain/algorithm';
import type { CheckOptions, LimitCheck, LimitResult, Limiter } from '../../src/limiter/limiter';
import type { LimitSpec } from '../../src/domain/limit-spec';
import { MemoryLimiter } from '../../src/limiter/memory/memory-limiter';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { TRACE_START } from '../helpers/algorithm-traces';

// Issue 7's findings at the Limiter seam, on a pinned clock, on every backend: the memory
// limiter, the Lua scripts on a standalone Redis and on a cluster (where the counters of one
// request may land in different slots, so STOP mode spans several script calls).

const ADMITTED: readonly Algorithm[] = ['sliding_window', 'token_bucket', 'gcra', 'sliding_log'];

let standalone: RedisProcess;
let cluster: RedisClusterHarness;
beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 0 })]);
}, 90_000);
afterAll(async () => {
  await Promise.all([standalone?.stop(), cluster?.stop()]);
}, 30_000);

type Backend = readonly [name: string, make: (now: () => number, prefix: string) => Promise<Limiter>];

const BACKENDS: readonly Backend[] = [
  ['memory', (now) => Promise.resolve(new MemoryLimiter({ now, sweepIntervalMs: 3_600_000 }))],
  [
    'standalone',
    async (now, prefix) => {
      const client = new Redis({ host: standalone.host, port: standalone.port, maxRetriesPerRequest: 1 });
      await client.ping();
      return new RedisLimiter({ client, keyPrefix: prefix, pinnedNow: now });
    },
  ],
  [
    'cluster',
    async (now, prefix) => {
      const client = new Cluster([...cluster.startupNodes], { redisOptions: { maxRetriesPerRequest: 1 } });
      await client.ping();
      return new RedisLimiter({ client, keyPrefix: prefix, pinnedNow: now });
    },
  ],
];

const spec = (algorithm: Algorithm, limit: number, windowSeconds: number, burst = limit): LimitSpec => ({
  algorithm,
  limit,
  windowSeconds,
  burst,
});

describe.each(BACKENDS)('exact edges on %s', (name, make) => {
  const clock = { now: TRACE_START };
  let limiter: Limiter;
  let run = 0;
  beforeAll(async () => {
    limiter = await make(() => clock.now, `edge_${name}_${Date.now()}_`);
  });
  afterAll(async () => {
    await limiter?.close();
  });

  /** A fresh counter name for each test, so tests never share state. */
  const fresh = (): string => `c${run++}`;
  const check = (value: string, s: LimitSpec, hits: number): LimitCheck => ({
    counter: { domain: 'edges', entries: [{ key: 'k', value }] },
    spec: s,
    hits,
  });
  const call = (checks: LimitCheck[], stop = false): Promise<LimitResult[]> => {
    const options: CheckOptions = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: stop };
    return limiter.check(checks, options);
  };
  const one = async (value: string, s: LimitSpec, hits: number, stop = false): Promise<LimitResult> =>
    (await call([check(value, s, hits)], stop))[0]!;
  /** Moves the pinned clock to `offset` ms after a fresh day boundary. */
  const dayAt = (offset: number): number => {
    clock.now = (Math.floor(clock.now / 86_400_000) + 1) * 86_400_000 + offset;
    return clock.now;
  };

  it('finding 1: fixed_window counts a call at exactly the window edge in the new window', async () => {
    const c = fresh();
    const s = spec('fixed_window', 1, 1);
    dayAt(999);
    expect(await one(c, s, 1)).toMatchObject({ allowed: true, used: 1, resetMs: 1 });
    clock.now += 1;
    expect(await one(c, s, 1)).toMatchObject({ allowed: true, used: 1, remaining: 0, resetMs: 1000 });
    expect(await one(c, s, 1)).toMatchObject({ allowed: false, used: 2, resetMs: 1000 });
    clock.now += 999;
    expect(await one(c, s, 1)).toMatchObject({ allowed: false, used: 3, resetMs: 1 });
    clock.now += 1;
    expect(await one(c, s, 1)).toMatchObject({ allowed: true, used: 1 });
  });

  it('finding 6: sliding_window keeps its counts when the clock steps back across a window edge', async () => {
    const c = fresh();
    const s = spec('sliding_window', 10, 1);
    const start = dayAt(500); // window N−1 = [0, 1000), N = [1000, 2000)
    expect(await one(c, s, 5)).toMatchObject({ allowed: true });
    clock.now = start + 600; // N
    expect(await one(c, s, 1)).toMatchObject({ allowed: true });
    clock.now = start + 495; // N − 5 ms: back in N−1, where 5 are used
    let admitted = 0;
    for (let i = 0; i < 10; i++) if ((await one(c, s, 1)).allowed) admitted++;
    expect(admitted).toBe(5);
    // The hits of window N were not lost either: forward again in N, 5 × 0.4 + 1 + ... counts them.
    clock.now = start + 600;
    const peek = await one(c, s, 0);
    expect(peek.used).toBe(Math.ceil(10 * 0.9 + 1));
  });

  describe.each(['token_bucket', 'gcra'] as const)('finding 8: %s', (algorithm) => {
    it('raising a limit keeps what was used', async () => {
      const c = fresh();
      dayAt(0);
      await one(c, spec(algorithm, 10, 60), 5);
      expect(await one(c, spec(algorithm, 100, 60), 0)).toMatchObject({ used: 5, remaining: 95, resetMs: 3000 });
    });

    it('lowering a limit keeps what was used', async () => {
      const c = fresh();
      dayAt(0);
      await one(c, spec(algorithm, 100, 60), 50);
      const r = await one(c, spec(algorithm, 10, 60), 1);
      expect(r).toMatchObject({ allowed: false, used: 10, remaining: 0, resetMs: 300_000 });
      // 50 used, 10 fit: 41 must drain at 10 per minute before one more fits.
      expect(r.retryAfterMs).toBe(246_000);
    });

    it('lowering a limit keeps what was used until it drains at the lower limit, not only while the old key lived', async () => {
      // Found by the differential test through the local cache: the key expired when the debt
      // would have drained at the old limit (30 s), while the answers under the new limit (and
      // the cache trusting them) promised a denial for minutes.
      const c = fresh();
      const t0 = dayAt(0);
      await one(c, spec(algorithm, 100, 60), 50);
      expect(await one(c, spec(algorithm, 10, 60), 1)).toMatchObject({ allowed: false, retryAfterMs: 246_000, blockedForMs: 246_000 });
      clock.now = t0 + 31_000;
      expect(await one(c, spec(algorithm, 10, 60), 1)).toMatchObject({
        allowed: false,
        remaining: 0,
        resetMs: 269_000,
        retryAfterMs: 215_000,
        blockedForMs: 215_000,
      });
      clock.now = t0 + 246_000;
      expect(await one(c, spec(algorithm, 10, 60), 1)).toMatchObject({ allowed: true, remaining: 0 });
    });

    it('a clock that steps back admits what is left and refills the skew once', async () => {
      const c = fresh();
      const s = spec(algorithm, 10, 10); // one token per second, capacity 10
      const t0 = dayAt(20_000);
      expect((await one(c, s, 5)).allowed).toBe(true);
      clock.now = t0 - 10_000;
      let admitted = 0;
      for (let i = 0; i < 10; i++) if ((await one(c, s, 1)).allowed) admitted++;
      expect(admitted).toBe(5);
      // Forward to t0 + 2 s: 2 tokens refilled since t0, not 12.
      clock.now = t0 + 2_000;
      admitted = 0;
      for (let i = 0; i < 10; i++) if ((await one(c, s, 1)).allowed) admitted++;
      expect(admitted).toBe(2);
    });
  });

  it('finding 9: STOP mode increments each fixed_window key that would go over and holds back the others', async () => {
    const [a, b] = [fresh(), fresh()];
    const s = spec('fixed_window', 10, 3600);
    dayAt(1000);
    await call([check(a, s, 8), check(b, s, 3)]);
    const results = await call([check(a, s, 5), check(b, s, 5)], true);
    expect(results.map((r) => [r.allowed, r.used])).toEqual([
      [false, 13],
      [true, 3],
    ]);
    const peek = await call([check(a, s, 0), check(b, s, 0)]);
    expect(peek.map((r) => r.used)).toEqual([13, 3]);
  });

  describe.each(ADMITTED)('finding 10: %s', (algorithm) => {
    it('a key twice in one STOP call is judged with the hits of its first occurrence', async () => {
      const c = fresh();
      const s = spec(algorithm, 3, 3600);
      dayAt(1000);
      await one(c, s, 2);
      const results = await call([check(c, s, 1), check(c, s, 1)], true);
      expect(results.some((r) => !r.allowed)).toBe(true);
      expect(await one(c, s, 0)).toMatchObject({ used: 2, remaining: 1 });
    });
  });

  it('sliding_log: after the clock stepped back, a key twice in one STOP call waits a whole window for its own pending hit to leave', async () => {
    // The log holds 2 hits at 5 s; at 1 s (the clock stepped back) none of them is at or before
    // now, so the hit that must leave for the second occurrence is the first occurrence's own,
    // pending at now: Retry-After is one window.
    const c = fresh();
    const s = spec('sliding_log', 3, 3600);
    dayAt(5000);
    await one(c, s, 2);
    clock.now -= 4000;
    const [first, second] = await call([check(c, s, 1), check(c, s, 1)], true);
    expect(first).toMatchObject({ allowed: true });
    expect(second).toMatchObject({ allowed: false, retryAfterMs: 3_600_000 });
  });

  describe('blockedForMs', () => {
    it('fixed_window: to the window end once the count reaches the limit', async () => {
      const c = fresh();
      const s = spec('fixed_window', 2, 10);
      dayAt(4000);
      expect((await one(c, s, 1)).blockedForMs ?? 0).toBe(0);
      expect(await one(c, s, 1)).toMatchObject({ allowed: true, blockedForMs: 6000 });
      expect(await one(c, s, 1)).toMatchObject({ allowed: false, blockedForMs: 6000 });
      expect((await one(fresh(), spec('fixed_window', 0, 10), 0)).blockedForMs).toBe(6000);
    });

    it('token_bucket and gcra: until one hit fits, 0 while one fits (a big request is no block)', async () => {
      for (const algorithm of ['token_bucket', 'gcra'] as const) {
        const c = fresh();
        const s = spec(algorithm, 10, 60); // one token per 6 s
        dayAt(0);
        await one(c, s, 5);
        expect(await one(c, s, 11)).toMatchObject({ allowed: false, blockedForMs: 0 });
        expect(await one(c, s, 5)).toMatchObject({ allowed: true, blockedForMs: 6000 });
        clock.now += 1000;
        expect(await one(c, s, 1)).toMatchObject({ allowed: false, blockedForMs: 5000 });
      }
    });

    it('sliding_window: until a 1-hit request would be admitted', async () => {
      const c = fresh();
      const s = spec('sliding_window', 4, 10);
      const start = dayAt(9000);
      await one(c, s, 3);
      clock.now = start + 1000; // next window, 0 elapsed: estimate 3
      expect((await one(c, s, 2)).blockedForMs ?? 0).toBe(0);
      expect(await one(c, s, 1)).toMatchObject({ allowed: true, blockedForMs: 3334 });
    });

    it('sliding_log: until one slot frees; limit 0: one window', async () => {
      const c = fresh();
      const s = spec('sliding_log', 2, 10);
      const t0 = dayAt(0);
      await one(c, s, 1);
      clock.now = t0 + 3000;
      expect(await one(c, s, 1)).toMatchObject({ allowed: true, blockedForMs: 7000 });
      expect(await one(c, s, 0)).toMatchObject({ allowed: true, blockedForMs: 7000 });
      expect(await one(fresh(), spec('sliding_log', 0, 10), 1)).toMatchObject({ allowed: false, blockedForMs: 10_000 });
    });
  });
});
