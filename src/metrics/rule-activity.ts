import type { RuleHitCounts } from './metrics';

/** One rule's totals since start: what the debug page shows per rule. */
export interface RuleTotals {
  hits: number;
  overLimit: number;
  nearLimit: number;
  shadow: number;
}

/** What names a rule here: its dotted path, and for a limit of a `rate_limits` list its name. */
export interface RuleIdentity {
  readonly fullKey: string;
  readonly limitName?: string;
}

/** `<path>` or, for a limit of a list, `<path>.<limit name>` (as its metric key ends). */
export function ruleActivityKey(rule: RuleIdentity): string {
  return rule.limitName === undefined ? rule.fullKey : `${rule.fullKey}.${rule.limitName}`;
}

/**
 * Per-rule totals kept by the rule, not by the metric labels: a `detailed_metric` or
 * `value_to_metric` rule counts under labels made of request values (and METRICS_MAX_SERIES may
 * drop them), so the labels cannot say which rule they belong to. The service records each
 * counted descriptor here; the debug page reads it. Keys are rules of the configuration (domain
 * and path), so the map stays as small as the rules: the service does not record a limit
 * override (a rule made per request, its key holding request values), and each load drops the
 * rules that left (rulesLoaded); totals survive reloads that keep a rule.
 */
export class RuleActivity {
  private readonly byKey = new Map<string, RuleTotals>();
  /** The totals of each rule object seen, so a call builds no string (rule objects live as long as their rule set). */
  private readonly byRule = new WeakMap<RuleIdentity, RuleTotals>();

  /** How many rules have totals (tests, and to see the bound). */
  get size(): number {
    return this.byKey.size;
  }

  record(domain: string, rule: RuleIdentity, counts: RuleHitCounts): void {
    let totals = this.byRule.get(rule);
    if (totals === undefined) {
      totals = this.totalsOf(domain, rule, true);
      this.byRule.set(rule, totals);
    }
    totals.hits += counts.totalHits;
    totals.overLimit += counts.overLimit;
    totals.nearLimit += counts.nearLimit;
    totals.shadow += counts.shadowMode;
  }

  /**
   * A rule set is in service (first load and every reload, files or xDS): the totals of rules
   * that left it are dropped, so the map never holds more than the rules loaded.
   */
  rulesLoaded(rules: { readonly rulesByDomain: ReadonlyMap<string, readonly RuleIdentity[]> }): void {
    const keep = new Set<string>();
    for (const [domain, list] of rules.rulesByDomain) for (const rule of list) keep.add(`${domain}\n${ruleActivityKey(rule)}`);
    for (const key of this.byKey.keys()) if (!keep.has(key)) this.byKey.delete(key);
  }

  /** The rule's totals so far (zeros when it has counted nothing). */
  totals(domain: string, rule: RuleIdentity): RuleTotals {
    return { ...this.totalsOf(domain, rule, false) };
  }

  private totalsOf(domain: string, rule: RuleIdentity, create: boolean): RuleTotals {
    const key = `${domain}\n${ruleActivityKey(rule)}`;
    let totals = this.byKey.get(key);
    if (totals === undefined) {
      totals = { hits: 0, overLimit: 0, nearLimit: 0, shadow: 0 };
      if (create) this.byKey.set(key, totals);
    }
    return totals;
  }
}
