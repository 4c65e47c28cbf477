import { NotReadyError } from '../errors';
import type { RateLimitRule, RuleSet } from '../config/rule-types';
import type { Limiter, LimitResult } from '../limiter/limiter';
import type { ServiceMetrics } from '../metrics/metrics';
import { UINT32_MAX } from '../domain/uint32';
import { hitCounts } from './hit-counts';
import { currentLimitOf } from './current-limit';
import { buildDynamicMetadata } from './dynamic-metadata';
import { planRequest, type DescriptorPlan } from './descriptor-plan';
import { limitHeaders, type HeaderNames } from './limit-headers';
import { validateRequest, type RequestLimits } from './validate-request';
import type { Code, DescriptorStatus, HeaderPair, RateLimitRequest, RateLimitResponse } from './types';
import { OverallTally } from './overall-tally';
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
}

/** Statuses a descriptor gets without counting. */
const STATUS_NO_LIMIT: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 });
const STATUS_UNLIMITED: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: UINT32_MAX, durationUntilResetSeconds: 0 });

/**
 * ShouldRateLimit on domain types: match, replaces, hits, counting, shadow/quota, overall code,
 * headers and metadata. Knows Envoy semantics, not storage.
 */
export class RateLimitService {
  constructor(private readonly deps: RateLimitServiceDeps) {}

  async shouldRateLimit(request: RateLimitRequest, deadline: number): Promise<RateLimitResponse> {
    const config = this.deps.config;
    validateRequest(request, config.requestLimits);
    const rules = this.deps.rules();
    if (rules === undefined) throw new NotReadyError('no rate limit configuration loaded');
    // The policy runs first, so the tier applied includes this request's own signals. Without
    // a policy for the domain there is nothing to wait for (an await costs a turn of the queue).
    const deciding = this.policyDecision(rules, request, deadline);
    const decision = deciding === undefined ? undefined : await deciding;
    const { domainKnown, plans, checks } = planRequest(rules, request);
    if (!domainKnown) this.deps.metrics.domainNotFound(request.domain);
    const results = await this.count(checks, decision, deadline);
    const { response, deniedByOwn } = this.respond(request, { plans, checks, results }, decision);
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
    const { statuses, tally, quotaFlags, passedMetadata } = this.judgeAll(request, counted, decision);
    const boxMs = decision?.blockedMsLeft ?? 0;
    const limited = tally.limited(boxMs);
    const overallCode: Code = config.shadowMode ? 'OK' : limited;
    if (config.shadowMode && limited === 'OVER_LIMIT') metrics.globalShadowMode();
    const headers = this.responseHeaders(
      { statuses, quota: quotaFlags, overall: overallCode, retryAfterMs: tally.retryAfterMs(boxMs), request },
      decision,
    );
    const dynamicMetadata = responseMetadata(request, passedMetadata, decision);
    const response: RateLimitResponse = {
      overallCode,
      statuses,
      responseHeadersToAdd: headers,
      requestHeadersToAdd: [],
      ...(dynamicMetadata !== undefined ? { dynamicMetadata } : {}),
    };
    return { response, deniedByOwn: tally.deniedByOwn() };
  }

  /** Every descriptor's status, the tally of the counted ones, their quota flags and the metadata of those that passed. */
  private judgeAll(request: RateLimitRequest, { plans, checks, results }: Counted, decision?: PolicyDecision): Judgement {
    const { config, policy } = this.deps;
    const statuses: DescriptorStatus[] = new Array<DescriptorStatus>(plans.length);
    const tally = new OverallTally();
    const quotaFlags: boolean[] | undefined = config.headers ? new Array<boolean>(plans.length).fill(false) : undefined;
    // Metadata of the rules whose descriptor passed, in descriptor order; only when it is asked for.
    const passedMetadata: Readonly<Record<string, unknown>>[] | undefined = config.responseDynamicMetadata ? [] : undefined;
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
      const { status, over, quota } = this.judge({ domain: request.domain, plan, rule, result, decision });
      statuses[i] = status;
      if (quotaFlags !== undefined) quotaFlags[i] = quota;
      const own =
        over &&
        decision !== undefined &&
        policy !== undefined &&
        policy.ownsCounter(decision, (checks[plan.checkIndex] as LimitCheck).counter.entries);
      tally.add(quota, over, result.retryAfterMs, own);
      if (!over && plan.metadata !== undefined) passedMetadata?.push(plan.metadata);
    }
    return { statuses, tally, quotaFlags, passedMetadata };
  }

  /** One counted descriptor: records its rule metrics and returns its status. */
  private judge({ domain, plan, rule, result, decision }: CountedDescriptor): Judged {
    const { config, metrics } = this.deps;
    const limit = decision === undefined ? rule.requestsPerUnit : scaleLimit(rule.requestsPerUnit, decision.limitPercent);
    const counts = hitCounts({
      limit,
      used: result.used,
      hits: plan.hits,
      allowed: result.allowed,
      nearLimitRatio: config.nearLimitRatio,
      fromLocalCache: result.fromLocalCache === true,
      shadow: rule.shadowMode,
    });
    metrics.recordRule(domain, plan.metricKey, counts);
    const over = !result.allowed && !rule.shadowMode;
    const status: DescriptorStatus = {
      code: over ? 'OVER_LIMIT' : 'OK',
      // The rule's shared CurrentLimit unless a policy tier scaled the limit for this answer.
      currentLimit:
        limit === rule.requestsPerUnit
          ? currentLimitOf(rule)
          : { ...(rule.name ? { name: rule.name } : {}), requestsPerUnit: limit, unit: rule.unit ?? 'SECOND' },
      limitRemaining: result.remaining,
      durationUntilResetSeconds: Math.ceil(result.resetMs / 1000),
    };
    return { status, over, quota: rule.quotaMode || config.quotaMode };
  }

  /** The RateLimit-* headers and the policy's tier, when response headers are on. */
  private responseHeaders({ statuses, quota, overall, retryAfterMs, request }: HeaderFacts, decision?: PolicyDecision): HeaderPair[] {
    const names = this.deps.config.headers;
    if (names === undefined || quota === undefined) return [];
    const headers = limitHeaders(names, { statuses, quota, overall, retryAfterMs, request });
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
}

interface Judgement {
  readonly statuses: DescriptorStatus[];
  readonly tally: OverallTally;
  /** Per descriptor, whether its rule is in quota mode; only when response headers are on. */
  readonly quotaFlags: boolean[] | undefined;
  readonly passedMetadata: Readonly<Record<string, unknown>>[] | undefined;
}

interface HeaderFacts {
  readonly statuses: readonly DescriptorStatus[];
  readonly quota: readonly boolean[] | undefined;
  readonly overall: Code;
  readonly retryAfterMs: number;
  /** The ietf style's partition key is read from it. */
  readonly request: RateLimitRequest;
}

/** The dynamic metadata, with the policy's tier; only when it is asked for. */
function responseMetadata(
  request: RateLimitRequest,
  passedMetadata: readonly Readonly<Record<string, unknown>>[] | undefined,
  decision: PolicyDecision | undefined,
): Record<string, unknown> | undefined {
  if (passedMetadata === undefined) return undefined;
  const metadata = buildDynamicMetadata(request, passedMetadata);
  if (decision !== undefined) metadata[TIER_METADATA_KEY] = decision.tier;
  return metadata;
}
