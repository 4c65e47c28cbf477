// Issue 21: `check`, `explain`, `/rlconfig` and the debug page show every limit of a list.
import { RuleActivity } from '../../../src/metrics/rule-activity';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { domainSummary } from '../../../src/cli/check-command';
import { explainRequest, formatExplanation } from '../../../src/cli/explain-command';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { formatRuleConfig } from '../../../src/http/debug-routes';
import { debugState } from '../../../src/http/debug-page';
import { PrometheusMetrics } from '../../../src/metrics/metrics';

const FILE = join(__dirname, '../../fixtures/config/lists/api_lists.yaml');
const rules = compileRules([parseRuleFile('api_lists.yaml', readFileSync(FILE, 'utf8'))], { mergeDomainConfig: false });

describe('every limit of a list is shown', () => {
  test('check: the summary counts each limit and says how many are in lists', () => {
    expect(domainSummary('api', rules)).toBe('api: 4 rules (3 fixed_window, 1 token_bucket), 1 shadow, 3 in 1 rate_limits list');
  });

  test('/rlconfig: one line per limit, a list limit with its name', () => {
    expect(formatRuleConfig(rules)).toBe(
      'api.api_key (burst): unit=SECOND requests_per_unit=10, shadow_mode: false, quota_mode: false\n' +
        'api.api_key (daily): unit=DAY requests_per_unit=1000, shadow_mode: false, quota_mode: false\n' +
        'api.api_key (minute_x5_token_bucket): unit=MINUTE requests_per_unit=200, shadow_mode: false, quota_mode: false\n' +
        'api.plan_free.user: unit=SECOND requests_per_unit=2, shadow_mode: true, quota_mode: false\n',
    );
  });

  test('explain: each limit of the list with its Redis key', async () => {
    const list = await explainRequest(rules, 'api', [{ entries: [{ key: 'api_key', value: 'k1' }] }], 'p_');
    expect(formatExplanation(list)).toBe(
      'descriptor 1: api_key=k1\n' +
        '  api_key=k1: key only, any value (api.api_key)\n' +
        '  rate_limits: 3 limits, all or nothing (a hit is admitted when every limit admits it, and charged to all or none)\n' +
        "  rule api.api_key 'burst': 10 per 1 s (SECOND), algorithm fixed_window\n" +
        '  redis key: p_rl:{api:api_key=k1}:fixed_window:1:<window start, epoch s>\n' +
        "  rule api.api_key 'daily': 1000 per 86400 s (DAY), algorithm fixed_window\n" +
        '  redis key: p_rl:{api:api_key=k1}:fixed_window:86400:<window start, epoch s>\n' +
        "  rule api.api_key 'minute_x5_token_bucket': 200 per 300 s (MINUTE), algorithm token_bucket, burst 50\n" +
        '  redis key: p_rl:{api:api_key=k1}:token_bucket:300\n' +
        '  shadow mode: no\n' +
        '  quota mode: no\n',
    );
  });

  test('the debug page: a row per limit, named, with its own totals', async () => {
    const metrics = new PrometheusMetrics();
    // As the service records a list's limit: by the limit's rule (fullKey and limit name).
    const activity = new RuleActivity();
    activity.record(
      'api',
      { fullKey: 'api.api_key', limitName: 'daily' },
      {
        totalHits: 7,
        withinLimit: 7,
        nearLimit: 0,
        overLimit: 0,
        overLimitWithLocalCache: 0,
        shadowMode: 0,
      },
    );
    const state = (await debugState({
      rules: () => rules,
      registry: metrics.registry,
      backendType: 'memory',
      keyLayout: 'none (memory backend)',
      backendHealthy: () => true,
      serving: () => true,
      breakers: () => [],
      lastLoad: () => undefined,
      lastLoadError: () => undefined,
      activity,
    })) as { domains: { rules: { fullKey: string; name: string; limit: string; totals: { hits: number } }[] }[] };
    expect(state.domains[0]?.rules.map((r) => [r.fullKey, r.name, r.limit, r.totals.hits])).toEqual([
      ['api.api_key', 'burst', '10 / 1 s', 0],
      ['api.api_key', 'daily', '1000 / 86400 s', 7],
      ['api.api_key', 'minute_x5_token_bucket', '200 / 300 s', 0],
      ['api.plan_free.user', '', '2 / 1 s', 0],
    ]);
  });
});
