// Issue 26 / issue 28 review: the debug page's per-rule totals (RuleActivity) are kept for the
// rules of the RuleSet only. A limit override (Envoy's per-descriptor `limit`) makes a rule per
// request whose key holds request values: it is not recorded, or a client could grow the map
// without bound. A reload drops the totals of rules that left; the ones that stay keep theirs.
import { describe, expect, test } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { MemoryLimiter } from '../../../src/limiter/memory/memory-limiter';
import { PrometheusMetrics } from '../../../src/metrics/metrics';
import { RuleActivity } from '../../../src/metrics/rule-activity';
import { RateLimitService } from '../../../src/service/rate-limit-service';
import type { RequestDescriptor } from '../../../src/service/types';

const NOW = Date.UTC(2026, 0, 1, 12, 0, 30);

const compile = (text: string) => compileRules([parseRuleFile('svc.yaml', text)], { mergeDomainConfig: false });

const RULES = compile(`
domain: svc
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000000 }
  - key: team
    rate_limit: { unit: minute, requests_per_unit: 1000000 }
`);

const COUNTS = { totalHits: 1, withinLimit: 1, nearLimit: 0, overLimit: 0, overLimitWithLocalCache: 0, shadowMode: 0 };

function service(activity: RuleActivity): RateLimitService {
  return new RateLimitService({
    rules: () => RULES,
    limiter: new MemoryLimiter({ now: () => NOW }),
    metrics: new PrometheusMetrics(),
    config: {
      shadowMode: false,
      quotaMode: false,
      stopIncrementWhenOverLimit: false,
      nearLimitRatio: 0.8,
      responseDynamicMetadata: false,
      requestLimits: { maxDescriptors: 8, maxEntries: 4, maxKeyBytes: 64, maxValueBytes: 2048 },
    },
    activity,
  });
}

const user = (value: string, extra: Partial<RequestDescriptor> = {}): RequestDescriptor => ({ entries: [{ key: 'user', value }], ...extra });

describe('RuleActivity stays as small as the rules', () => {
  test('limit overrides with distinct request values add nothing; the rule itself still counts', async () => {
    const activity = new RuleActivity();
    const svc = service(activity);
    const padding = 'x'.repeat(1024);
    for (let i = 0; i < 2000; i++) {
      await svc.shouldRateLimit(
        { domain: 'svc', descriptors: [user(`${padding}${i}`, { limit: { requestsPerUnit: 10, unit: 'SECOND' } })], hitsAddend: 1 },
        NOW + 1000,
      );
    }
    expect(activity.size).toBeLessThanOrEqual(RULES.rules.length);
    await svc.shouldRateLimit({ domain: 'svc', descriptors: [user('alice')], hitsAddend: 1 }, NOW + 1000);
    const rule = RULES.rulesByDomain.get('svc')!.find((r) => r.fullKey === 'svc.user')!;
    expect(activity.totals('svc', rule).hits).toBe(1);
    expect(activity.size).toBe(1);
  });

  test('a reload drops the totals of the rules that left and keeps the others', () => {
    const activity = new RuleActivity();
    const [userRule, teamRule] = RULES.rulesByDomain.get('svc')!;
    activity.record('svc', userRule!, COUNTS);
    activity.record('svc', teamRule!, COUNTS);
    expect(activity.size).toBe(2);
    const reloaded = compile(`
domain: svc
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 5 }
`);
    activity.rulesLoaded(reloaded);
    expect(activity.size).toBe(1);
    expect(activity.totals('svc', teamRule!).hits).toBe(0);
    const kept = reloaded.rulesByDomain.get('svc')![0]!;
    expect(activity.totals('svc', kept).hits).toBe(1);
    // The old rule object, recorded after the reload (a call in flight), counts under its key again: bounded by that rule set.
    activity.record('svc', kept, COUNTS);
    expect(activity.totals('svc', kept).hits).toBe(2);
  });
});
