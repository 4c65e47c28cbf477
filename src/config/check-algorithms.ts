import { ConfigError } from '../errors';
import type { Algorithm } from '../domain/algorithm';
import type { RuleSet } from './rule-types';

/**
 * Refuses a rule set that names an algorithm the limiter does not implement, so that a rule
 * never silently counts with another algorithm than the one its file asks for.
 */
export function checkAlgorithms(rules: RuleSet, implemented: ReadonlySet<Algorithm>): RuleSet {
  for (const rule of rules.rules) {
    if (!rule.unlimited && !implemented.has(rule.algorithm)) {
      throw new ConfigError(
        `${rule.fullKey}: rate limit algorithm '${rule.algorithm}' is not implemented yet (available: ${[...implemented].join(', ')})`,
      );
    }
  }
  return rules;
}
