// Done when: with LOCAL_CACHE_SIZE_IN_BYTES, a key once over its limit is answered without Redis
// (its counter stops moving; with Redis gone it still answers OVER_LIMIT, counted by
// ratelimit_service_rate_limit_over_limit_with_local_cache), and the cache stays within its bytes.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { createRedisClient } from '../../src/limiter/redis/redis-client';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { OverLimitCache } from '../../src/limiter/over-limit-cache';
import type { LimitCheck } from '../../src/limiter/limiter';
import type { LimitSpec } from '../../src/domain/limit-spec';
import { loadSettings } from '../../src/settings/settings';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge, metricValue, oneRule, scanKeys, timedCall, uniquePrefix } from './redis-backend-helpers';
import { fixedWindowCount } from '../helpers/fixed-window-value';

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
});
afterAll(async () => {
  await redis?.stop();
});

describe('LOCAL_CACHE_SIZE_IN_BYTES through the server', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(
      { 'lc.yaml': oneRule('lc', 'k', 2, 'hour') },
      { REDIS_URL: redis.url, LOCAL_CACHE_SIZE_IN_BYTES: '100000', CACHE_KEY_PREFIX: 'lc_', BACKEND_FAILURE_MODE: 'error' },
    );
  });
  afterAll(async () => {
    await t?.stop();
  });

  async function overLocal(): Promise<number> {
    return metricValue(await t.app.metrics.registry.metrics(), 'ratelimit_service_rate_limit_over_limit_with_local_cache', {
      domain: 'lc',
      key1: 'k',
    });
  }

  // Needs the algorithm branch (exact-algo): the cache keeps only answers with blockedForMs,
  // which the Redis backend fills from there on.
  test('an over-limit key is answered from the cache: Redis untouched, even when Redis is gone', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const hot = oneDescriptor('lc', { k: 'hot' });
    expect((await t.client.shouldRateLimit(hot)).overall_code).toBe('OK');
    expect((await t.client.shouldRateLimit(hot)).overall_code).toBe('OK');
    const first = await t.client.shouldRateLimit(hot);
    expect(first.overall_code).toBe('OVER_LIMIT');
    const [key] = await scanKeys(redis, 'lc_');
    expect(await fixedWindowCount(redis, key!)).toBe(3);
    expect(await overLocal()).toBe(0);

    // From now on the cache answers: the counter in Redis does not move.
    for (let i = 0; i < 5; i++) {
      const res = await t.client.shouldRateLimit(hot);
      expect(res.overall_code).toBe('OVER_LIMIT');
      expect(res.statuses[0]!.limit_remaining).toBe(0);
      expect(Number(res.statuses[0]!.duration_until_reset!.seconds)).toBeGreaterThan(0);
    }
    expect(await fixedWindowCount(redis, key!)).toBe(3);
    expect(await overLocal()).toBe(5);

    // Redis gone: the hot key still answers OVER_LIMIT from the cache, fast; a key that is not
    // cached gets the failure mode (error → UNAVAILABLE), which proves Redis is really away.
    await redis.kill('SIGKILL');
    try {
      // From the cache (overLocal counts it below); the deadline leaves a busy machine room.
      const cached = await timedCall(t.client, hot, 5000);
      expect(cached.code).toBe('OVER_LIMIT');
      const other = await timedCall(t.client, oneDescriptor('lc', { k: 'cold' }), 5000);
      expect(other.code).toBe('UNAVAILABLE');
      expect(await overLocal()).toBe(6);
      console.info(`local cache: OVER_LIMIT from the cache with Redis down in ${cached.ms.toFixed(1)} ms`);
    } finally {
      await redis.restart();
    }
  });
});

describe('OverLimitCache memory bound (real RedisLimiter underneath)', () => {
  // Needs the algorithm branch (exact-algo), as above: limit 0 denies every request for the
  // rest of the window, which only blockedForMs tells the cache.
  test('thousands of over-limit keys keep estimatedBytes within maxBytes, newest kept', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const client = createRedisClient(loadSettings({ REDIS_URL: redis.url }).redis!);
    client.on('error', () => undefined);
    const maxBytes = 20_000;
    const cache = new OverLimitCache(new RedisLimiter({ client, keyPrefix: 'bound_' }), { maxBytes });
    try {
      if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
      const check = (i: number): LimitCheck => ({
        counter: { domain: 'bound', entries: [{ key: 'user', value: `user-${i}-${'x'.repeat(i % 50)}` }] },
        spec: { algorithm: 'fixed_window', limit: 0, windowSeconds: 3600, burst: 0 },
        hits: 1,
      });
      let peak = 0;
      for (let i = 0; i < 3000; i += 100) {
        const batch = Array.from({ length: 100 }, (_, j) => check(i + j));
        const results = await cache.check(batch, { deadline: Date.now() + 2000, stopIncrementWhenOverLimit: false });
        expect(results.every((r) => !r.allowed)).toBe(true);
        peak = Math.max(peak, cache.estimatedBytes);
        expect(cache.estimatedBytes).toBeLessThanOrEqual(maxBytes);
      }
      expect(cache.size).toBeGreaterThan(50);
      expect(cache.size).toBeLessThan(3000);
      // The newest over-limit key is answered from the cache; the oldest was evicted.
      const [newest] = await cache.check([check(2999)], { deadline: Date.now() + 2000, stopIncrementWhenOverLimit: false });
      expect(newest!.fromLocalCache).toBe(true);
      const [oldest] = await cache.check([check(0)], { deadline: Date.now() + 2000, stopIncrementWhenOverLimit: false });
      expect(oldest!.fromLocalCache).toBeUndefined();
      console.info(`local cache bound: ${cache.size} entries, peak ${peak} of ${maxBytes} bytes after 3000 over-limit keys`);
    } finally {
      await cache.close();
    }
  });
});

// The cache's answer must always be the counter's own: these run the real RedisLimiter (real
// scripts, Redis TIME) under the cache and compare with what Redis holds.
describe('OverLimitCache answers as the counter would (real RedisLimiter underneath)', () => {
  const COUNT = { stopIncrementWhenOverLimit: false };
  const STOP = { stopIncrementWhenOverLimit: true };
  let client: ReturnType<typeof createRedisClient>;
  let cache: OverLimitCache;
  let prefix: string;
  beforeAll(async () => {
    client = createRedisClient(loadSettings({ REDIS_URL: redis.url }).redis!);
    client.on('error', () => undefined);
    if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
  });
  beforeEach(() => {
    prefix = uniquePrefix('exact');
    cache = new OverLimitCache(new RedisLimiter({ client, keyPrefix: prefix }), { maxBytes: 1_000_000 });
  });
  afterAll(async () => {
    await client?.quit();
  });

  const spec = (algorithm: LimitSpec['algorithm'], limit: number, windowSeconds = 60, burst = limit): LimitSpec => ({
    algorithm,
    limit,
    windowSeconds,
    burst,
  });
  const at = (value: string, s: LimitSpec, hits = 1): LimitCheck => ({
    counter: { domain: 'exact', entries: [{ key: 'k', value }] },
    spec: s,
    hits,
  });
  const run = (checks: LimitCheck[], mode = COUNT) => cache.check(checks, { deadline: Date.now() + 2000, ...mode });

  test('token_bucket 10/min with 5 used: a denied 11-hit request does not lock out a 1-hit request', async () => {
    const bucket = spec('token_bucket', 10);
    expect((await run([at('tb', bucket, 5)]))[0]!.allowed).toBe(true);
    const big = (await run([at('tb', bucket, 11)]))[0]!;
    expect(big.allowed).toBe(false);
    const small = (await run([at('tb', bucket, 1)]))[0]!;
    expect(small).toMatchObject({ allowed: true, remaining: 4 });
    expect(small.fromLocalCache).toBeUndefined();
  });

  // The four algorithms that charge only admitted hits: the denied 50 hits are not charged, so
  // the counter stays empty and must not be cached as over.
  test.each(['sliding_window', 'token_bucket', 'gcra', 'sliding_log'] as const)(
    '%s: a held-back STOP-mode request of 50 hits does not lock an empty 10/h counter',
    async (algorithm) => {
      await awayFromWindowEdge(3600, 10_000);
      const s = spec(algorithm, 10, 3600);
      const [big] = await run([at('stop', s, 50)], STOP);
      expect(big!.allowed).toBe(false);
      const [small] = await run([at('stop', s, 1)], STOP);
      expect(small!.allowed).toBe(true);
      expect(small!.fromLocalCache).toBeUndefined();
    },
  );

  // fixed_window follows the reference's STOP rule: a key that would go over is incremented (and
  // is then legitimately over), the others are held back. The held-back key must not be cached.
  test('fixed_window: counts 8/10 and 3/10, 5 hits on both in STOP mode: 13 and 3; only the first is cached', async () => {
    await awayFromWindowEdge(3600, 10_000);
    const ten = spec('fixed_window', 10, 3600);
    await run([at('first', ten, 8), at('second', ten, 3)]);
    const [first, second] = await run([at('first', ten, 5), at('second', ten, 5)], STOP);
    expect(first).toMatchObject({ allowed: false, used: 13, remaining: 0 });
    expect(first!.blockedForMs).toBeGreaterThan(0);
    expect(second).toMatchObject({ allowed: true, used: 3, remaining: 7, blockedForMs: 0 });
    // The same request again: with the second key unknown, the whole request goes to Redis' STOP
    // rule, as without the cache (issue 27): the first key charged (18), the second held back at 3.
    const [firstAgain, secondAgain] = await run([at('first', ten, 5), at('second', ten, 5)], STOP);
    expect(firstAgain).toMatchObject({ allowed: false, used: 18, remaining: 0 });
    expect(firstAgain!.fromLocalCache).toBeUndefined();
    expect(secondAgain).toMatchObject({ allowed: true, used: 3 });
    expect(secondAgain!.fromLocalCache).toBeUndefined();
    // The first key alone is answered from the cache.
    const [firstAlone] = await run([at('first', ten, 5)], STOP);
    expect(firstAlone!.fromLocalCache).toBe(true);
    // The held-back key is neither cached nor locked: Redis admits and charges it.
    const [alone] = await run([at('second', ten, 5)], STOP);
    expect(alone).toMatchObject({ allowed: true, used: 8, remaining: 2 });
    expect(alone!.fromLocalCache).toBeUndefined();
  });

  // Needs the algorithm branch (exact-algo), which fills blockedForMs in the Redis backend:
  // without it nothing is ever cached, and the first expectation of `fromLocalCache` fails.
  test('a cached counter: peeks and another limit are asked of Redis; the same request is answered locally', async () => {
    await awayFromWindowEdge(3600, 10_000);
    const two = spec('fixed_window', 2, 3600);
    for (let i = 0; i < 3; i++) await run([at('hot', two)]);
    const [cached] = await run([at('hot', two)]);
    expect(cached).toMatchObject({ allowed: false, remaining: 0, fromLocalCache: true });
    const [key] = await scanKeys(redis, prefix);
    expect(await fixedWindowCount(redis, key!)).toBe(3);
    // A peek goes to Redis: the count it reports is Redis' own.
    const [peek] = await run([at('hot', two, 0)]);
    expect(peek!.fromLocalCache).toBeUndefined();
    expect(peek!.used).toBe(3);
    // The same counter under a limit override of 100 is answered by Redis, and admitted.
    const [raised] = await run([at('hot', spec('fixed_window', 100, 3600))]);
    expect(raised).toMatchObject({ allowed: true, used: 4 });
    expect(raised!.fromLocalCache).toBeUndefined();
  });

  // Issue 27: with one key cached over, a request that has other keys gets exactly what Redis'
  // STOP rule answers without the cache: a key the request's hits put over is charged and denied
  // (the reference's rule: a key that would go over is incremented), the others are held back and
  // report their count as it stands (as the reference's INCRBY 0).
  test('STOP mode with one key cached over: the others get the STOP rule of Redis, as without the cache', async () => {
    await awayFromWindowEdge(3600, 10_000);
    const zero = spec('fixed_window', 0, 3600);
    const ten = spec('fixed_window', 10, 3600);
    await run([at('over', zero)], STOP);
    expect((await run([at('over', zero)], STOP))[0]!.fromLocalCache).toBe(true);
    expect((await run([at('other', ten, 5)]))[0]!.used).toBe(5);
    const [over, other] = await run([at('over', zero), at('other', ten, 3)], STOP);
    expect(over!.allowed).toBe(false);
    expect(other).toMatchObject({ allowed: true, used: 5, remaining: 5, blockedForMs: 0 });
    // 6 hits would not fit: denied and charged, as Redis answers without the cache.
    const [, tooMany] = await run([at('over', zero), at('other', ten, 6)], STOP);
    expect(tooMany).toMatchObject({ allowed: false, used: 11, remaining: 0 });
    const otherKey = (await scanKeys(redis, prefix)).find((k) => k.includes('other'))!;
    expect(await fixedWindowCount(redis, otherKey)).toBe(11);
    // Over now: a 1-hit request is refused (by the cache, which kept that denial).
    const [afterwards] = await run([at('other', ten, 1)]);
    expect(afterwards!.allowed).toBe(false);
  });
});
