// Done when: with LOCAL_CACHE_SIZE_IN_BYTES, a key once over its limit is answered without Redis
// (its counter stops moving; with Redis gone it still answers OVER_LIMIT, counted by
// ratelimit_service_rate_limit_over_limit_with_local_cache), and the cache stays within its bytes.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createRedisClient } from '../../src/limiter/redis/redis-client';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { OverLimitCache } from '../../src/limiter/over-limit-cache';
import type { LimitCheck } from '../../src/limiter/limiter';
import { loadSettings } from '../../src/settings';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge, metricValue, oneRule, scanKeys, timedCall } from './redis-backend-helpers';
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
    t = await startTestApp({ 'lc.yaml': oneRule('lc', 'k', 2, 'hour') }, { REDIS_URL: redis.url, LOCAL_CACHE_SIZE_IN_BYTES: '100000', CACHE_KEY_PREFIX: 'lc_', BACKEND_FAILURE_MODE: 'error' });
  });
  afterAll(async () => {
    await t?.stop();
  });

  async function overLocal(): Promise<number> {
    return metricValue(await t.app.metrics.registry.metrics(), 'ratelimit_service_rate_limit_over_limit_with_local_cache', { domain: 'lc', key1: 'k' });
  }

  test('an over-limit key is answered from the cache: Redis untouched, even when Redis is gone', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const hot = oneDescriptor('lc', { k: 'hot' });
    expect((await t.client.shouldRateLimit(hot)).overall_code).toBe('OK');
    expect((await t.client.shouldRateLimit(hot)).overall_code).toBe('OK');
    const first = await t.client.shouldRateLimit(hot);
    expect(first.overall_code).toBe('OVER_LIMIT');
    const [key] = await scanKeys(redis, 'lc_');
    expect(fixedWindowCount(await redis.command('GET', key!))).toBe(3);
    expect(await overLocal()).toBe(0);

    // From now on the cache answers: the counter in Redis does not move.
    for (let i = 0; i < 5; i++) {
      const res = await t.client.shouldRateLimit(hot);
      expect(res.overall_code).toBe('OVER_LIMIT');
      expect(res.statuses[0]!.limit_remaining).toBe(0);
      expect(Number(res.statuses[0]!.duration_until_reset!.seconds)).toBeGreaterThan(0);
    }
    expect(fixedWindowCount(await redis.command('GET', key!))).toBe(3);
    expect(await overLocal()).toBe(5);

    // Redis gone: the hot key still answers OVER_LIMIT from the cache, fast; a key that is not
    // cached gets the failure mode (error → UNAVAILABLE), which proves Redis is really away.
    await redis.kill('SIGKILL');
    try {
      const cached = await timedCall(t.client, hot, 20);
      expect(cached.code).toBe('OVER_LIMIT');
      const other = await timedCall(t.client, oneDescriptor('lc', { k: 'cold' }), 200);
      expect(other.code).toBe('UNAVAILABLE');
      expect(await overLocal()).toBe(6);
      console.info(`local cache: OVER_LIMIT from the cache with Redis down in ${cached.ms.toFixed(1)} ms`);
    } finally {
      await redis.restart();
    }
  });
});

describe('OverLimitCache memory bound (real RedisLimiter underneath)', () => {
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
