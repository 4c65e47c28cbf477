import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { PrometheusMetrics } from '../../../src/metrics/metrics';
import { PrometheusPolicyMetrics } from '../../../src/metrics/policy-metrics';
import { MemoryPolicyStore } from '../../../src/policy/memory-policy-store';
import { PolicyEngine } from '../../../src/policy/policy-engine';
import { RateLimitService } from '../../../src/service/rate-limit-service';
import { projectRoot } from '../../../src/base/paths';

// The README's worked example ("Adaptive policy"), row by row, with config/api.yaml, the real
// service and the memory backend on one injected clock.
const START = Date.UTC(2030, 0, 1); // the start of a minute and of a 10-second window

test('the README worked example', async () => {
  const clock = { now: START };
  const rules = compileRules([parseRuleFile('api.yaml', readFileSync(join(projectRoot, 'config/api.yaml'), 'utf8'))], {
    mergeDomainConfig: false,
  });
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
      responseDynamicMetadata: true,
      headers: { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' },
      requestLimits: { maxDescriptors: 8, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 64 },
    },
  });
  let n = 0;
  const call = async (atMs: number): Promise<[string, string, string, string | undefined, unknown]> => {
    clock.now = START + atMs;
    n++;
    const res = await service.shouldRateLimit(
      {
        domain: 'api',
        descriptors: [{ entries: [{ key: 'remote_address', value: '10.0.0.1' }] }, { entries: [{ key: 'request_hash', value: `h${n}` }] }],
        hitsAddend: 1,
      },
      Date.now() + 1000,
    );
    const h = (k: string): string | undefined => res.responseHeadersToAdd.find((x) => x.key === k)?.value;
    return [
      h('X-Floodgate-Tier') as string,
      res.overallCode,
      h('RateLimit-Limit') as string,
      h('Retry-After'),
      res.dynamicMetadata?.['floodgate.tier'],
    ];
  };
  const rows = [];
  for (let i = 0; i < 16; i++) rows.push(await call(i * 100));
  expect(rows.map((r) => r.slice(0, 4))).toEqual([
    ...Array.from({ length: 9 }, () => ['normal', 'OK', '10', undefined]),
    ['elevated', 'OVER_LIMIT', '5', expect.any(String)],
    ['elevated', 'OVER_LIMIT', '5', expect.any(String)],
    ['suspicious', 'OVER_LIMIT', '1', expect.any(String)],
    ['suspicious', 'OVER_LIMIT', '1', expect.any(String)],
    ['suspicious', 'OVER_LIMIT', '1', expect.any(String)],
    ['blocked', 'OVER_LIMIT', '0', '60'],
    ['blocked', 'OVER_LIMIT', '0', '60'],
  ]);
  expect(rows.every((r) => r[4] === r[0])).toBe(true);
  expect((await call(61_399))[0]).toBe('blocked');
  expect(await call(61_400)).toEqual(['suspicious', 'OK', '1', undefined, 'suspicious']);
  expect((await call(91_400)).slice(0, 3)).toEqual(['elevated', 'OK', '5']);
  expect((await call(121_400)).slice(0, 3)).toEqual(['normal', 'OK', '10']);
});
