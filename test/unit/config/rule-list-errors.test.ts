// Issue 21: `rate_limits`, several limits on one descriptor. Every malformed list is refused
// with the file's name and the descriptor's dotted path; a good list compiles to one rule per
// limit, in file order, sharing the descriptor's switches.
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { ConfigError } from '../../../src/base/errors';
import { LIST_ERRORS } from '../../helpers/list-error-messages';

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
