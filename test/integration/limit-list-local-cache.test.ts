// Issue 27, finding 2: a `rate_limits` list answered through the local over-limit cache
// (LOCAL_CACHE_SIZE_IN_BYTES) must get the answer the backend gives on the same state: status,
// chosen limit, remaining, reset, Retry-After and headers. Before the fix the cache peeked at the
// list's other limits with 0 hits, so they could never deny: with `k: [burst 2/s, hourly 3/h]`,
// two 1-hit requests, then three 2-hit requests in the same second, the 2nd and 3rd were told
// `burst, remaining 0, Retry-After 1` where the backend says `hourly, remaining 1, Retry-After
// ~2296`. The same sequence runs on the memory backend and on a real Redis, cache on vs cache
// off, every clock pinned (the service's, the backend's and the cache's).
import Redis from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { compileRules } from '../../src/config/compile-rules';
import { parseRuleFile } from '../../src/config/parse-rule-file';
import type { Limiter } from '../../src/limiter/limiter';
import { MemoryLimiter } from '../../src/limiter/memory/memory-limiter';
import { OverLimitCache } from '../../src/limiter/over-limit-cache';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { PrometheusMetrics } from '../../src/metrics/metrics';
import { RateLimitService, type ServiceConfig } from '../../src/service/rate-limit-service';
import type { RateLimitResponse } from '../../src/service/types';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';

const RULES = compileRules(
  [
    parseRuleFile(
      'lc.yaml',
      `
domain: lc
descriptors:
  - key: k
    rate_limits:
      - { name: burst, unit: second, requests_per_unit: 2 }
      - { name: hourly, unit: hour, requests_per_unit: 3 }
  - key: tb
    rate_limits:
      - { name: burst, unit: second, requests_per_unit: 2, algorithm: token_bucket }
      - { name: hourly, unit: hour, requests_per_unit: 3, algorithm: sliding_window }
  - key: other
    rate_limit: { unit: hour, requests_per_unit: 100 }
  - key: full
    rate_limits:
      - { name: burst, unit: second, requests_per_unit: 2, algorithm: token_bucket }
      - { name: hourly, unit: hour, requests_per_unit: 2, algorithm: sliding_window }
`,
    ),
  ],
  { mergeDomainConfig: false },
);

const CONFIG: ServiceConfig = {
  shadowMode: false,
  quotaMode: false,
  stopIncrementWhenOverLimit: false,
  nearLimitRatio: 0.8,
  responseDynamicMetadata: true,
  headers: { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset', style: 'ietf' },
  requestLimits: { maxDescriptors: 8, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 64 },
};

/** 1304 s into an hour (the issue's 2296 s to the hour's end), on a second's edge. */
const START = Date.UTC(2030, 0, 1, 5) + 1_304_000;

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
});
afterAll(async () => {
  await redis?.stop();
});

/** One service over a fresh backend, with or without the cache in front, every clock on `clock`. */
function serviceOver(backend: 'memory' | 'redis', cached: boolean, clock: { now: number }, stop: boolean, tag: string) {
  const hits = { fromCache: 0, backendCalls: 0 };
  let inner: Limiter;
  if (backend === 'memory') inner = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000 });
  else {
    const client = new Redis({ host: redis.host, port: redis.port, maxRetriesPerRequest: 1 });
    inner = new RedisLimiter({ client, keyPrefix: `llc_${tag}_${cached ? 'on' : 'off'}_`, pinnedNow: () => clock.now });
  }
  const store = inner;
  const counted: Limiter = {
    check: (checks, options) => {
      hits.backendCalls++;
      return store.check(checks, options);
    },
    isHealthy: () => store.isHealthy(),
    close: () => store.close(),
  };
  // The cache's clock is monotonic ms: any origin, the same steps as the backend's.
  const limiter = cached ? new OverLimitCache(counted, { maxBytes: 1_000_000, now: () => clock.now, onHit: () => hits.fromCache++ }) : counted;
  const service = new RateLimitService({
    rules: () => RULES,
    limiter,
    metrics: new PrometheusMetrics(),
    config: { ...CONFIG, stopIncrementWhenOverLimit: stop },
  });
  return { service, hits, close: () => limiter.close() };
}

interface Call {
  readonly at: number;
  readonly descriptors: readonly (readonly [key: string, hits: number])[];
}

/** The answers of `calls` with the cache on and off, on `backend`. */
async function onAndOff(backend: 'memory' | 'redis', calls: readonly Call[], stop: boolean, tag: string) {
  const out: Record<'on' | 'off', RateLimitResponse[]> & { fromCache: number; backendCalls: Record<'on' | 'off', number> } = {
    on: [],
    off: [],
    fromCache: 0,
    backendCalls: { on: 0, off: 0 },
  };
  for (const side of ['on', 'off'] as const) {
    const clock = { now: START };
    const { service, hits, close } = serviceOver(backend, side === 'on', clock, stop, tag);
    try {
      for (const call of calls) {
        clock.now = START + call.at;
        out[side].push(
          await service.shouldRateLimit(
            {
              domain: 'lc',
              descriptors: call.descriptors.map(([key, hits]) => ({ entries: [{ key, value: `v${tag}` }], hitsAddend: hits })),
              hitsAddend: 1,
            },
            Date.now() + 10_000,
          ),
        );
      }
    } finally {
      await close();
    }
    out.fromCache += hits.fromCache;
    out.backendCalls[side] = hits.backendCalls;
  }
  return out;
}

const ISSUE_SEQUENCE: Call[] = [
  { at: 0, descriptors: [['k', 1]] },
  { at: 0, descriptors: [['k', 1]] },
  { at: 10, descriptors: [['k', 2]] },
  { at: 20, descriptors: [['k', 2]] },
  { at: 30, descriptors: [['k', 2]] },
  // The client that obeys the Retry-After comes back later, and in the next second.
  { at: 1_100, descriptors: [['k', 2]] },
  { at: 1_200, descriptors: [['k', 1]] },
  { at: 1_300, descriptors: [['k', 1]] },
];

describe.each(['memory', 'redis'] as const)('a list through the local over-limit cache on %s', (backend) => {
  for (const stop of [false, true]) {
    test(`answers as the backend does, status and headers included${stop ? ' (STOP mode)' : ''}`, async () => {
      const { on, off, fromCache } = await onAndOff(backend, ISSUE_SEQUENCE, stop, `issue${stop ? 's' : ''}`);
      // The burst's counter is full from the first 2-hit request on: the cache answers it after that.
      expect(fromCache).toBeGreaterThanOrEqual(2);
      // The backend's own answer to the three 2-hit requests: the hour denies them.
      for (const r of off.slice(2, 5)) {
        expect(r.overallCode).toBe('OVER_LIMIT');
        expect(r.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', currentLimit: { name: 'hourly' }, limitRemaining: 1 });
        expect(r.statuses[0]?.durationUntilResetSeconds).toBe(2296);
      }
      expect(on).toEqual(off);
    });
  }

  test('a list beside another descriptor, and lists of other algorithms, answer as the backend does', async () => {
    const calls: Call[] = [];
    // Fill the lists' seconds, then ask with more hits than the hour has left, beside a
    // descriptor that is counted on every call.
    for (let i = 0; i < 12; i++) {
      const at = 5 * i + (i >= 6 ? 1_000 : 0);
      calls.push({
        at,
        descriptors: [
          ['other', 1],
          ['k', i % 3 === 2 ? 2 : 1],
          ['tb', i % 4 === 3 ? 3 : 1],
        ],
      });
    }
    for (const stop of [false, true]) {
      const { on, off, fromCache } = await onAndOff(backend, calls, stop, `mix${stop ? 's' : ''}`);
      expect(fromCache).toBeGreaterThan(0);
      expect(on).toEqual(off);
    }
  });

  test('a list whose every limit is known to deny every request is answered without the backend, as the backend answers it', async () => {
    // [burst 2/s, hourly 2/h] (token_bucket, sliding_window): 2 hits fill both; then every
    // request is refused by both.
    const calls: Call[] = [
      { at: 0, descriptors: [['full', 2]] },
      { at: 5, descriptors: [['full', 1]] },
      { at: 10, descriptors: [['full', 1]] },
      { at: 15, descriptors: [['full', 2]] },
      { at: 20, descriptors: [['full', 1]] },
    ];
    const { on, off, backendCalls } = await onAndOff(backend, calls, false, 'allcached');
    expect(off[1]?.overallCode).toBe('OVER_LIMIT');
    expect(on).toEqual(off);
    // The first two calls go to the backend (the second's denials are kept), the others but the
    // 2-hit one (an entry answers only its own hits) not.
    expect(backendCalls).toEqual({ on: 3, off: 5 });
  });
});
