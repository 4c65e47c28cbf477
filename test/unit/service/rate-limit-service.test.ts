import { describe, expect, test } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import type { RuleSet } from '../../../src/config/rule-types';
import { InvalidRequestError, NotReadyError } from '../../../src/base/errors';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { PrometheusMetrics } from '../../../src/metrics/metrics';
import { RateLimitService, type ServiceConfig } from '../../../src/service/rate-limit-service';
import type { RateLimitRequest, RequestDescriptor } from '../../../src/service/types';

const RULES = `
domain: svc
descriptors:
  - key: user
    rate_limit: { name: per_user, unit: minute, requests_per_unit: 3 }
  - key: plan
    value: premium
    rate_limit:
      name: premium
      unit: minute
      requests_per_unit: 100
      replaces: [{ name: per_user }]
  - key: free
    rate_limit: { unlimited: true }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: q1
    quota_mode: true
    metadata: { team: a }
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: q2
    quota_mode: true
    metadata: { team: b, extra: x }
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: zero
    rate_limit: { unit: hour, requests_per_unit: 0 }
  - key: qhour
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 0 }
  - key: minute
    rate_limit: { unit: minute, requests_per_unit: 0 }
  - key: detailed
    detailed_metric: true
    metadata: { team: detailed }
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: open
`;

// 12:00:30 UTC: a minute window resets in 30 s, an hour window in 3570 s.
const NOW = Date.UTC(2026, 0, 1, 12, 0, 30);

const BASE_CONFIG: ServiceConfig = {
  shadowMode: false,
  quotaMode: false,
  stopIncrementWhenOverLimit: false,
  nearLimitRatio: 0.8,
  responseDynamicMetadata: false,
  requestLimits: { maxDescriptors: 8, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 64 },
};

const COMPILED = compileRules([parseRuleFile('svc.yaml', RULES)], { mergeDomainConfig: false });

function setup(config: Partial<ServiceConfig> = {}, rules: RuleSet | null = COMPILED) {
  const metrics = new PrometheusMetrics();
  const limiter = new MemoryLimiter({ now: () => NOW });
  const service = new RateLimitService({ rules: () => rules ?? undefined, limiter, metrics, config: { ...BASE_CONFIG, ...config } });
  const call = (descriptors: RequestDescriptor[], hitsAddend = 1, domain = 'svc') =>
    service.shouldRateLimit({ domain, descriptors, hitsAddend } satisfies RateLimitRequest, NOW + 1000);
  return { service, metrics, limiter, call };
}

const d = (entries: Record<string, string>, extra: Partial<RequestDescriptor> = {}): RequestDescriptor => ({
  entries: Object.entries(entries).map(([key, value]) => ({ key, value })),
  ...extra,
});

async function metricValue(metrics: PrometheusMetrics, name: string, labels: string): Promise<number> {
  const text = await metrics.registry.getSingleMetricAsString(name);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

describe('RateLimitService', () => {
  test('request-level hits count, and the status carries limit, remaining and reset', async () => {
    const { call } = setup();
    const first = await call([d({ user: 'alice' })], 2);
    expect(first).toMatchObject({
      overallCode: 'OK',
      statuses: [
        { code: 'OK', limitRemaining: 1, durationUntilResetSeconds: 30, currentLimit: { name: 'per_user', requestsPerUnit: 3, unit: 'MINUTE' } },
      ],
    });
    const second = await call([d({ user: 'alice' })], 2);
    expect(second.overallCode).toBe('OVER_LIMIT');
    expect(second.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limitRemaining: 0 });
  });

  test('a descriptor hits_addend replaces the request one, and 0 only checks', async () => {
    const { call } = setup();
    const peek = await call([d({ user: 'bob' }, { hitsAddend: 0 })], 5);
    expect(peek.statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 3 });
    const two = await call([d({ user: 'bob' }, { hitsAddend: 2 })], 1);
    expect(two.statuses[0]!.limitRemaining).toBe(1);
    const peekAgain = await call([d({ user: 'bob' }, { hitsAddend: 0 })]);
    expect(peekAgain.statuses[0]!.limitRemaining).toBe(1);
  });

  test('a limit override replaces the rule, keyed by its own window, and works without a matching rule', async () => {
    const { call } = setup();
    const res = await call([
      d({ user: 'carol' }, { limit: { requestsPerUnit: 1, unit: 'SECOND' } }),
      d({ nothing: 'here' }, { limit: { requestsPerUnit: 7, unit: 'HOUR' } }),
    ]);
    expect(res.statuses[0]).toMatchObject({
      code: 'OK',
      limitRemaining: 0,
      durationUntilResetSeconds: 1,
      currentLimit: { requestsPerUnit: 1, unit: 'SECOND' },
    });
    expect(res.statuses[0]!.currentLimit!.name).toBeUndefined();
    expect(res.statuses[1]).toMatchObject({ code: 'OK', limitRemaining: 6, currentLimit: { requestsPerUnit: 7, unit: 'HOUR' } });
    // The per-minute rule's counter was not touched by the override.
    expect((await call([d({ user: 'carol' })])).statuses[0]!.limitRemaining).toBe(2);
    // An unknown domain gets no limit even with an override.
    const unknown = await call([d({ user: 'carol' }, { limit: { requestsPerUnit: 1, unit: 'SECOND' } })], 1, 'nope');
    expect(unknown.statuses[0]!.currentLimit).toBeUndefined();
  });

  test('an override is counted under the matched rule key, or one fixed key: never the request values (issue 8)', async () => {
    const { call, metrics } = setup();
    const override = { limit: { requestsPerUnit: 5, unit: 'SECOND' as const } };
    for (let i = 0; i < 20; i++) await call([d({ user: `u${i}-${'x'.repeat(40)}` }, override), d({ nothing: `n${i}` }, override)]);
    const text = await metrics.registry.getSingleMetricAsString('ratelimit_service_rate_limit_total_hits');
    const series = text.split('\n').filter((l) => l.startsWith('ratelimit_service_rate_limit_total_hits{'));
    console.log(`40 overrides with 40 distinct values: ${series.length} series`);
    expect(text).not.toContain('xxxx');
    expect(await metricValue(metrics, 'ratelimit_service_rate_limit_total_hits', 'domain="svc",key1="user",key2=""')).toBe(20);
    expect(await metricValue(metrics, 'ratelimit_service_rate_limit_total_hits', 'domain="svc",key1="limit_override",key2=""')).toBe(20);
    expect(series).toHaveLength(2);
  });

  test('replaces removes the named rule from the request: no status limit, no counting', async () => {
    const { call } = setup();
    const res = await call([d({ user: 'dave' }), d({ plan: 'premium' })]);
    expect(res.statuses[0]).toEqual({ code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 });
    expect(res.statuses[1]).toMatchObject({ code: 'OK', limitRemaining: 99, currentLimit: { name: 'premium' } });
    expect((await call([d({ user: 'dave' })])).statuses[0]!.limitRemaining).toBe(2);
  });

  test('unlimited, whitelist, no rule and unknown domain', async () => {
    const { call, metrics } = setup();
    const res = await call([d({ free: 'x' }), d({ open: 'x' }), d({ missing: 'x' }), d({})]);
    expect(res.overallCode).toBe('OK');
    expect(res.statuses).toEqual([
      { code: 'OK', limitRemaining: 4294967295, durationUntilResetSeconds: 0 },
      { code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 },
      { code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 },
      { code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 },
    ]);
    await call([d({ user: 'x' })], 1, 'ghost');
    expect(await metricValue(metrics, 'ratelimit_service_domain_not_found', 'domain="(unknown)"')).toBe(1);
  });

  test('requests_per_unit 0 is always over', async () => {
    const { call } = setup();
    expect((await call([d({ zero: 'z' })])).statuses[0]).toMatchObject({ code: 'OVER_LIMIT', durationUntilResetSeconds: 3570 });
  });

  test('shadow_mode: over the limit reports OK and counts shadow hits', async () => {
    const { call, metrics } = setup();
    await call([d({ shadow: 's' })]);
    const res = await call([d({ shadow: 's' })]);
    expect(res.overallCode).toBe('OK');
    expect(res.statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 0 });
    expect(await metricValue(metrics, 'ratelimit_service_rate_limit_shadow_mode', 'domain="svc",key1="shadow",key2=""')).toBe(1);
    expect(await metricValue(metrics, 'ratelimit_service_rate_limit_over_limit', 'domain="svc",key1="shadow",key2=""')).toBe(1);
  });

  test('global SHADOW_MODE turns OVER_LIMIT into OK overall', async () => {
    const { call } = setup({ shadowMode: true });
    const res = await call([d({ zero: 'z' })]);
    expect(res.overallCode).toBe('OK');
    expect(res.statuses[0]!.code).toBe('OVER_LIMIT');
  });

  test('global SHADOW_MODE counts each OVER_LIMIT it turned into OK (the reference global_shadow_mode stat)', async () => {
    const { call, metrics } = setup({ shadowMode: true });
    await call([d({ zero: 'z' })]);
    await call([d({ user: 'bob' })]);
    const text = await metrics.registry.getSingleMetricAsString('ratelimit_service_global_shadow_mode');
    expect(text).toContain('ratelimit_service_global_shadow_mode 1');
  });

  test('quota_mode: over only when every quota descriptor is over, or any other one is', async () => {
    const { call } = setup();
    await call([d({ q1: 'a' }), d({ q2: 'a' })]);
    // q1 over, q2 fresh → not every quota descriptor is over.
    expect((await call([d({ q1: 'a' }), d({ q2: 'b' })])).overallCode).toBe('OK');
    // Both over.
    expect((await call([d({ q1: 'a' }), d({ q2: 'a' })])).overallCode).toBe('OVER_LIMIT');
    // A quota descriptor over alone is "all of them".
    expect((await call([d({ q1: 'a' })])).overallCode).toBe('OVER_LIMIT');
    // A non-quota descriptor over wins regardless.
    expect((await call([d({ q2: 'c' }), d({ zero: 'z' })])).overallCode).toBe('OVER_LIMIT');
  });

  test('QUOTA_MODE makes every rule a quota rule', async () => {
    const { call } = setup({ quotaMode: true });
    expect((await call([d({ zero: 'z' }), d({ user: 'quota' })])).overallCode).toBe('OK');
  });

  test('response headers come from the most restrictive status; Retry-After on OVER_LIMIT', async () => {
    const { call } = setup({ headers: { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' } });
    const ok = await call([d({ plan: 'premium' }), d({ q1: 'h' })]);
    expect(ok.responseHeadersToAdd).toEqual([
      { key: 'RateLimit-Limit', value: '1' },
      { key: 'RateLimit-Remaining', value: '0' },
      { key: 'RateLimit-Reset', value: '30' },
    ]);
    const over = await call([d({ free: 'x' }), d({ zero: 'z' })]);
    expect(over.responseHeadersToAdd).toEqual([
      { key: 'RateLimit-Limit', value: '0' },
      { key: 'RateLimit-Remaining', value: '0' },
      { key: 'RateLimit-Reset', value: '3570' },
      { key: 'Retry-After', value: '3570' },
    ]);
    const none = setup();
    expect((await none.call([d({ zero: 'z' })])).responseHeadersToAdd).toEqual([]);
  });

  test('headers describe the last over-limit status; Retry-After waits for every over-limit one', async () => {
    const { call } = setup({ headers: { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' } });
    const res = await call([d({ zero: 'z' }), d({ minute: 'm' })]);
    expect(res.responseHeadersToAdd).toEqual([
      { key: 'RateLimit-Limit', value: '0' },
      { key: 'RateLimit-Remaining', value: '0' },
      { key: 'RateLimit-Reset', value: '30' },
      { key: 'Retry-After', value: '3570' },
    ]);
  });

  test('Retry-After with quota rules: the request is allowed again once any one quota rule is', async () => {
    const { call } = setup({ headers: { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' } });
    // Both quota rules over: the minute one frees the request in 30 s, not the hour one in 3570 s.
    await call([d({ q1: 'r' })]);
    const res = await call([d({ qhour: 'r' }), d({ q1: 'r' })]);
    expect(res.overallCode).toBe('OVER_LIMIT');
    expect(res.responseHeadersToAdd.find((h) => h.key === 'Retry-After')?.value).toBe('30');
    // A non-quota rule over for an hour keeps it over for an hour, whatever the quota rules say.
    const blocked = await call([d({ q1: 'r' }), d({ zero: 'r' })]);
    expect(blocked.responseHeadersToAdd.find((h) => h.key === 'Retry-After')?.value).toBe('3570');
  });

  test('dynamic metadata: domain, descriptors, hitsAddend, the merged metadata of the rules that passed', async () => {
    const { call } = setup({ responseDynamicMetadata: true });
    const first = await call([d({ q1: 'm' }), d({ q2: 'm' }), d({ zero: 'z' })], 1);
    // q1 and q2 pass (q1 first: its `team` wins); zero is over and adds nothing. No failed_descriptors.
    expect(first.dynamicMetadata).toEqual({
      domain: 'svc',
      descriptors: [{ entries: ['q1=m'] }, { entries: ['q2=m'] }, { entries: ['zero=z'] }],
      hitsAddend: 1,
      metadata: { team: 'a', extra: 'x' },
    });
    // Both quota rules over now: no metadata at all.
    const second = await call([d({ q1: 'm' }), d({ q2: 'm' })], 2);
    expect(second.dynamicMetadata).toEqual({ domain: 'svc', descriptors: [{ entries: ['q1=m'] }, { entries: ['q2=m'] }], hitsAddend: 2 });
    // A request whose hits_addend was not sent (0 on the wire) has no top-level hitsAddend.
    const service = setup({ responseDynamicMetadata: true }).service;
    const unsent = await service.shouldRateLimit(
      { domain: 'svc', descriptors: [d({ q1: 'n' })], hitsAddend: 1, hitsAddendAsSent: 0 },
      NOW + 1000,
    );
    expect(unsent.dynamicMetadata).toEqual({ domain: 'svc', descriptors: [{ entries: ['q1=n'] }], metadata: { team: 'a' } });
    await expect(
      setup()
        .call([d({ q1: 'm' })])
        .then((r) => r.dynamicMetadata),
    ).resolves.toBeUndefined();
  });

  test('dynamic metadata: a detailed_metric rule keeps its metadata; a limit override never has any', async () => {
    const { call } = setup({ responseDynamicMetadata: true });
    const detailed = await call([d({ detailed: 'v1' })]);
    expect(detailed.dynamicMetadata?.metadata).toEqual({ team: 'detailed' });
    const overridden = await call([d({ detailed: 'v1' }, { limit: { requestsPerUnit: 9, unit: 'MINUTE' } })]);
    expect(overridden.dynamicMetadata).toEqual({
      domain: 'svc',
      descriptors: [{ entries: ['detailed=v1'], limit: 'requests_per_unit:9 unit:MINUTE' }],
      hitsAddend: 1,
    });
  });

  test('STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: one descriptor over → the others are not charged', async () => {
    const { call } = setup({ stopIncrementWhenOverLimit: true });
    const res = await call([d({ user: 'erin' }), d({ zero: 'z' })]);
    expect(res.overallCode).toBe('OVER_LIMIT');
    expect((await call([d({ user: 'erin' }, { hitsAddend: 0 })])).statuses[0]!.limitRemaining).toBe(3);
    const plain = setup();
    await plain.call([d({ user: 'erin' }), d({ zero: 'z' })]);
    expect((await plain.call([d({ user: 'erin' }, { hitsAddend: 0 })])).statuses[0]!.limitRemaining).toBe(2);
  });

  test('hit metrics split within / near / over like the reference', async () => {
    const { call, metrics } = setup();
    await call([d({ user: 'm' })], 2);
    await call([d({ user: 'm' })], 2);
    const labels = 'domain="svc",key1="user",key2=""';
    expect(await metricValue(metrics, 'ratelimit_service_rate_limit_total_hits', labels)).toBe(4);
    expect(await metricValue(metrics, 'ratelimit_service_rate_limit_within_limit', labels)).toBe(2);
    expect(await metricValue(metrics, 'ratelimit_service_rate_limit_over_limit', labels)).toBe(1);
    // near threshold floor(3 × 0.8) = 2: hits 3 (the one at count 3) is near.
    expect(await metricValue(metrics, 'ratelimit_service_rate_limit_near_limit', labels)).toBe(1);
  });

  test('invalid requests and missing rules are typed errors', async () => {
    const { call } = setup();
    await expect(call([d({ user: 'a' })], 1, '')).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(call([])).rejects.toThrow('rate limit descriptor list must not be empty');
    await expect(call([d({ user: 'x'.repeat(65) })])).rejects.toThrow(/longer than 64 bytes/);
    await expect(call(Array.from({ length: 9 }, () => d({ user: 'a' })))).rejects.toThrow(/too many descriptors/);
    await expect(call([d({ a: '1', b: '2', c: '3', e: '4', f: '5' })])).rejects.toThrow(/too many entries/);
    const noRules = setup({}, null);
    await expect(noRules.call([d({ user: 'a' })])).rejects.toBeInstanceOf(NotReadyError);
  });
});
