// Issue 21: what a descriptor with a `rate_limits` list answers: one status chosen among its
// limits, Retry-After until every denying limit admits, ietf headers listing every limit,
// each limit its own rule in the metrics, dynamic metadata with each limit, and the local
// over-limit cache answering a list only while one of its counters denies every request.
import { describe, expect, test } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { OverLimitCache } from '../../../src/limiter/over-limit-cache';
import type { Limiter } from '../../../src/limiter/limiter';
import { PrometheusMetrics } from '../../../src/metrics/metrics';
import { RateLimitService, type ServiceConfig } from '../../../src/service/rate-limit-service';
import type { RequestDescriptor } from '../../../src/service/types';

const RULES = compileRules(
  [
    parseRuleFile(
      'api.yaml',
      `
domain: api
descriptors:
  - key: api_key
    metadata: { team: core }
    rate_limits:
      - { name: burst, unit: second, requests_per_unit: 10 }
      - { name: minute, unit: minute, requests_per_unit: 30 }
  - key: tie1
    rate_limits:
      - { name: first, unit: minute, requests_per_unit: 1, algorithm: token_bucket }
      - { name: second, unit: minute, requests_per_unit: 1, algorithm: gcra }
  - key: tie2
    rate_limits:
      - { name: first, unit: minute, requests_per_unit: 1, algorithm: gcra }
      - { name: second, unit: minute, requests_per_unit: 1, algorithm: token_bucket }
  - key: even
    rate_limits:
      - { unit: second, requests_per_unit: 10 }
      - { unit: minute, requests_per_unit: 10 }
  - key: premium
    rate_limit: { unit: minute, requests_per_unit: 100, replaces: [{ name: burst }] }
  - key: user
    rate_limit: { name: per_user, unit: minute, requests_per_unit: 1 }
  - key: team
    rate_limits:
      - { unit: second, requests_per_unit: 5 }
      - { unit: hour, requests_per_unit: 50, replaces: [{ name: per_user }] }
  - key: shadowed
    shadow_mode: true
    rate_limits:
      - { unit: second, requests_per_unit: 1 }
      - { unit: hour, requests_per_unit: 1 }
`,
    ),
  ],
  { mergeDomainConfig: false },
);

const START = Date.UTC(2026, 0, 1);

const CONFIG: ServiceConfig = {
  shadowMode: false,
  quotaMode: false,
  stopIncrementWhenOverLimit: false,
  nearLimitRatio: 0.8,
  responseDynamicMetadata: true,
  headers: { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset', style: 'ietf' },
  requestLimits: { maxDescriptors: 8, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 64 },
};

function setup(wrap: (inner: Limiter) => Limiter = (inner) => inner) {
  const clock = { now: START + 400 };
  const memory = new MemoryLimiter({ now: () => clock.now });
  const metrics = new PrometheusMetrics();
  const service = new RateLimitService({ rules: () => RULES, limiter: wrap(memory), metrics, config: CONFIG });
  const call = (...descriptors: RequestDescriptor[]) =>
    service.shouldRateLimit({ domain: 'api', descriptors, hitsAddend: 1 }, Date.now() + 1000);
  return { clock, metrics, call, memory };
}

const d = (key: string, value = 'v'): RequestDescriptor => ({ entries: [{ key, value }] });
const header = (r: { responseHeadersToAdd: readonly { key: string; value: string }[] }, key: string) =>
  r.responseHeadersToAdd.find((h) => h.key === key)?.value;

async function metric(metrics: PrometheusMetrics, name: string, labels: string): Promise<number> {
  const text = await metrics.registry.getSingleMetricAsString(name);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

describe('one status per descriptor', () => {
  test('all admit: the limit with the fewest remaining, ties to the longest reset', async () => {
    const { call } = setup();
    const first = await call(d('api_key'));
    expect(first.statuses[0]).toEqual({
      code: 'OK',
      currentLimit: { name: 'burst', requestsPerUnit: 10, unit: 'SECOND' },
      limitRemaining: 9,
      durationUntilResetSeconds: 1,
    });
    // 9 left of each: the minute's reset is the longer.
    expect((await call(d('even'))).statuses[0]).toMatchObject({
      currentLimit: { requestsPerUnit: 10, unit: 'MINUTE' },
      limitRemaining: 9,
      durationUntilResetSeconds: 60,
    });
  });

  test('denied: the denying limit with the longest reset; resets that end together go to the limit listed first', async () => {
    const { call } = setup();
    await call(d('tie1'), d('tie2'));
    const denied = await call(d('tie1'), d('tie2'));
    expect(denied.statuses.map((s) => [s.code, s.currentLimit?.name, s.durationUntilResetSeconds])).toEqual([
      ['OVER_LIMIT', 'first', 60],
      ['OVER_LIMIT', 'first', 60],
    ]);
  });

  test('Retry-After is the time until every denying limit admits again', async () => {
    const { clock, call } = setup();
    for (let k = 0; k < 10; k++) await call(d('api_key'));
    clock.now = START + 1400;
    for (let k = 0; k < 10; k++) await call(d('api_key'));
    clock.now = START + 2400;
    for (let k = 0; k < 10; k++) await call(d('api_key'));
    clock.now = START + 2500;
    const both = await call(d('api_key'));
    // The second is spent (0.5 s left) and so is the minute (57.5 s left): both must admit again.
    expect(both.overallCode).toBe('OVER_LIMIT');
    expect(header(both, 'Retry-After')).toBe('58');
    expect(both.statuses[0]).toMatchObject({ currentLimit: { name: 'minute' }, durationUntilResetSeconds: 58 });
  });
});

describe('headers, metrics, metadata', () => {
  test('ietf: RateLimit-Policy lists every limit, RateLimit carries the chosen one', async () => {
    const { call } = setup();
    const r = await call(d('api_key'));
    expect(header(r, 'RateLimit-Policy')).toMatch(/^"burst";q=10;qu="requests";w=1;pk=:[^:]+:, "minute";q=30;qu="requests";w=60;pk=:[^:]+:$/);
    expect(header(r, 'RateLimit')).toMatch(/^"burst";r=9;t=1;pk=:[^:]+:$/);
  });

  test('each limit is its own rule in the metrics, named; a refused list charges no limit', async () => {
    const { call, metrics } = setup();
    for (let k = 0; k < 12; k++) await call(d('api_key'));
    const hits = (limit: string, name = 'ratelimit_service_rate_limit_total_hits') =>
      metric(metrics, name, `domain="api",key1="api_key",key2="${limit}"`);
    expect(await hits('burst')).toBe(12);
    expect(await hits('minute')).toBe(12);
    expect(await hits('burst', 'ratelimit_service_rate_limit_over_limit')).toBe(2);
    // The minute admitted the two refused hits, but they were not charged: neither within nor over.
    expect(await hits('minute', 'ratelimit_service_rate_limit_over_limit')).toBe(0);
    expect(await hits('minute', 'ratelimit_service_rate_limit_within_limit')).toBe(10);
  });

  test('dynamic metadata lists each limit with its answer', async () => {
    const { call } = setup();
    const r = await call(d('api_key'));
    expect(r.dynamicMetadata).toEqual({
      domain: 'api',
      descriptors: [
        {
          entries: ['api_key=v'],
          limits: [
            { name: 'burst', requestsPerUnit: 10, unit: 'SECOND', code: 'OK', limitRemaining: 9, durationUntilResetSeconds: 1 },
            { name: 'minute', requestsPerUnit: 30, unit: 'MINUTE', code: 'OK', limitRemaining: 29, durationUntilResetSeconds: 60 },
          ],
        },
      ],
      hitsAddend: 1,
      metadata: { team: 'core' },
    });
  });

  test('shadow_mode of the descriptor applies to all its limits', async () => {
    const { call } = setup();
    await call(d('shadowed'));
    const r = await call(d('shadowed'));
    expect(r.overallCode).toBe('OK');
    expect(r.statuses[0]?.code).toBe('OK');
  });
});

describe('replaces', () => {
  test('naming one limit of a list removes the whole list; a list entry replaces for the descriptor', async () => {
    const { call } = setup();
    const r = await call(d('api_key'), d('premium'));
    expect(r.statuses[0]).toEqual({ code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 });
    expect(r.statuses[1]?.currentLimit?.requestsPerUnit).toBe(100);
    // per_user (1/min) would deny the second call; the team list replaces it.
    await call(d('user'), d('team'));
    const second = await call(d('user'), d('team'));
    expect(second.overallCode).toBe('OK');
    expect(second.statuses[0]).toEqual({ code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 });
  });
});

describe('local over-limit cache', () => {
  test('an entry for a list denies it until the entry expires, never longer, and charges nothing meanwhile', async () => {
    const clockNow = { ms: 0 };
    let hits = 0;
    const { clock, call, memory } = setup((inner) => {
      const counting: Limiter = {
        check: (checks, options) => {
          hits++;
          return inner.check(checks, options);
        },
        isHealthy: () => true,
        close: () => inner.close(),
      };
      return new OverLimitCache(counting, { maxBytes: 100_000, now: () => clockNow.ms });
    });
    for (let k = 0; k < 10; k++) await call(d('api_key'));
    const denied = await call(d('api_key'));
    expect(denied.overallCode).toBe('OVER_LIMIT');
    // The second's counter is full until the second ends (600 ms): from the cache meanwhile, the
    // minute's counter only peeked at.
    clockNow.ms = 100;
    clock.now = START + 500;
    const cached = await call(d('api_key'));
    expect(cached.overallCode).toBe('OVER_LIMIT');
    const peek = async () =>
      (
        await memory.check(
          [
            {
              counter: { domain: 'api', entries: [{ key: 'api_key', value: 'v' }] },
              spec: { algorithm: 'fixed_window', limit: 30, windowSeconds: 60, burst: 30 },
              hits: 0,
            },
          ],
          { deadline: Date.now() + 1000, stopIncrementWhenOverLimit: false },
        )
      )[0]?.used;
    expect(await peek()).toBe(10);
    // Past the entry: the backend again, and the list admits.
    clockNow.ms = 700;
    clock.now = START + 1100;
    const before = hits;
    expect((await call(d('api_key'))).overallCode).toBe('OK');
    expect(hits).toBe(before + 1);
    expect(await peek()).toBe(11);
  });
});
