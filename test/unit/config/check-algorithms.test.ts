import { describe, expect, test } from 'vitest';
import { checkAlgorithms } from '../../../src/config/check-algorithms';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import { ConfigError } from '../../../src/errors';
import { IMPLEMENTED_ALGORITHMS } from '../../../src/limiter/limiter';

const rules = (algorithm: string) =>
  compileRules(
    [parseRuleFile('a.yaml', `domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5, algorithm: ${algorithm} }\n  - key: free\n    rate_limit: { unlimited: true }\n`)],
    { mergeDomainConfig: false },
  );

describe('checkAlgorithms', () => {
  test('passes rule sets that use only implemented algorithms', () => {
    const set = rules('fixed_window');
    expect(checkAlgorithms(set, IMPLEMENTED_ALGORITHMS)).toBe(set);
  });

  test('refuses a rule whose algorithm is not implemented, naming the rule and the algorithm', () => {
    expect(() => checkAlgorithms(rules('gcra'), IMPLEMENTED_ALGORITHMS)).toThrow(ConfigError);
    expect(() => checkAlgorithms(rules('token_bucket'), IMPLEMENTED_ALGORITHMS)).toThrow(
      "d.k: rate limit algorithm 'token_bucket' is not implemented yet (available: fixed_window)",
    );
  });
});
