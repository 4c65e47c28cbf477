import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Algorithm } from '../../src/domain/algorithm';
import type { LimitSpec } from '../../src/domain/limit-spec';
import type { LimitCheck, LimitResult } from '../../src/limiter/limiter';
import { MemoryLimiter } from '../../src/limiter/memory/memory-limiter';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { standaloneAndCluster } from '../helpers/standalone-and-cluster';
import { TRACE_START, seededRandom } from '../helpers/algorithm-traces';

// Both backends behind the Limiter seam, on the same pinned clock: every request (several
// counters, several algorithms, several slots, with and without all-or-nothing) must get the
// same answers. This covers the Redis limiter's grouping by (slot, algorithm), each
// algorithm's reply decoding, and all-or-nothing across script calls (look, then charge).
const ALGORITHMS = ['sliding_window', 'token_bucket', 'gcra', 'sliding_log'] as const;

const strip = (r: LimitResult): LimitResult => ({
  allowed: r.allowed,
  used: r.used,
  remaining: r.remaining,
  resetMs: r.resetMs,
  retryAfterMs: r.retryAfterMs,
});

function check(value: string, spec: LimitSpec, hits: number): LimitCheck {
  return { counter: { domain: 'algos', entries: [{ key: 'k', value }] }, spec, hits };
}

describe.each(standaloneAndCluster())('RedisLimiter and MemoryLimiter on %s', (name, connect) => {
  const clock = { now: TRACE_START };
  let redis: RedisLimiter;
  let memory: MemoryLimiter;
  let run = 0;
  beforeAll(async () => {
    const client = connect();
    await client.ping();
    redis = new RedisLimiter({ client, keyPrefix: `alg_${name}_`, pinnedNow: () => clock.now });
    memory = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000 });
  });
  afterAll(async () => {
    await redis?.close();
    await memory?.close();
  });

  async function both(checks: LimitCheck[], stop: boolean): Promise<LimitResult[]> {
    const options = { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: stop };
    const [r, m] = await Promise.all([redis.check(checks, options), memory.check(checks, options)]);
    expect(r.map(strip)).toEqual(m.map(strip));
    return r;
  }

  it('answer alike to random multi-counter requests, with and without all-or-nothing', async () => {
    const random = seededRandom(1234 + name.length);
    const prefix = `r${run++}-`;
    const pool: { value: string; spec: LimitSpec }[] = [];
    for (let i = 0; i < 12; i++) {
      const algorithm = ALGORITHMS[i % ALGORITHMS.length] as Algorithm;
      pool.push({ value: prefix + i, spec: { algorithm, limit: random(7), windowSeconds: [1, 10, 60][random(3)]!, burst: 1 + random(7) } });
    }
    let stops = 0;
    let denials = 0;
    for (let i = 0; i < 150; i++) {
      clock.now += random(700);
      const checks = Array.from({ length: 1 + random(4) }, () => {
        const c = pool[random(pool.length)]!;
        return check(c.value, c.spec, random(3));
      });
      const stop = random(2) === 1;
      if (stop) stops++;
      const results = await both(checks, stop);
      denials += results.filter((r) => !r.allowed).length;
    }
    expect(stops).toBeGreaterThan(30);
    expect(denials).toBeGreaterThan(20);
  });

  it('all-or-nothing across algorithms and slots: one denial charges no counter', async () => {
    clock.now += 3_600_000;
    const p = `s${run++}-`;
    const fixed: LimitSpec = { algorithm: 'fixed_window', limit: 10, windowSeconds: 3600, burst: 10 };
    const tight: LimitSpec = { algorithm: ALGORITHMS[0], limit: 1, windowSeconds: 3600, burst: 1 };
    const loose = ALGORITHMS.map((algorithm) => check(p + algorithm, { algorithm, limit: 10, windowSeconds: 3600, burst: 10 }, 2));
    await both([check(p + 'tight', tight, 1)], false);
    const held = await both([...loose, check(p + 'fw', fixed, 1), check(p + 'tight', tight, 1)], true);
    expect(held.at(-1)!.allowed).toBe(false);
    expect(held.slice(0, -1).every((r) => r.allowed)).toBe(true);
    // Nothing moved: a look at each counter finds it as it was.
    const looked = await both([...loose.map((c) => ({ ...c, hits: 0 })), check(p + 'fw', fixed, 0)], false);
    expect(looked.map((r) => r.used)).toEqual([...loose.map(() => 0), 0]);
    const charged = await both([...loose, check(p + 'fw', fixed, 1)], true);
    expect(charged.every((r) => r.allowed)).toBe(true);
    expect(charged.map((r) => r.used)).toEqual([...loose.map(() => 2), 1]);
  });
});
