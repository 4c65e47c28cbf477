// Issue 21: a descriptor with `rate_limits`, run through the real RateLimitService on any
// Limiter (memory, standalone Redis, a cluster), with a pinned clock. The same expectations hold
// on every backend.
import { expect, test } from 'vitest';
import { compileRules } from '../../src/config/compile-rules';
import { parseRuleFile } from '../../src/config/parse-rule-file';
import type { LimitSpec } from '../../src/domain/limit-spec';
import type { Limiter } from '../../src/limiter/limiter';
import { PrometheusMetrics } from '../../src/metrics/metrics';
import { PrometheusPolicyMetrics } from '../../src/metrics/policy-metrics';
import { MemoryPolicyStore } from '../../src/policy/memory-policy-store';
import { PolicyEngine } from '../../src/policy/policy-engine';
import { RateLimitService, type ServiceConfig } from '../../src/service/rate-limit-service';
import type { RateLimitRequest, RequestDescriptor } from '../../src/service/types';

export const LIST_RULES = `
domain: api
descriptors:
  - key: api_key
    rate_limits:
      - { name: burst, unit: second, requests_per_unit: 10 }
      - { name: minute, unit: minute, requests_per_unit: 30 }
      - { name: daily, unit: day, requests_per_unit: 1000 }
  - key: mixed
    rate_limits:
      - { unit: second, requests_per_unit: 5, algorithm: token_bucket, burst: 5 }
      - { unit: minute, requests_per_unit: 8, algorithm: sliding_window }
      - { unit: day, requests_per_unit: 100 }
  - key: tie1
    rate_limits:
      - { name: first, unit: minute, requests_per_unit: 1, algorithm: token_bucket }
      - { name: second, unit: minute, requests_per_unit: 1, algorithm: gcra }
  - key: tie2
    rate_limits:
      - { name: first, unit: minute, requests_per_unit: 1, algorithm: gcra }
      - { name: second, unit: minute, requests_per_unit: 1, algorithm: token_bucket }
  - key: a
    rate_limits:
      - { unit: second, requests_per_unit: 2 }
      - { unit: day, requests_per_unit: 100 }
  - key: b
    rate_limits:
      - { unit: second, requests_per_unit: 5, algorithm: gcra, burst: 5 }
      - { unit: day, requests_per_unit: 100, algorithm: sliding_window }
`;

const TIERED_RULES = `
domain: tiered
policy:
  client: ip
  window_seconds: 3600
  weights: { requests: 1, repeats: 0, routes: 0, denials: 0 }
  thresholds: { elevated: 1, suspicious: 1000, blocked: 2000 }
  limit_percent: { elevated: 50, suspicious: 10 }
  blocked_seconds: 90
descriptors:
  - key: ip
    rate_limits:
      - { name: burst, unit: second, requests_per_unit: 10 }
      - { name: minute, unit: minute, requests_per_unit: 30 }
`;

const RULES = compileRules([parseRuleFile('api.yaml', LIST_RULES), parseRuleFile('tiered.yaml', TIERED_RULES)], { mergeDomainConfig: false });

const CONFIG: ServiceConfig = {
  shadowMode: false,
  quotaMode: false,
  stopIncrementWhenOverLimit: false,
  nearLimitRatio: 0.8,
  responseDynamicMetadata: false,
  requestLimits: { maxDescriptors: 8, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 64 },
};

/**
 * The start of the next UTC day: of a second, a minute and a day. Ahead of the real clock, as
 * Redis expires keys on its own clock (PEXPIREAT of a pinned past would drop them at once).
 */
export const T0 = Math.ceil(Date.now() / 86_400_000) * 86_400_000;

export interface ListBackend {
  /** A limiter whose clock is `now()` (epoch ms). */
  limiter(now: () => number): Limiter;
}

const d = (key: string, value: string, extra: Partial<RequestDescriptor> = {}): RequestDescriptor => ({ entries: [{ key, value }], ...extra });

const SPEC = {
  second: { algorithm: 'fixed_window', limit: 10, windowSeconds: 1, burst: 10 },
  minute: { algorithm: 'fixed_window', limit: 30, windowSeconds: 60, burst: 30 },
  day: { algorithm: 'fixed_window', limit: 1000, windowSeconds: 86400, burst: 1000 },
} satisfies Record<string, LimitSpec>;

/** The suite; `backend` makes a limiter per test, `fresh` gives each test its own descriptor values. */
export function limitListSuite(backend: ListBackend, fresh: () => string): void {
  function setup(config: Partial<ServiceConfig> = {}, domain = 'api') {
    let now = T0 + 250;
    const limiter = backend.limiter(() => now);
    const metrics = new PrometheusMetrics();
    const policy = new PolicyEngine({
      store: new MemoryPolicyStore({ now: () => now }),
      metrics: new PrometheusPolicyMetrics(metrics.registry),
    });
    const service = new RateLimitService({ rules: () => RULES, limiter, metrics, policy, config: { ...CONFIG, ...config } });
    const call = (descriptors: RequestDescriptor[]) =>
      service.shouldRateLimit({ domain, descriptors, hitsAddend: 1 } satisfies RateLimitRequest, Date.now() + 5000);
    /** The counter's value, peeked (hits 0). */
    const used = async (key: string, value: string, spec: LimitSpec) =>
      (
        await limiter.check([{ counter: { domain, entries: [{ key, value }] }, spec, hits: 0 }], {
          deadline: Date.now() + 5000,
          stopIncrementWhenOverLimit: false,
        })
      )[0]?.used;
    return { limiter, metrics, call, used, at: (ms: number) => (now = T0 + ms) };
  }

  test('10/s with 30/min and 1,000/day: 50/s for 5 s gets exactly 10 a second until the 30 are spent, then nothing until the minute ends', async () => {
    const { limiter, call, used, at } = setup();
    const key = fresh();
    const admittedPerSecond: number[] = [];
    for (let second = 0; second < 5; second++) {
      let admitted = 0;
      for (let k = 0; k < 50; k++) {
        at(second * 1000 + k * 20);
        if ((await call([d('api_key', key)])).overallCode === 'OK') admitted++;
      }
      admittedPerSecond.push(admitted);
    }
    expect(admittedPerSecond).toEqual([10, 10, 10, 0, 0]);
    // Only admitted hits were charged, in every counter, fixed windows included.
    expect(await used('api_key', key, SPEC.day)).toBe(30);
    expect(await used('api_key', key, SPEC.minute)).toBe(30);
    expect(await used('api_key', key, SPEC.second)).toBe(0);
    at(4999);
    const denied = await call([d('api_key', key)]);
    // The minute denies (its reset is the longest of the denying limits): its numbers, and
    // Retry-After until it admits again.
    expect(denied.statuses[0]).toEqual({
      code: 'OVER_LIMIT',
      currentLimit: { name: 'minute', requestsPerUnit: 30, unit: 'MINUTE' },
      limitRemaining: 0,
      durationUntilResetSeconds: 56,
    });
    at(59_999);
    expect((await call([d('api_key', key)])).overallCode).toBe('OVER_LIMIT');
    at(60_000);
    const next = await call([d('api_key', key)]);
    expect(next.overallCode).toBe('OK');
    // All admit: the limit with the fewest remaining (burst: 9 left).
    expect(next.statuses[0]).toMatchObject({ currentLimit: { name: 'burst' }, limitRemaining: 9, durationUntilResetSeconds: 1 });
    expect(await used('api_key', key, SPEC.day)).toBe(31);
    await limiter.close();
  }, 60_000);

  test('two denying limits whose resets end together: the one listed first is reported', async () => {
    const { limiter, call, at } = setup();
    const key = fresh();
    at(100);
    await call([d('tie1', key), d('tie2', key)]);
    at(200);
    const denied = await call([d('tie1', key), d('tie2', key)]);
    expect(denied.statuses.map((s) => [s.code, s.currentLimit?.name, s.durationUntilResetSeconds])).toEqual([
      ['OVER_LIMIT', 'first', 60],
      ['OVER_LIMIT', 'first', 60],
    ]);
    await limiter.close();
  }, 60_000);

  test('200 concurrent calls leave exact counts in every counter', async () => {
    const { limiter, call, used, at } = setup();
    const key = fresh();
    at(500);
    const answers = await Promise.all(Array.from({ length: 200 }, () => call([d('api_key', key)])));
    expect(answers.filter((a) => a.overallCode === 'OK').length).toBe(10);
    expect(await used('api_key', key, SPEC.second)).toBe(10);
    expect(await used('api_key', key, SPEC.minute)).toBe(10);
    expect(await used('api_key', key, SPEC.day)).toBe(10);
    await limiter.close();
  }, 60_000);

  test('mixed algorithms in one list: the tightest at each moment decides, denied hits spend nothing', async () => {
    const { limiter, call, used, at } = setup();
    const key = fresh();
    const burst = async (n: number) => {
      let ok = 0;
      for (let k = 0; k < n; k++) if ((await call([d('mixed', key)])).overallCode === 'OK') ok++;
      return ok;
    };
    at(100);
    expect(await burst(20)).toBe(5); // the bucket's 5
    at(1100);
    expect(await burst(20)).toBe(3); // 5 tokens back, but the sliding minute has 3 left
    at(30_100);
    expect(await burst(20)).toBe(0); // the sliding minute is still full
    expect(await used('mixed', key, { algorithm: 'fixed_window', limit: 100, windowSeconds: 86400, burst: 100 })).toBe(8);
    await limiter.close();
  }, 60_000);

  test('a limit override replaces the whole list with its one limit', async () => {
    const { limiter, call, used, at } = setup();
    const key = fresh();
    at(100);
    const over = d('api_key', key, { limit: { requestsPerUnit: 3, unit: 'HOUR' } });
    const codes = [];
    for (let k = 0; k < 5; k++) codes.push((await call([over])).overallCode);
    expect(codes).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);
    const answer = await call([over]);
    expect(answer.statuses[0]?.currentLimit).toEqual({ requestsPerUnit: 3, unit: 'HOUR' });
    // The list's counters were not touched.
    expect(await used('api_key', key, SPEC.second)).toBe(0);
    expect(await used('api_key', key, SPEC.day)).toBe(0);
    await limiter.close();
  }, 60_000);

  test('STOP mode across two descriptors, each with a list: a denied request charges neither list', async () => {
    const { limiter, call, used, at } = setup({ stopIncrementWhenOverLimit: true });
    const key = fresh();
    at(100);
    const both = [d('a', key), d('b', key)];
    expect((await call(both)).overallCode).toBe('OK');
    expect((await call(both)).overallCode).toBe('OK');
    // a's 2/s is spent: the request is denied; b admits, but is held back (as the reference
    // holds back every admitted descriptor), and a's fixed window is not charged (a list).
    const third = await call(both);
    expect(third.overallCode).toBe('OVER_LIMIT');
    expect(third.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
    expect(await used('a', key, { algorithm: 'fixed_window', limit: 2, windowSeconds: 1, burst: 2 })).toBe(2);
    expect(await used('a', key, { algorithm: 'fixed_window', limit: 100, windowSeconds: 86400, burst: 100 })).toBe(2);
    expect(await used('b', key, { algorithm: 'sliding_window', limit: 100, windowSeconds: 86400, burst: 100 })).toBe(2);
    // b alone is still admitted: its gcra had only 2 of its 5 taken.
    expect((await call([d('b', key)])).overallCode).toBe('OK');
    expect((await call([d('b', key)])).overallCode).toBe('OK');
    expect((await call([d('b', key)])).overallCode).toBe('OK');
    expect((await call([d('b', key)])).overallCode).toBe('OVER_LIMIT');
    expect(await used('b', key, { algorithm: 'sliding_window', limit: 100, windowSeconds: 86400, burst: 100 })).toBe(5);
    await limiter.close();
  }, 60_000);

  test('a policy tier scales every limit of the list', async () => {
    const { limiter, call, used, at } = setup({}, 'tiered');
    const key = fresh();
    // The client's first request already makes it elevated (threshold 1): half of each limit, 5/s and 15/min.
    const perSecond: number[] = [];
    let last;
    for (let second = 0; second < 4; second++) {
      let admitted = 0;
      for (let k = 0; k < 20; k++) {
        at(second * 1000 + k * 10);
        last = await call([d('ip', key)]);
        if (last.overallCode === 'OK') admitted++;
      }
      perSecond.push(admitted);
    }
    expect(perSecond).toEqual([5, 5, 5, 0]);
    expect(last?.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', currentLimit: { name: 'minute', requestsPerUnit: 15, unit: 'MINUTE' } });
    expect(await used('ip', key, { algorithm: 'fixed_window', limit: 30, windowSeconds: 60, burst: 30 })).toBe(15);
    await limiter.close();
  }, 60_000);
}
