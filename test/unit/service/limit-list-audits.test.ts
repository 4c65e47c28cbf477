// Issue 27, "not yet audited": `rate_limits` lists (issue 21) with the adaptive policy, with
// `replaces`, and with SHADOW_MODE, each held to the rule README.md ("Several limits on one
// descriptor") states for it, on the memory backend with a pinned clock.
import { describe, expect, test } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import type { LimitSpec } from '../../../src/domain/limit-spec';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { PrometheusMetrics } from '../../../src/metrics/metrics';
import { PrometheusPolicyMetrics } from '../../../src/metrics/policy-metrics';
import { MemoryPolicyStore } from '../../../src/policy/memory-policy-store';
import { PolicyEngine } from '../../../src/policy/policy-engine';
import { RateLimitService, type ServiceConfig } from '../../../src/service/rate-limit-service';
import type { RateLimitResponse, RequestDescriptor } from '../../../src/service/types';

const START = Date.UTC(2030, 0, 1, 5) + 600_000;

const CONFIG: ServiceConfig = {
  shadowMode: false,
  quotaMode: false,
  stopIncrementWhenOverLimit: false,
  nearLimitRatio: 0.8,
  responseDynamicMetadata: true,
  headers: { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' },
  requestLimits: { maxDescriptors: 8, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 64 },
};

function serviceOf(yaml: string, options: { shadowMode?: boolean; policy?: boolean } = {}) {
  const clock = { now: START };
  const rules = compileRules([parseRuleFile('a.yaml', yaml)], { mergeDomainConfig: false });
  const metrics = new PrometheusMetrics();
  const memory = new MemoryLimiter({ now: () => clock.now, sweepIntervalMs: 3_600_000 });
  const service = new RateLimitService({
    rules: () => rules,
    limiter: memory,
    metrics,
    ...(options.policy === true && {
      policy: new PolicyEngine({
        store: new MemoryPolicyStore({ now: () => clock.now }),
        metrics: new PrometheusPolicyMetrics(metrics.registry),
      }),
    }),
    config: { ...CONFIG, shadowMode: options.shadowMode ?? false },
  });
  const call = (...descriptors: RequestDescriptor[]) => service.shouldRateLimit({ domain: 'a', descriptors, hitsAddend: 1 }, Date.now() + 1000);
  /** A counter's count as it stands (a peek: hits 0). */
  const count = async (entries: RequestDescriptor['entries'], spec: LimitSpec) =>
    (
      await memory.check([{ counter: { domain: 'a', entries }, spec, hits: 0 }], {
        deadline: Date.now() + 1000,
        stopIncrementWhenOverLimit: false,
      })
    )[0]?.used;
  return { clock, call, count, metrics };
}

const d = (key: string, value = 'v', hitsAddend?: number): RequestDescriptor => ({
  entries: [{ key, value }],
  ...(hitsAddend !== undefined && { hitsAddend }),
});
const fixedWindow = (limit: number, windowSeconds: number): LimitSpec => ({ algorithm: 'fixed_window', limit, windowSeconds, burst: limit });

/** The `limits` entry of the dynamic metadata of descriptor `i`: each limit's answer. */
function listed(r: RateLimitResponse, i = 0): { name?: string; requestsPerUnit: number; code: string }[] {
  const descriptors = r.dynamicMetadata?.descriptors as { limits?: { name?: string; requestsPerUnit: number; code: string }[] }[];
  return (descriptors[i]?.limits ?? []).map(({ name, requestsPerUnit, code }) => ({ name, requestsPerUnit, code }));
}

describe('a list under an adaptive policy tier: "a policy tier scales every limit"', () => {
  const RULES = `
domain: a
policy:
  client: ip
  window_seconds: 60
  weights: { requests: 1, repeats: 0, routes: 0, denials: 0 }
  thresholds: { elevated: 2, suspicious: 3, blocked: 4 }
  limit_percent: { elevated: 50, suspicious: 10 }
  blocked_seconds: 90
descriptors:
  - key: ip
    rate_limits:
      - { name: burst, unit: second, requests_per_unit: 4 }
      - { name: hourly, unit: hour, requests_per_unit: 10 }
`;

  test('every limit of the list is scaled, the list is decided all or nothing on the scaled limits, and the box denies it', async () => {
    const { call, count } = serviceOf(RULES, { policy: true });
    const ip = d('ip', '10.0.0.1');
    // normal: 4/s and 10/h.
    const normal = await call(ip);
    expect(normal.overallCode).toBe('OK');
    expect(listed(normal)).toEqual([
      { name: 'burst', requestsPerUnit: 4, code: 'OK' },
      { name: 'hourly', requestsPerUnit: 10, code: 'OK' },
    ]);
    // elevated (50 %): 2/s and 5/h, both admit the 2nd hit; the status is the burst's (fewest remaining), scaled.
    const elevated = await call(ip);
    expect(elevated.overallCode).toBe('OK');
    expect(listed(elevated)).toEqual([
      { name: 'burst', requestsPerUnit: 2, code: 'OK' },
      { name: 'hourly', requestsPerUnit: 5, code: 'OK' },
    ]);
    expect(elevated.statuses[0]).toMatchObject({ code: 'OK', currentLimit: { name: 'burst', requestsPerUnit: 2 }, limitRemaining: 0 });
    // suspicious (10 %): 0/s and 1/h, both deny: the list is refused and charges neither.
    const suspicious = await call(ip);
    expect(suspicious.overallCode).toBe('OVER_LIMIT');
    expect(listed(suspicious)).toEqual([
      { name: 'burst', requestsPerUnit: 0, code: 'OVER_LIMIT' },
      { name: 'hourly', requestsPerUnit: 1, code: 'OVER_LIMIT' },
    ]);
    expect(suspicious.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', currentLimit: { name: 'hourly', requestsPerUnit: 1 } });
    // blocked: the box denies the list, every limit at 0, Retry-After the box's time.
    const boxed = await call(ip);
    expect(boxed.overallCode).toBe('OVER_LIMIT');
    expect(listed(boxed).map((l) => [l.requestsPerUnit, l.code])).toEqual([
      [0, 'OVER_LIMIT'],
      [0, 'OVER_LIMIT'],
    ]);
    expect(boxed.responseHeadersToAdd).toContainEqual({ key: 'Retry-After', value: '90' });
    // The counters are the same at every tier (the limit is not part of a key): the two admitted
    // hits, nothing of the refused list nor of the box.
    expect(await count(ip.entries, fixedWindow(4, 1))).toBe(2);
    expect(await count(ip.entries, fixedWindow(10, 3600))).toBe(2);
  });
});

describe('`replaces` naming a member of a list: "a name in the list is the descriptor\'s, so replaces naming any limit of a list removes the whole list"', () => {
  const RULES = `
domain: a
descriptors:
  - key: api_key
    rate_limits:
      - { name: burst, unit: second, requests_per_unit: 1 }
      - { name: minute, unit: minute, requests_per_unit: 2 }
  - key: premium_last
    rate_limit: { unit: minute, requests_per_unit: 100, replaces: [{ name: minute }] }
  - key: premium_first
    rate_limit: { unit: minute, requests_per_unit: 100, replaces: [{ name: burst }] }
`;

  test.each(['premium_last', 'premium_first'])('%s: the list is removed whole and counts nothing', async (premium) => {
    const { call, count } = serviceOf(RULES);
    for (let k = 0; k < 3; k++) {
      const r = await call(d('api_key'), d(premium));
      expect(r.overallCode).toBe('OK');
      // The reference's answer for a replaced rule: OK, no limit.
      expect(r.statuses[0]).toEqual({ code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 });
      expect(r.statuses[1]).toMatchObject({ code: 'OK', currentLimit: { requestsPerUnit: 100 }, limitRemaining: 99 - k });
    }
    const entries = d('api_key').entries;
    expect(await count(entries, fixedWindow(1, 1))).toBe(0);
    expect(await count(entries, fixedWindow(2, 60))).toBe(0);
    // Without the replacing descriptor the list counts again, both limits.
    expect((await call(d('api_key'))).overallCode).toBe('OK');
    expect((await call(d('api_key'))).statuses[0]).toMatchObject({ code: 'OVER_LIMIT', currentLimit: { name: 'burst' } });
    expect(await count(entries, fixedWindow(2, 60))).toBe(1);
  });
});

describe('SHADOW_MODE=true with lists: "report OVER_LIMIT as OK everywhere (metrics still count)"', () => {
  const RULES = `
domain: a
descriptors:
  - key: k
    rate_limits:
      - { name: burst, unit: second, requests_per_unit: 2 }
      - { name: hourly, unit: hour, requests_per_unit: 3, algorithm: sliding_window }
  - key: other
    rate_limit: { unit: hour, requests_per_unit: 2 }
`;
  const SEQUENCE: [at: number, descriptors: RequestDescriptor[]][] = [
    [0, [d('k')]],
    [0, [d('k'), d('other')]],
    [10, [d('k', 'v', 2), d('other')]],
    [20, [d('k'), d('other')]],
    [1_100, [d('k', 'v', 2)]],
    [1_200, [d('k')]],
    [1_300, [d('k')]],
  ];

  test('only the overall code changes: each status, the counts, and the all or nothing are those without it', async () => {
    const on = serviceOf(RULES, { shadowMode: true });
    const off = serviceOf(RULES);
    let overs = 0;
    for (const [at, descriptors] of SEQUENCE) {
      on.clock.now = off.clock.now = START + at;
      const shadowed = await on.call(...descriptors);
      const plain = await off.call(...descriptors);
      expect(shadowed.overallCode).toBe('OK');
      expect(shadowed.statuses).toEqual(plain.statuses);
      expect(shadowed.dynamicMetadata).toEqual(plain.dynamicMetadata);
      if (plain.overallCode === 'OVER_LIMIT') overs++;
    }
    // The sequence reaches refused lists (the 2-hit ones and the hour's end of quota).
    expect(overs).toBeGreaterThanOrEqual(3);
    const entries = d('k').entries;
    const hourly: LimitSpec = { algorithm: 'sliding_window', limit: 3, windowSeconds: 3600, burst: 3 };
    expect(await on.count(entries, hourly)).toBe(await off.count(entries, hourly));
    expect(await on.count(entries, fixedWindow(2, 1))).toBe(await off.count(entries, fixedWindow(2, 1)));
    // A refused list charged nothing in shadow mode either: 3 admitted 1-hit calls.
    expect(await on.count(entries, hourly)).toBe(3);
    const shadowCount = (await on.metrics.registry.getSingleMetricAsString('ratelimit_service_global_shadow_mode')).match(/ (\d+)$/m)?.[1];
    expect(Number(shadowCount)).toBe(overs);
  });
});
