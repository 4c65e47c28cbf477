import type { RateLimitRule, RuleMatch, RuleSet } from '../config/rule-types';
import type { LimitCheck } from '../limiter/limiter';
import { keyValue } from '../domain/descriptor';
import { UNIT_SECONDS } from '../domain/units';
import { HITS_COUNTED_MAX } from '../domain/uint32';
import type { LimitSpec } from '../domain/limit-spec';
import { InvalidRequestError } from '../base/errors';
import type { RateLimitRequest, RequestDescriptor } from './types';

/** What one request descriptor resolved to before counting. Immutable. */
export interface DescriptorPlan {
  /** The rule that applies; undefined for no rule, a replaced rule or an unknown domain. */
  readonly rule?: RateLimitRule;
  /**
   * A `rate_limits` list (issue 21): its limits, `rule` being the first; their checks are
   * `checkIndex` onwards, in this order, and are decided as one unit.
   */
  readonly limits?: readonly RateLimitRule[];
  /** Metric label path of this evaluation (the rule's, or the match's detailed one). */
  readonly metricKey: string;
  /** The matched rule's `metadata`; never set for a limit override. */
  readonly metadata?: Readonly<Record<string, unknown>>;
  /** Set when `rule` is a limit override's, made for this request (not a rule of the RuleSet). */
  readonly override?: true;
  readonly hits: number;
  /** Index into {@link RequestPlan.checks}, or -1 when nothing is counted (no rule, unlimited). */
  readonly checkIndex: number;
}

/** A request resolved against the rules: one plan per descriptor and the checks to count. */
export interface RequestPlan {
  readonly domainKnown: boolean;
  readonly plans: readonly DescriptorPlan[];
  readonly checks: readonly LimitCheck[];
}

const NOTHING_TO_COUNT = -1;

/** `domain.key1_value1.key2` — the reference's runtime path, used for override stats. */
function runtimePath(domain: string, descriptor: RequestDescriptor): string {
  let path = domain;
  for (const e of descriptor.entries) path += '.' + keyValue(e);
  return path;
}

function overrideRule(domain: string, descriptor: RequestDescriptor): RateLimitRule | undefined {
  const limit = descriptor.limit;
  if (limit === undefined) return undefined;
  return {
    fullKey: runtimePath(domain, descriptor),
    requestsPerUnit: limit.requestsPerUnit,
    unit: limit.unit,
    unlimited: false,
    algorithm: 'fixed_window',
    windowSeconds: UNIT_SECONDS[limit.unit],
    burst: limit.requestsPerUnit,
    // An override comes from Envoy's config: the rule file's shadow/quota switches do not apply.
    shadowMode: false,
    quotaMode: false,
    replaces: [],
    // The reference counts an override in the descriptor's key, in the override's unit.
    shareable: true,
  };
}

/**
 * The metric key of a limit override: the rule file's key of the rule the descriptor would
 * match, or one fixed key per domain. Never the request's values (the reference's runtime
 * path): those would make one metric series per value.
 */
function overrideMetricKey(rules: RuleSet, domain: string, descriptor: RequestDescriptor): string {
  return rules.match(domain, descriptor.entries)?.rule?.fullKey ?? `${domain}.limit_override`;
}

interface Resolved {
  readonly rule?: RateLimitRule;
  readonly limits?: readonly RateLimitRule[];
  readonly match?: RuleMatch;
  /** Set for a limit override only: see {@link overrideMetricKey}. */
  readonly overrideMetricKey?: string;
}

/** `replaced` with the names `rule` replaces added (made on the first name). */
function addReplaced(replaced: Set<string> | undefined, rule: RateLimitRule): Set<string> | undefined {
  if (rule.replaces.length === 0) return replaced;
  const set = replaced ?? new Set<string>();
  for (const name of rule.replaces) set.add(name);
  return set;
}

function isReplaced(rule: RateLimitRule, replaced: ReadonlySet<string>): boolean {
  return rule.name !== undefined && rule.name !== '' && replaced.has(rule.name);
}

/** Every check's spec in one object shape (`shareable` always set), so the layers that read it see one hidden class. */
function specOf(rule: RateLimitRule): LimitSpec {
  return {
    algorithm: rule.algorithm,
    limit: rule.requestsPerUnit,
    windowSeconds: rule.windowSeconds,
    burst: rule.burst,
    shareable: rule.shareable === true,
  };
}

/**
 * One descriptor's rule (or list). An override is Envoy's limit, not a rule of ours: no match,
 * so no metadata, shared counter or detailed metric of the node it happens to match (as the
 * reference); it replaces a whole list with its one limit.
 */
function resolve(rules: RuleSet, domain: string, d: RequestDescriptor): Resolved {
  const override = overrideRule(domain, d);
  if (override !== undefined) return { rule: override, overrideMetricKey: overrideMetricKey(rules, domain, d) };
  const match = rules.match(domain, d.entries);
  const rule = match?.rule;
  return match?.rules === undefined ? { rule, match } : { rule, limits: match.rules, match };
}

/**
 * Matches every descriptor, applies `replaces` (a rule named by another matched rule is not
 * evaluated at all), and lists the counters to check, each plan knowing its check's index.
 * Throws InvalidRequestError as soon as more than `maxCounters` checks are needed (issue 26):
 * at most one list's worth is built beyond the bound.
 */
export function planRequest(rules: RuleSet, request: RateLimitRequest, maxCounters = Infinity): RequestPlan {
  const domain = request.domain;
  const domainKnown = rules.hasDomain(domain);
  const resolved = new Array<Resolved>(request.descriptors.length);
  let replaced: Set<string> | undefined;
  for (let i = 0; i < request.descriptors.length; i++) {
    const d = request.descriptors[i] as RequestDescriptor;
    // A descriptor with no entries matches no rule, but Envoy's limit override still applies.
    const r: Resolved = !domainKnown || (d.entries.length === 0 && d.limit === undefined) ? {} : resolve(rules, domain, d);
    resolved[i] = r;
    // No array is made for the common descriptor: one rule that replaces nothing.
    if (r.limits !== undefined) for (const limit of r.limits) replaced = addReplaced(replaced, limit);
    else if (r.rule !== undefined && r.rule.replaces.length > 0) replaced = addReplaced(replaced, r.rule);
  }

  const checks: LimitCheck[] = [];
  // A loop, not resolved.map: no closure per request.
  const plans = new Array<DescriptorPlan>(resolved.length);
  for (let i = 0; i < resolved.length; i++) {
    plans[i] = planDescriptor(resolved[i] as Resolved, request.descriptors[i] as RequestDescriptor, request, replaced, checks);
    if (checks.length > maxCounters) throw new InvalidRequestError(`request needs more than ${maxCounters} counters (MAX_COUNTERS_PER_REQUEST)`);
  }
  return { domainKnown, plans, checks };
}

/** One descriptor's plan; its checks, if any, are appended to `checks`. */
function planDescriptor(
  r: Resolved,
  d: RequestDescriptor,
  request: RateLimitRequest,
  replaced: ReadonlySet<string> | undefined,
  checks: LimitCheck[],
): DescriptorPlan {
  const domain = request.domain;
  // A descriptor's hits_addend is a uint64: past HITS_COUNTED_MAX it is counted as that (over any limit alone).
  const hits = Math.min(d.hitsAddend ?? request.hitsAddend, HITS_COUNTED_MAX);
  const rule = r.rule;
  if (rule === undefined) return { metricKey: '', hits, checkIndex: NOTHING_TO_COUNT };
  const metricKey = r.overrideMetricKey ?? r.match?.metricKey ?? rule.fullKey;
  const metadata = r.match?.metadata;
  // Unlimited before `replaces`, as the reference: a replaced unlimited rule stays unlimited.
  if (rule.unlimited) return { rule, metricKey, metadata, hits, checkIndex: NOTHING_TO_COUNT };
  // A list is one descriptor: a name of any of its limits replaces all of them.
  if (replaced !== undefined && (r.limits ?? [rule]).some((l) => isReplaced(l, replaced))) {
    return { metricKey: '', hits, checkIndex: NOTHING_TO_COUNT };
  }
  const counter = { domain, entries: r.match?.counterEntries ?? d.entries };
  const checkIndex = checks.length;
  if (r.limits === undefined) {
    checks.push({ counter, spec: specOf(rule), hits });
    return { rule, metricKey, metadata, hits, checkIndex, ...(r.overrideMetricKey !== undefined && { override: true }) };
  }
  r.limits.forEach((limit, j) => checks.push({ counter, spec: specOf(limit), hits, ...(j === 0 && { listSize: r.limits?.length }) }));
  return { rule, limits: r.limits, metricKey, metadata, hits, checkIndex };
}
