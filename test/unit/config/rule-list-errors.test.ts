// Issue 21: `rate_limits`, several limits on one descriptor. Every malformed list is refused
// with the file's name and the descriptor's dotted path; a good list compiles to one rule per
// limit, in file order, sharing the descriptor's switches.
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { ConfigError } from '../../../src/errors';

const FIXTURES = join(__dirname, '../../fixtures/config');

function compile(relativePath: string) {
  const path = join(FIXTURES, relativePath);
  return compileRules([parseRuleFile(basename(path), readFileSync(path, 'utf8'))], { mergeDomainConfig: false });
}

function errorOf(relativePath: string): string {
  try {
    compile(relativePath);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`expected ${relativePath} to be rejected`);
}

/** Exact messages; `floodgate check` prints the same (test/e2e/cli.test.ts). */
export const LIST_ERRORS: readonly (readonly [string, string])[] = [
  ['both_rate_limit_and_rate_limits', "descriptor 'api.api_key' has both rate_limit and rate_limits: give one of them"],
  ['empty_rate_limits', "descriptor 'api.outer.inner' has an empty rate_limits list: give at least one limit"],
  ['null_rate_limits', "descriptor 'api.api_key' has an empty rate_limits list: give at least one limit"],
  ['bad_unit_in_list', "rate_limits entry 2 of 'api.outer_x.inner': invalid rate limit unit 'fortnight'"],
  ['unlimited_in_list', "rate_limits entry 2 of 'api.api_key': an unlimited limit cannot be in a rate_limits list"],
  [
    'same_counter_twice',
    "rate_limits entries 1 and 3 of 'api.api_key' count one counter (fixed_window over 60 s): give one another unit, unit_multiplier or algorithm",
  ],
  ['same_name_twice', "rate_limits entries 1 and 2 of 'api.api_key' have the same name 'burst'"],
  ['zero_burst_in_list', "rate_limits entry 2 of 'api.api_key': invalid rate limit burst '0': must be a positive integer"],
  ['unknown_key_in_list', "config error, unknown key 'brust'"],
  ['rate_limits_not_a_list', 'error loading config file: yaml: unmarshal errors:\n  line 5: cannot unmarshal !!map into []config.YamlRateLimit'],
  [
    'over_bound_in_list',
    "rate_limits entry 2 of 'api.api_key': rate limit 'api.api_key': sliding_log allows at most 1000 requests_per_unit (one stored entry per hit), got 1001",
  ],
  ['replaces_own_list_name', "rate_limits entry 2 of 'api.api_key': replaces should not contain name of same descriptor"],
];

describe('rate_limits: refused lists', () => {
  it.each(LIST_ERRORS)('%s', (name, message) => {
    expect(errorOf(`list-errors/${name}.yaml`)).toBe(`${name}.yaml: ${message}`);
  });
});

describe('rate_limits: a good list', () => {
  it('compiles to one rule per limit, in file order, with generated names where none is given', () => {
    const rules = compile('lists/api_lists.yaml');
    const match = rules.match('api', [{ key: 'api_key', value: 'k1' }]);
    expect(match?.rules?.map((r) => [r.fullKey, r.name, r.limitName, r.requestsPerUnit, r.unit, r.algorithm, r.windowSeconds, r.burst])).toEqual(
      [
        ['api.api_key', 'burst', 'burst', 10, 'SECOND', 'fixed_window', 1, 10],
        ['api.api_key', 'daily', 'daily', 1000, 'DAY', 'fixed_window', 86400, 1000],
        ['api.api_key', undefined, 'minute_x5_token_bucket', 200, 'MINUTE', 'token_bucket', 300, 50],
      ],
    );
    // The first limit is the match's rule, so code that knows one rule keeps working.
    expect(match?.rule).toBe(match?.rules?.[0]);
    // /rlconfig, check and explain list every limit.
    expect(rules.rulesByDomain.get('api')?.length).toBe(4);
  });

  it('applies the descriptor switches to every limit; a one-entry list is a plain rule', () => {
    const rules = compile('lists/api_lists.yaml');
    const match = rules.match('api', [
      { key: 'plan', value: 'free' },
      { key: 'user', value: 'u' },
    ]);
    expect(match?.rules).toBeUndefined();
    expect(match?.rule?.requestsPerUnit).toBe(2);
    const list = rules.match('api', [{ key: 'api_key', value: 'k1' }]);
    expect(list?.rules?.every((r) => !r.shadowMode && !r.quotaMode)).toBe(true);
  });
});
