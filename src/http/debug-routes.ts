import type { RuleSet } from '../config/rule-types';
import { describePolicy } from '../domain/policy-config';
import type { Route } from './http-listener';

/** One line per rule with a limit, in the reference's `/rlconfig` format; then one line per policy (ours). */
export function formatRuleConfig(rules: RuleSet | undefined): string {
  if (rules === undefined) return '';
  let out = '';
  for (const r of rules.rules) {
    if (r.unlimited) continue;
    // A limit of a `rate_limits` list (ours) carries its name: the list's limits share the path.
    const path = r.limitName === undefined ? r.fullKey : `${r.fullKey} (${r.limitName})`;
    out += `${path}: unit=${r.unit ?? 'UNKNOWN'} requests_per_unit=${r.requestsPerUnit}, shadow_mode: ${r.shadowMode}, quota_mode: ${r.quotaMode}\n`;
  }
  for (const p of rules.policies) out += describePolicy(p) + '\n';
  return out;
}

export function rlconfigRoute(rules: () => RuleSet | undefined): Route {
  return (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' }).end(formatRuleConfig(rules()));
  };
}
