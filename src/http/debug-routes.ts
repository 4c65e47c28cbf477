import type { RuleSet } from '../config/rule-types';
import type { Route } from './http-listener';

/** One line per rule with a limit, in the reference's `/rlconfig` format. */
export function formatRuleConfig(rules: RuleSet | undefined): string {
  if (rules === undefined) return '';
  let out = '';
  for (const r of rules.rules) {
    if (r.unlimited) continue;
    out += `${r.fullKey}: unit=${r.unit ?? 'UNKNOWN'} requests_per_unit=${r.requestsPerUnit}, shadow_mode: ${r.shadowMode}, quota_mode: ${r.quotaMode}\n`;
  }
  return out;
}

export function rlconfigRoute(rules: () => RuleSet | undefined): Route {
  return (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' }).end(formatRuleConfig(rules()));
  };
}
