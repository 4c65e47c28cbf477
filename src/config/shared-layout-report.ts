import type { RateLimitRule, RuleSet } from './rule-types';
import { UNIT_SECONDS } from '../domain/units';

/** How many examples the REDIS_KEY_LAYOUT=reference report names. */
const EXAMPLES = 3;

/**
 * Why the reference cannot express `rule`, so that REDIS_KEY_LAYOUT=reference counts it in
 * floodgate's own keys (issue 30); undefined when it can (RateLimitRule.shareable).
 */
export function ownKeyReason(rule: RateLimitRule): string | undefined {
  if (rule.shareable === true || rule.unlimited) return undefined;
  if (rule.limitName !== undefined) return 'a rate_limits list';
  if (rule.algorithm !== 'fixed_window') return `algorithm ${rule.algorithm}`;
  if (rule.unit !== undefined && rule.windowSeconds !== UNIT_SECONDS[rule.unit]) return 'unit_multiplier';
  return 'not a limit the reference knows';
}

/**
 * The one line REDIS_KEY_LAYOUT=reference logs when rules load: how many rules keep floodgate's
 * own keys (the reference cannot count them, so a mixed fleet does not count them together), and
 * a few of them with the reason; undefined when every rule shares the reference's keys.
 */
export function sharedLayoutReport(rules: RuleSet): string | undefined {
  let own = 0;
  let counted = 0;
  const examples: string[] = [];
  for (const rule of rules.rules) {
    if (!rule.unlimited) counted++;
    const reason = ownKeyReason(rule);
    if (reason === undefined) continue;
    own++;
    if (examples.length < EXAMPLES) examples.push(`${rule.fullKey}${rule.limitName !== undefined ? ` (${rule.limitName})` : ''}: ${reason}`);
  }
  if (own === 0) return undefined;
  const more = own > examples.length ? `, and ${own - examples.length} more` : '';
  return (
    `REDIS_KEY_LAYOUT=reference: ${own} of ${counted} rules count in floodgate's own keys, ` +
    `not the reference's (it cannot express them; pods of both do not count them together): ${examples.join('; ')}${more}`
  );
}
