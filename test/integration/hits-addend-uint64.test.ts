// Issue 27, finding 3: a descriptor's hits_addend is a google.protobuf.UInt64Value. The
// reference counts 4,294,967,296 (INCRBY) and answers OVER_LIMIT; floodgate refused it with
// INVALID_ARGUMENT, which Envoy's default failure_mode_deny: false turns into an admit. Through
// the real server over real gRPC, on the memory backend and on a real Redis: the request is
// counted and answered OVER_LIMIT, exactly up to 2^32 (the stored count is the reference's);
// above 2^32, up to 2^64 - 1, it is counted as 2^32 (docs/differences.md: every limit and burst
// is a uint32, so 2^32 hits are over any of them alone, and the counts stay exact integers).
import Redis from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ALGORITHMS } from '../../src/domain/algorithm';
import { HITS_COUNTED_MAX } from '../../src/domain/uint32';
import { MemoryLimiter } from '../../src/limiter/memory/memory-limiter';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { fixedWindowCount } from '../helpers/fixed-window-value';
import { awayFromWindowEdge } from '../helpers/windows';
import { counterKey } from '../../src/limiter/counter-key';

const RULES = {
  'h.yaml': `
domain: h
descriptors:
  - key: fw
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: tb
    rate_limit: { unit: hour, requests_per_unit: 10, algorithm: token_bucket }
  - key: max
    rate_limit: { unit: hour, requests_per_unit: 4294967295 }
`,
};

/** The stored count of the hour's window of `fw=<value>` (Redis). */
const hourCount = (value: string) =>
  fixedWindowCount(
    redis,
    counterKey(
      'u64_',
      { domain: 'h', entries: [{ key: 'fw', value }] },
      { algorithm: 'fixed_window', limit: 10, windowSeconds: 3600, burst: 10 },
    ),
  );

/** hits_addend as proto-loader sends a uint64 exactly: its decimal digits. */
const hits = (digits: string) => ({ value: digits as unknown as number });

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
});
afterAll(async () => {
  await redis?.stop();
});

describe.each(['memory', 'redis'] as const)('hits_addend above uint32 on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(RULES, backend === 'redis' ? { REDIS_URL: redis.url, CACHE_KEY_PREFIX: 'u64_' } : {});
  });
  afterAll(async () => {
    await t?.stop();
  });

  const call = (key: string, value: string, digits: string) =>
    t.client.shouldRateLimit({ domain: 'h', descriptors: [{ entries: [{ key, value }], hits_addend: hits(digits) }] });

  test('4,294,967,296 hits: counted, OVER_LIMIT, as the reference (no INVALID_ARGUMENT)', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const res = await call('fw', 'a', '4294967296');
    expect(res.overall_code).toBe('OVER_LIMIT');
    expect(res.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0 });
    // fixed_window counts every hit, as the reference's INCRBY: the window stays over.
    const next = await call('fw', 'a', '1');
    expect(next.overall_code).toBe('OVER_LIMIT');
    if (backend === 'redis') expect(await hourCount('a')).toBe(4_294_967_297);
  });

  test('2^64 - 1 hits: OVER_LIMIT, counted as 2^32; an algorithm that counts admitted hits only is not charged', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const over = await call('fw', 'b', '18446744073709551615');
    expect(over.overall_code).toBe('OVER_LIMIT');
    if (backend === 'redis') expect(await hourCount('b')).toBe(4_294_967_296);
    const bucket = await call('tb', 'b', '9007199254740993');
    expect(bucket.overall_code).toBe('OVER_LIMIT');
    const after = await call('tb', 'b', '1');
    expect(after.overall_code).toBe('OK');
    expect(after.statuses[0]?.limit_remaining).toBe(9);
  });

  test('the largest limit (4,294,967,295) admits 4,294,967,295 hits and refuses 4,294,967,296', async () => {
    await awayFromWindowEdge(3600, 30_000);
    expect((await call('max', 'c', '4294967296')).overall_code).toBe('OVER_LIMIT');
    const fits = await call('max', 'd', '4294967295');
    expect(fits.overall_code).toBe('OK');
    expect(fits.statuses[0]?.limit_remaining).toBe(0);
  });
});

describe('2^32 hits (the most a descriptor is counted with) on every algorithm: the memory backend and the Lua scripts agree', () => {
  test.each(ALGORITHMS)('%s', async (algorithm) => {
    const now = Date.UTC(2030, 0, 1, 5, 10);
    const client = new Redis({ host: redis.host, port: redis.port, maxRetriesPerRequest: 1 });
    const onRedis = new RedisLimiter({ client, keyPrefix: `u64b_${algorithm}_`, pinnedNow: () => now });
    const memory = new MemoryLimiter({ now: () => now });
    try {
      for (const [limit, windowSeconds] of [
        [10, 1],
        [10, 3600],
        [4_294_967_295, 1],
      ] as const) {
        const spec = { algorithm, limit, windowSeconds, burst: limit };
        const counter = { domain: 'h', entries: [{ key: 'k', value: `${limit}/${windowSeconds}` }] };
        for (const hits of [HITS_COUNTED_MAX, 1, HITS_COUNTED_MAX - 1, 1]) {
          const checks = [{ counter, spec, hits }];
          const options = { deadline: Date.now() + 10_000, stopIncrementWhenOverLimit: false };
          const [fromRedis] = await onRedis.check(checks, options);
          const [fromMemory] = await memory.check(checks, options);
          expect(fromRedis, `${limit}/${windowSeconds}s, ${hits} hits`).toEqual(fromMemory);
          if (hits === HITS_COUNTED_MAX) expect(fromRedis?.allowed).toBe(false);
          for (const field of ['used', 'remaining', 'resetMs', 'retryAfterMs'] as const) {
            expect(Number.isSafeInteger(fromRedis?.[field]) && fromRedis![field] >= 0).toBe(true);
          }
        }
      }
    } finally {
      await Promise.all([onRedis.close(), memory.close()]);
    }
  });
});
