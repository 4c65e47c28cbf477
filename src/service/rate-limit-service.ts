import { NotReadyError } from '../base/errors';
import type { RateLimitRule, RuleSet } from '../config/rule-types';
import type { Limiter, LimitResult } from '../limiter/limiter';
import type { RuleActivity } from '../metrics/rule-activity';
import type { ServiceMetrics } from '../metrics/metrics';
import { UINT32_MAX } from '../domain/uint32';
import { hitCounts } from './hit-counts';
import { currentLimitOf } from './current-limit';
import { buildDynamicMetadata } from './dynamic-metadata';
import { planRequest, type DescriptorPlan, type RequestPlan } from './descriptor-plan';
import { limitHeaders, type HeaderNames } from './limit-headers';
import { DEFAULT_MAX_COUNTERS_PER_REQUEST, validateRequest, type RequestLimits } from './validate-request';
import type { Code, DescriptorStatus, HeaderPair, RateLimitRequest, RateLimitResponse } from './types';
import { OverallTally } from './overall-tally';
import { chosenLimitIndex, listRetryAfterMs } from './limit-list';
import type { PolicyDecision, PolicyEngine } from '../policy/policy-engine';
import { penaltyBoxResults, scaleChecks, scaleLimit } from '../policy/scale-limits';
import type { LimitCheck } from '../limiter/limiter';

/** Response header that carries a policy's tier (when response headers are on). */
export const TIER_HEADER = 'X-Floodgate-Tier';
/** Dynamic metadata field that carries a policy's tier. */
export const TIER_METADATA_KEY = 'floodgate.tier';

/** Behaviour switches of the service, from settings. */
export interface ServiceConfig {
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly stopIncrementWhenOverLimit: boolean;
  readonly nearLimitRatio: number;
  readonly responseDynamicMetadata: boolean;
  /** Present when LIMIT_RESPONSE_HEADERS_ENABLED. */
  readonly headers?: HeaderNames;
  readonly requestLimits: RequestLimits;
}

export interface RateLimitServiceDeps {
  /** The current rule set; undefined until the first load succeeds. */
  readonly rules: () => RuleSet | undefined;
  readonly limiter: Limiter;
  readonly metrics: ServiceMetrics;
  readonly config: ServiceConfig;
  /** The policy layer; absent: no policy is ever applied. */
  readonly policy?: PolicyEngine;
  /** Per-rule totals by rule (the debug page); absent: not kept. */
  readonly activity?: RuleActivity;
}

/** Statuses a descriptor gets without counting. */
const STATUS_NO_LIMIT: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 });
const STATUS_UNLIMITED: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: UINT32_MAX, durationUntilResetSeconds: 0 });
/** The header list of an answer that adds none: one shared frozen array, not two new ones per answer. */
const NO_HEADERS: readonly HeaderPair[] = Object.freeze([]);

/**
 * ShouldRateLimit on domain types: match, replaces, hits, counting, shadow/quota, overall code,
 * headers and metadata. Knows Envoy semantics, not storage.
 */
export class RateLimitService {
  constructor(private readonly deps: RateLimitServiceDeps) {}

  /**
   * Not an async function: with no policy to wait for, the answer is one promise chain
   * (count, then respond), without an async frame holding every local across the count. An
   * error, also one before counting, rejects as it did.
   */
  shouldRateLimit(request: RateLimitRequest, deadline: number): Promise<RateLimitResponse> {
    try {
      validateRequest(request, this.deps.config.requestLimits);
      const rules = this.deps.rules();
      if (rules === undefined) throw new NotReadyError('no rate limit configuration loaded');
      // Planned before the policy: a request over MAX_COUNTERS_PER_REQUEST is refused before
      // any script call, the policy's included.
      const plan = planRequest(rules, request, this.deps.config.requestLimits.maxCounters ?? DEFAULT_MAX_COUNTERS_PER_REQUEST);
      if (!plan.domainKnown) this.deps.metrics.domainNotFound(request.domain);
      // The policy runs first, so the tier applied includes this request's own signals. Without
      // a policy for the domain there is nothing to wait for (a wait costs a turn of the queue).
      const deciding = this.policyDecision(rules, request, deadline);
      if (deciding === undefined) return this.countAndAnswer(request, plan, undefined, deadline);
      return deciding.then((decision) => this.countAndAnswer(request, plan, decision, deadline));
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private countAndAnswer(
    request: RateLimitRequest,
    { plans, checks }: RequestPlan,
    decision: PolicyDecision | undefined,
    deadline: number,
  ): Promise<RateLimitResponse> {
    return this.count(checks, decision, deadline).then((results) => this.answer(request, { plans, checks, results }, decision));
  }

  private answer(request: RateLimitRequest, counted: Counted, decision: PolicyDecision | undefined): RateLimitResponse {
    const { response, deniedByOwn } = this.respond(request, counted, decision);
    // A denial by a limit of the client's own is a signal of its next decision (not the box's).
    if (deniedByOwn && decision !== undefined && decision.blockedMsLeft === 0 && response.overallCode === 'OVER_LIMIT') {
      this.deps.policy?.noteDenial(decision);
    }
    return response;
  }

  /** The domain's policy decision for this request; undefined (no call) when it names no client. */
  private policyDecision(rules: RuleSet, request: RateLimitRequest, deadline: number): Promise<PolicyDecision> | undefined {
    const engine = this.deps.policy;
    if (engine === undefined) return undefined;
    const policy = rules.policy(request.domain);
    if (policy === undefined) return undefined;
    const client = engine.clientOf(policy, request);
    return client === undefined ? undefined : engine.decide(policy, client, request, deadline);
  }

  /** The limiter's answers; in the penalty box every check is denied without a call. */
  private count(checks: readonly LimitCheck[], decision: PolicyDecision | undefined, deadline: number): Promise<readonly LimitResult[]> {
    if (checks.length === 0) return Promise.resolve([]);
    if (decision !== undefined && decision.blockedMsLeft > 0) return Promise.resolve(penaltyBoxResults(checks, decision.blockedMsLeft));
    const effective = decision !== undefined && decision.limitPercent < 100 ? scaleChecks(checks, decision.limitPercent) : checks;
    return this.deps.limiter.check(effective, { deadline, stopIncrementWhenOverLimit: this.deps.config.stopIncrementWhenOverLimit });
  }

  /** The answer, and whether a limit of the policy client's own denied it. */
  private respond(
    request: RateLimitRequest,
    counted: Counted,
    decision?: PolicyDecision,
  ): { response: RateLimitResponse; deniedByOwn: boolean } {
    const { config, metrics } = this.deps;
    const { statuses, tally, quotaFlags, passedMetadata, listStatuses } = this.judgeAll(request, counted, decision);
    const boxMs = decision?.blockedMsLeft ?? 0;
    const limited = tally.limited(boxMs);
    const overallCode: Code = config.shadowMode ? 'OK' : limited;
    if (config.shadowMode && limited === 'OVER_LIMIT') metrics.globalShadowMode();
    const headers = this.responseHeaders(
      { statuses, quota: quotaFlags, overall: overallCode, retryAfterMs: tally.retryAfterMs(boxMs), request, lists: listStatuses },
      decision,
    );
    const dynamicMetadata = responseMetadata(request, { passedMetadata, listStatuses }, decision);
    const response: RateLimitResponse = {
      overallCode,
      statuses,
      responseHeadersToAdd: headers,
      requestHeadersToAdd: NO_HEADERS,
      ...(dynamicMetadata !== undefined ? { dynamicMetadata } : {}),
    };
    return { response, deniedByOwn: tally.deniedByOwn() };
  }

  /** Every descriptor's status, the tally of the counted ones, their quota flags and the metadata of those that passed. */
  private judgeAll(request: RateLimitRequest, { plans, checks, results }: Counted, decision?: PolicyDecision): Judgement {
    const { config } = this.deps;
    const statuses: DescriptorStatus[] = new Array<DescriptorStatus>(plans.length);
    const tally = new OverallTally();
    const quotaFlags: boolean[] | undefined = config.headers ? new Array<boolean>(plans.length).fill(false) : undefined;
    // Metadata of the rules whose descriptor passed, in descriptor order; only when it is asked for.
    const passedMetadata: Readonly<Record<string, unknown>>[] | undefined = config.responseDynamicMetadata ? [] : undefined;
    // Per descriptor with a `rate_limits` list, the status of each of its limits; made only when one is met.
    let listStatuses: (readonly DescriptorStatus[] | undefined)[] | undefined;
    for (let i = 0; i < plans.length; i++) {
      const plan = plans[i] as DescriptorPlan;
      const rule = plan.rule;
      if (rule === undefined) {
        statuses[i] = STATUS_NO_LIMIT;
        // Global quota mode makes every descriptor that is not unlimited a quota descriptor, one
        // without a rule (or replaced, or of an unknown domain) a passing one (ratelimit.go).
        if (config.quotaMode) tally.add(true, false, 0);
        continue;
      }
      if (plan.checkIndex < 0) {
        statuses[i] = STATUS_UNLIMITED;
        continue;
      }
      const result = results[plan.checkIndex] as LimitResult;
      const { status, over, quota, retryAfterMs, limitStatuses } = this.judgeCounted(
        { domain: request.domain, plan, rule, result, decision },
        results,
      );
      statuses[i] = status;
      if (limitStatuses !== undefined) (listStatuses ??= new Array<readonly DescriptorStatus[] | undefined>(plans.length))[i] = limitStatuses;
      if (quotaFlags !== undefined) quotaFlags[i] = quota;
      const own = over && this.ownedByClient(decision, checks[plan.checkIndex] as LimitCheck);
      tally.add(quota, over, retryAfterMs, own);
      if (!over && plan.metadata !== undefined) passedMetadata?.push(plan.metadata);
    }
    return { statuses, tally, quotaFlags, passedMetadata, listStatuses };
  }

  /** A counted descriptor, with one limit or a list. */
  private judgeCounted(counted: CountedDescriptor, results: readonly LimitResult[]): Judged {
    const limits = counted.plan.limits;
    return limits === undefined ? this.judge(counted) : this.judgeList(counted, limits, results);
  }

  /** Whether the check's counter is the policy client's own (see PolicyEngine.ownsCounter). */
  private ownedByClient(decision: PolicyDecision | undefined, check: LimitCheck): boolean {
    const policy = this.deps.policy;
    return decision !== undefined && policy !== undefined && policy.ownsCounter(decision, check.counter.entries);
  }

  /** One counted descriptor: records its rule metrics and returns its status. */
  private judge({ domain, plan, rule, result, decision }: CountedDescriptor): Judged {
    const { config, metrics } = this.deps;
    const limit = limitUnder(decision, rule.requestsPerUnit);
    const counts = this.countsOf(limit, result, plan.hits, rule.shadowMode);
    metrics.recordRule(domain, plan.metricKey, counts);
    // An override's rule is made per request, its key of request values: the debug page lists the RuleSet's rules only.
    if (plan.override === undefined) this.deps.activity?.record(domain, rule, counts);
    const over = !result.allowed && !rule.shadowMode;
    return { status: statusOf(rule, limit, result, over), over, quota: rule.quotaMode || config.quotaMode, retryAfterMs: result.retryAfterMs };
  }

  /** The rule-metric counts of one limit's result. */
  private countsOf(limit: number, result: LimitResult, hits: number, shadow: boolean): ReturnType<typeof hitCounts> {
    return hitCounts({
      limit,
      used: result.used,
      hits,
      allowed: result.allowed,
      nearLimitRatio: this.deps.config.nearLimitRatio,
      fromLocalCache: result.fromLocalCache === true,
      shadow,
    });
  }

  /**
   * A descriptor with a `rate_limits` list (issue 21): each limit is its own rule for the rule
   * metrics (`<metric key>.<limit name>`); the descriptor is over when any limit denies, and
   * its one status carries the numbers of the limit chosenLimitIndex picks.
   */
  private judgeList(
    { domain, plan, rule, decision }: CountedDescriptor,
    limits: readonly RateLimitRule[],
    results: readonly LimitResult[],
  ): Judged {
    const { config, metrics } = this.deps;
    const mine = results.slice(plan.checkIndex, plan.checkIndex + limits.length);
    const admitted = mine.every((r) => r.allowed);
    const over = !admitted && !rule.shadowMode;
    const limitStatuses = limits.map((l, j) => {
      const result = mine[j] as LimitResult;
      const limit = limitUnder(decision, l.requestsPerUnit);
      // A limit that admitted hits its list refused was not charged: they only count as hits.
      const counts =
        result.allowed && !admitted
          ? { totalHits: plan.hits, withinLimit: 0, nearLimit: 0, overLimit: 0, overLimitWithLocalCache: 0, shadowMode: 0 }
          : this.countsOf(limit, result, plan.hits, l.shadowMode);
      metrics.recordRule(domain, `${plan.metricKey}.${l.limitName ?? ''}`, counts);
      if (plan.override === undefined) this.deps.activity?.record(domain, l, counts);
      return statusOf(l, limit, result, !result.allowed && !l.shadowMode);
    });
    const chosen = limitStatuses[chosenLimitIndex(mine)] as DescriptorStatus;
    return {
      status: chosen.code === (over ? 'OVER_LIMIT' : 'OK') ? chosen : { ...chosen, code: over ? 'OVER_LIMIT' : 'OK' },
      over,
      quota: rule.quotaMode || config.quotaMode,
      retryAfterMs: listRetryAfterMs(mine),
      limitStatuses,
    };
  }

  /** The RateLimit-* headers and the policy's tier, when response headers are on. */
  private responseHeaders(
    { statuses, quota, overall, retryAfterMs, request, lists }: HeaderFacts,
    decision?: PolicyDecision,
  ): readonly HeaderPair[] {
    const names = this.deps.config.headers;
    if (names === undefined || quota === undefined) return NO_HEADERS;
    const headers = limitHeaders(names, { statuses, quota, overall, retryAfterMs, request, ...(lists !== undefined && { lists }) });
    if (decision !== undefined) headers.push({ key: TIER_HEADER, value: decision.tier });
    return headers;
  }
}

/** One plan per descriptor, the checks they count, and the limiter's result per check. */
interface Counted {
  readonly plans: readonly DescriptorPlan[];
  readonly checks: readonly LimitCheck[];
  readonly results: readonly LimitResult[];
}

/** A descriptor that was counted: its plan, rule and limiter result. */
interface CountedDescriptor {
  readonly domain: string;
  readonly plan: DescriptorPlan;
  readonly rule: RateLimitRule;
  readonly result: LimitResult;
  readonly decision: PolicyDecision | undefined;
}

interface Judged {
  readonly status: DescriptorStatus;
  /** Over its limit (a shadow-mode rule never is). */
  readonly over: boolean;
  readonly quota: boolean;
  /** Until the descriptor would be admitted again (0 when it is). */
  readonly retryAfterMs: number;
  /** A `rate_limits` list: the status of each of its limits, in list order. */
  readonly limitStatuses?: readonly DescriptorStatus[];
}

/** The status of one limit's answer; `limit` is the rule's, or as a policy tier scaled it. */
function statusOf(rule: RateLimitRule, limit: number, result: LimitResult, over: boolean): DescriptorStatus {
  return {
    code: over ? 'OVER_LIMIT' : 'OK',
    // The rule's shared CurrentLimit unless a policy tier scaled the limit for this answer.
    currentLimit:
      limit === rule.requestsPerUnit
        ? currentLimitOf(rule)
        : { ...(rule.name ? { name: rule.name } : {}), requestsPerUnit: limit, unit: rule.unit ?? 'SECOND' },
    limitRemaining: result.remaining,
    durationUntilResetSeconds: Math.ceil(result.resetMs / 1000),
  };
}

interface Judgement {
  readonly statuses: DescriptorStatus[];
  readonly tally: OverallTally;
  /** Per descriptor, whether its rule is in quota mode; only when response headers are on. */
  readonly quotaFlags: boolean[] | undefined;
  readonly passedMetadata: Readonly<Record<string, unknown>>[] | undefined;
  /** Per descriptor with a `rate_limits` list, its limits' statuses; undefined when no list was met. */
  readonly listStatuses: (readonly DescriptorStatus[] | undefined)[] | undefined;
}

interface HeaderFacts {
  readonly statuses: readonly DescriptorStatus[];
  readonly quota: readonly boolean[] | undefined;
  readonly overall: Code;
  readonly retryAfterMs: number;
  /** The ietf style's partition key is read from it. */
  readonly request: RateLimitRequest;
  readonly lists: (readonly DescriptorStatus[] | undefined)[] | undefined;
}

/** The dynamic metadata, with the policy's tier; only when it is asked for. */
function responseMetadata(
  request: RateLimitRequest,
  { passedMetadata, listStatuses }: Pick<Judgement, 'passedMetadata' | 'listStatuses'>,
  decision: PolicyDecision | undefined,
): Record<string, unknown> | undefined {
  if (passedMetadata === undefined) return undefined;
  const metadata = buildDynamicMetadata(request, passedMetadata, listStatuses);
  if (decision !== undefined) metadata[TIER_METADATA_KEY] = decision.tier;
  return metadata;
}

/** A rule's limit under the client's policy decision (scaled by its tier), or as written. */
function limitUnder(decision: PolicyDecision | undefined, requestsPerUnit: number): number {
  return decision === undefined ? requestsPerUnit : scaleLimit(requestsPerUnit, decision.limitPercent);
}
