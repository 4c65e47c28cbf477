import { describe, expect, test } from 'vitest';
import { checkAlgorithms } from '../../../src/config/check-algorithms';
import { compileRules } from '../../../src/config/compile-rules';
import { parseRuleFile } from '../../../src/config/parse-rule-file';
import type { Algorithm } from '../../../src/domain/algorithm';
import { ConfigError } from '../../../src/errors';
import { IMPLEMENTED_ALGORITHMS } from '../../../src/limiter/limiter';

const rules = (algorithm: string) =>
  compileRules(
    [parseRuleFile('a.yaml', `domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5, algorithm: ${algorithm} }\n  - key: free\n    rate_limit: { unlimited: true }\n`)],
    { mergeDomainConfig: false },
  );

// The check itself, against a given set: which algorithms the limiter implements changes over time.
const ONLY_FIXED: ReadonlySet<Algorithm> = new Set<Algorithm>(['fixed_window']);

describe('checkAlgorithms', () => {
  test('passes rule sets that use only implemented algorithms', () => {
    const set = rules('fixed_window');
    expect(checkAlgorithms(set, ONLY_FIXED)).toBe(set);
    expect(checkAlgorithms(set, IMPLEMENTED_ALGORITHMS)).toBe(set);
  });

  test('refuses a rule whose algorithm is not implemented, naming the rule and the algorithm', () => {
    expect(() => checkAlgorithms(rules('gcra'), ONLY_FIXED)).toThrow(ConfigError);
    expect(() => checkAlgorithms(rules('token_bucket'), new Set<Algorithm>(['fixed_window', 'gcra']))).toThrow(
      "d.k: rate limit algorithm 'token_bucket' is not implemented yet (available: fixed_window, gcra)",
    );
  });

  test('the limiter implements fixed_window, and every algorithm it lists passes', () => {
    expect(IMPLEMENTED_ALGORITHMS.has('fixed_window')).toBe(true);
    for (const algorithm of IMPLEMENTED_ALGORITHMS) expect(() => checkAlgorithms(rules(algorithm), IMPLEMENTED_ALGORITHMS)).not.toThrow();
  });
});
