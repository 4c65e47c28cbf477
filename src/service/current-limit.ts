import type { RateLimitRule } from '../config/rule-types';
import type { CurrentLimit } from './types';

// One frozen CurrentLimit per rule, instead of a new object per answer: the rule never changes
// (a reload compiles new rule objects), and the gRPC encoder keeps the encoded form of each
// CurrentLimit it sees (src/rls/response-encoder.ts), so a shared object is encoded once.
const byRule = new WeakMap<RateLimitRule, CurrentLimit>();

/** The current_limit of an answer under `rule`. */
export function currentLimitOf(rule: RateLimitRule): CurrentLimit {
  let limit = byRule.get(rule);
  if (limit === undefined) {
    limit = Object.freeze({ ...(rule.name ? { name: rule.name } : {}), requestsPerUnit: rule.requestsPerUnit, unit: rule.unit ?? 'SECOND' });
    byRule.set(rule, limit);
  }
  return limit;
}
