import { expect, test } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { PrometheusMetrics } from '../../../src/metrics/metrics';
import { PrometheusPolicyMetrics } from '../../../src/metrics/policy-metrics';
import { MemoryPolicyStore } from '../../../src/policy/memory-policy-store';
import { PolicyEngine } from '../../../src/policy/policy-engine';
import { RateLimitService } from '../../../src/service/rate-limit-service';
import type { RequestDescriptor } from '../../../src/service/types';

// How the service applies tiers: every matched rule is scaled (token bucket capacity too, and a
// descriptor's limit override); the box denies a request even when no rule matches.
const RULES = `
domain: p
policy:
  client: ip
  window_seconds: 60
  weights: { requests: 1, repeats: 0, routes: 0, denials: 0 }
  thresholds: { elevated: 2, suspicious: 3, blocked: 4 }
  limit_percent: { elevated: 50, suspicious: 10 }
  blocked_seconds: 90
descriptors:
  - key: ip
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: bucket
    rate_limit: { unit: minute, requests_per_unit: 40, algorithm: token_bucket, burst: 20 }
`;
const START = Date.UTC(2030, 0, 1);

test('tiers scale every matched limit and the box denies even without a matching rule', async () => {
  const clock = { now: START };
  const rules = compileRules([parseRuleFile('p.yaml', RULES)], { mergeDomainConfig: false });
  const metrics = new PrometheusMetrics();
  const service = new RateLimitService({
    rules: () => rules,
    limiter: new MemoryLimiter({ now: () => clock.now }),
    metrics,
    policy: new PolicyEngine({ store: new MemoryPolicyStore({ now: () => clock.now }), metrics: new PrometheusPolicyMetrics(metrics.registry) }),
    config: {
      shadowMode: false,
      quotaMode: false,
      stopIncrementWhenOverLimit: false,
      nearLimitRatio: 0.8,
      responseDynamicMetadata: false,
      headers: { limit: 'L', remaining: 'R', reset: 'S' },
      requestLimits: { maxDescriptors: 8, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 64 },
    },
  });
  const descriptors: RequestDescriptor[] = [
    { entries: [{ key: 'ip', value: '1' }] },
    { entries: [{ key: 'bucket', value: 'b' }] },
    { entries: [{ key: 'other', value: 'o' }], limit: { requestsPerUnit: 30, unit: 'HOUR' } },
    { entries: [{ key: 'nomatch', value: 'x' }] },
  ];
  const call = () => service.shouldRateLimit({ domain: 'p', descriptors, hitsAddend: 1 }, Date.now() + 1000);
  const limits = (r: Awaited<ReturnType<typeof call>>) => r.statuses.map((s) => s.currentLimit?.requestsPerUnit);

  expect(limits(await call())).toEqual([100, 40, 30, undefined]);
  // elevated: half of each limit; the bucket's capacity 20 → 10 keeps what was used (its debt
  // of 1), and this call uses one more.
  const elevated = await call();
  expect(limits(elevated)).toEqual([50, 20, 15, undefined]);
  expect(elevated.statuses[1]?.limitRemaining).toBe(8);
  expect(limits(await call())).toEqual([10, 4, 3, undefined]);
  const boxed = await call();
  expect(boxed.overallCode).toBe('OVER_LIMIT');
  expect(limits(boxed)).toEqual([0, 0, 0, undefined]);
  expect(boxed.responseHeadersToAdd).toContainEqual({ key: 'Retry-After', value: '90' });
  expect(boxed.responseHeadersToAdd).toContainEqual({ key: 'X-Floodgate-Tier', value: 'blocked' });

  // In the box, a request whose only descriptor matches no rule is denied as well.
  clock.now += 30_000;
  const bare = await service.shouldRateLimit(
    {
      domain: 'p',
      descriptors: [
        {
          entries: [
            { key: 'ip', value: '1' },
            { key: 'z', value: 'z' },
          ],
        },
      ],
      hitsAddend: 1,
    },
    Date.now() + 1000,
  );
  expect(bare.overallCode).toBe('OVER_LIMIT');
  expect(bare.statuses).toEqual([{ code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 }]);
  expect(bare.responseHeadersToAdd).toEqual([
    { key: 'Retry-After', value: '60' },
    { key: 'X-Floodgate-Tier', value: 'blocked' },
  ]);
});
