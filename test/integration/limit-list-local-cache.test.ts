// Issue 27, finding 2: a `rate_limits` list answered through the local over-limit cache
// (LOCAL_CACHE_SIZE_IN_BYTES) must get the answer the backend gives on the same state: status,
// chosen limit, remaining, reset, Retry-After and headers. Before the fix the cache peeked at the
// list's other limits with 0 hits, so they could never deny: with `k: [burst 2/s, hourly 3/h]`,
// two 1-hit requests, then three 2-hit requests in the same second, the 2nd and 3rd were told
// `burst, remaining 0, Retry-After 1` where the backend says `hourly, remaining 1, Retry-After
// ~2296`. The same sequence runs on the memory backend and on a real Redis, cache on vs cache
// off, every clock pinned (the service's, the backend's and the cache's).
import Redis, { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { compileRules } from '../../src/config/compile-rules';
import { parseRuleFile } from '../../src/config/parse-rule-file';
import type { LimitSpec } from '../../src/domain/limit-spec';
import type { Limiter } from '../../src/limiter/limiter';
import { MemoryLimiter } from '../../src/limiter/memory/memory-limiter';
import { OverLimitCache } from '../../src/limiter/over-limit-cache';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { PrometheusMetrics } from '../../src/metrics/metrics';
import { RateLimitService, type ServiceConfig } from '../../src/service/rate-limit-service';
import type { RateLimitResponse } from '../../src/service/types';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';

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
  - key: k30
    rate_limits:
      - { name: burst, unit: second, requests_per_unit: 2 }
      - { name: hourly, unit: hour, requests_per_unit: 30 }
  - key: b
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: p
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: near
    rate_limit: { unit: hour, requests_per_unit: 10, algorithm: token_bucket }
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
let cluster: RedisClusterHarness;
beforeAll(async () => {
  [redis, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 0 })]);
});
afterAll(async () => {
  await Promise.all([redis?.stop(), cluster?.stop()]);
});

type Backend = 'memory' | 'redis' | 'cluster';

/** One service over a fresh backend, with or without the cache in front, every clock on `clock`. */
function serviceOver(backend: Backend, cached: boolean, clock: { now: number }, stop: boolean, tag: string) {
  const hits = { fromCache: 0, backendCalls: 0, cacheEntries: 0 };
  let inner: Limiter;
  if (backend === 'memory') inner = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000 });
  else {
    const client =
      backend === 'redis'
        ? new Redis({ host: redis.host, port: redis.port, maxRetriesPerRequest: 1 })
        : new Cluster([...cluster.startupNodes], { redisOptions: { maxRetriesPerRequest: 1 } });
    inner = new RedisLimiter({ client, keyPrefix: `llc_${tag}_${cached ? 'on' : 'off'}_`, pinnedNow: () => clock.now });
  }
  const store = inner;
  const front: { cache?: OverLimitCache } = {};
  const counted: Limiter = {
    check: (checks, options) => {
      hits.backendCalls++;
      // The most denials the cache held when a call reached the backend.
      hits.cacheEntries = Math.max(hits.cacheEntries, front.cache?.size ?? 0);
      return store.check(checks, options);
    },
    isHealthy: () => store.isHealthy(),
    close: () => store.close(),
  };
  // The cache's clock is monotonic ms: any origin, the same steps as the backend's.
  if (cached) front.cache = new OverLimitCache(counted, { maxBytes: 1_000_000, now: () => clock.now, onHit: () => hits.fromCache++ });
  const limiter = front.cache ?? counted;
  const service = new RateLimitService({
    rules: () => RULES,
    limiter,
    metrics: new PrometheusMetrics(),
    config: { ...CONFIG, stopIncrementWhenOverLimit: stop },
  });
  return { service, hits, store, close: () => limiter.close() };
}

interface Call {
  readonly at: number;
  readonly descriptors: readonly (readonly [key: string, hits: number])[];
}

/** A counter whose stored count is compared at the end of a sequence, peeked at with 0 hits. */
interface Stored {
  readonly key: string;
  readonly spec: LimitSpec;
}

/**
 * The answers of `calls` with the cache on and off, on `backend`, and what `stored` counters hold
 * after each call whose index is in `peekAfter` (peeked at with 0 hits, not through the cache).
 */
async function onAndOff(
  backend: Backend,
  calls: readonly Call[],
  stop: boolean,
  tag: string,
  stored: { readonly counters: readonly Stored[]; readonly after: readonly number[] } = { counters: [], after: [] },
) {
  const out: Record<'on' | 'off', RateLimitResponse[]> & {
    fromCache: number;
    cacheEntries: number;
    backendCalls: Record<'on' | 'off', number>;
    counts: Record<'on' | 'off', number[][]>;
  } = {
    on: [],
    off: [],
    fromCache: 0,
    cacheEntries: 0,
    backendCalls: { on: 0, off: 0 },
    counts: { on: [], off: [] },
  };
  for (const side of ['on', 'off'] as const) {
    const clock = { now: START };
    const { service, hits, store, close } = serviceOver(backend, side === 'on', clock, stop, tag);
    try {
      const peeks = stored.counters.map(({ key, spec }) => ({ counter: { domain: 'lc', entries: [{ key, value: `v${tag}` }] }, spec, hits: 0 }));
      for (const [index, call] of calls.entries()) {
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
        if (stored.after.includes(index)) {
          const now = await store.check(peeks, { deadline: Date.now() + 10_000, stopIncrementWhenOverLimit: false });
          out.counts[side].push(now.map((r) => r.used));
        }
      }
    } finally {
      await close();
    }
    out.fromCache += hits.fromCache;
    out.cacheEntries = Math.max(out.cacheEntries, hits.cacheEntries);
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

describe.each(['memory', 'redis', 'cluster'] as const)('a list through the local over-limit cache on %s', (backend) => {
  for (const stop of [false, true]) {
    test(`answers as the backend does, status and headers included${stop ? ' (STOP mode)' : ''}`, async () => {
      const { on, off, cacheEntries } = await onAndOff(backend, ISSUE_SEQUENCE, stop, `issue${stop ? 's' : ''}`);
      // The burst's counter is full from the first 2-hit request on: the cache holds its denial
      // after that, and the list, whose hourly limit it does not know denied, goes to the backend
      // whole (only a list known denied in every member is answered from the cache).
      expect(cacheEntries).toBeGreaterThanOrEqual(1);
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
      const { on, off, cacheEntries } = await onAndOff(backend, calls, stop, `mix${stop ? 's' : ''}`);
      expect(cacheEntries).toBeGreaterThan(0);
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

// The review's case (issue 27, finding 2, STOP mode): a cached denial made the rest of its request
// a held-back look, where the backend's STOP rule looks with the hits and charges a fixed_window
// check that is over. `k30: [2/s, 30/h]` cached over, `b: 10/h` at 9, then [k30 1, b 2]: the
// backend says b OVER_LIMIT and stores 11; the cache said b OK, remaining 1, and stored 9, so the
// next [b 1] was OK with the cache and OVER_LIMIT without. The same with a plain descriptor
// (`p: 1/h`) cached over. Count mode must agree too (there every descriptor is charged anyway).
// Stored counts are compared right after each request that mixes a cached denial with others. A
// counter the cache answers is not charged by the requests it answers (by design, as the
// reference's local cache; docs/differences.md): the cached one (k30, p) is left out, and so is b
// once it is over (from the request that puts it over on, the cache answers it).
const FW = (limit: number, windowSeconds = 3600): LimitSpec => ({ algorithm: 'fixed_window', limit, windowSeconds, burst: limit });
const STORED: Stored[] = [
  { key: 'near', spec: { algorithm: 'token_bucket', limit: 10, windowSeconds: 3600, burst: 10 } },
  { key: 'b', spec: FW(10) },
];

/** `cached` filled until the cache holds its denial, `b` at 9 and `near` at 9, then requests that mix them. */
function cachedBesideNear(cached: 'k30' | 'p'): Call[] {
  const fill: Call[] =
    cached === 'k30'
      ? [
          { at: 0, descriptors: [['k30', 1]] },
          { at: 1, descriptors: [['k30', 1]] },
          { at: 2, descriptors: [['k30', 1]] },
        ]
      : [
          { at: 0, descriptors: [['p', 1]] },
          { at: 1, descriptors: [['p', 1]] },
        ];
  return [
    { at: 0, descriptors: [['b', 9]] },
    { at: 0, descriptors: [['near', 9]] },
    ...fill,
    // The cached denial beside a check that its own hits put over, and one they do not.
    {
      at: 10,
      descriptors: [
        [cached, 1],
        ['b', 2],
      ],
    },
    { at: 11, descriptors: [['b', 1]] },
    {
      at: 12,
      descriptors: [
        [cached, 1],
        ['near', 2],
      ],
    },
    { at: 13, descriptors: [['near', 1]] },
    {
      at: 14,
      descriptors: [
        [cached, 1],
        ['near', 1],
        ['b', 1],
      ],
    },
    {
      at: 15,
      descriptors: [
        ['b', 1],
        [cached, 1],
        ['near', 1],
      ],
    },
    {
      at: 16,
      descriptors: [
        [cached, 1],
        [cached, 1],
      ],
    },
    // The cached counter again with hits the cache has no entry for (its own answer differs).
    {
      at: 17,
      descriptors: [
        [cached, 1],
        [cached, 2],
        ['near', 1],
      ],
    },
    {
      at: 1_100,
      descriptors: [
        [cached, 1],
        ['b', 1],
        ['near', 1],
      ],
    },
    { at: 1_200, descriptors: [['near', 1]] },
  ];
}

describe.each(['memory', 'redis', 'cluster'] as const)('a cached denial beside near-limit descriptors on %s', (backend) => {
  for (const stop of [true, false]) {
    for (const cached of ['k30', 'p'] as const) {
      test(`${cached} cached over: every answer and stored count as without the cache${stop ? ' (STOP mode)' : ''}`, async () => {
        const calls = cachedBesideNear(cached);
        const tag = `near_${cached}_${stop ? 's' : 'c'}`;
        const mixed = calls.flatMap((c, i) => (c.descriptors.length > 1 ? [i] : []));
        const { on, off, fromCache, backendCalls, counts } = await onAndOff(backend, calls, stop, tag, { counters: STORED, after: mixed });
        expect(fromCache).toBeGreaterThan(0);
        if (stop) {
          // The backend's own answer to [cached, b 2] with b at 9: b over, charged.
          expect(off[cached === 'k30' ? 5 : 4]?.statuses[1]).toMatchObject({ code: 'OVER_LIMIT', limitRemaining: 0 });
        }
        expect(on).toEqual(off);
        // b after the first mixed request (where the bug left it at 9), near after every one.
        const compared = (side: number[][]) => side.map((c, j) => (j === 0 ? c : c.slice(0, 1)));
        expect(compared(counts.on)).toEqual(compared(counts.off));
        if (stop) expect(counts.off[0]).toEqual([9, 11]);
        // Never more backend calls than without the cache: the request with a cached denial and
        // another check is one call, as without the cache; [cached, cached] none.
        expect(backendCalls.on).toBeLessThan(backendCalls.off);
        console.info(
          `${backend} ${tag}: backend calls with the cache ${backendCalls.on}, without ${backendCalls.off}; stored ${JSON.stringify(counts.off)}`,
        );
      });
    }
  }
});
