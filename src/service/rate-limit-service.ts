import { NotReadyError } from '../errors';
import type { RuleSet } from '../config/rule-types';
import type { Limiter, LimitResult } from '../limiter/limiter';
import type { ServiceMetrics } from '../metrics/metrics';
import { UINT32_MAX } from '../domain/uint32';
import { hitCounts } from './hit-counts';
import { buildDynamicMetadata } from './dynamic-metadata';
import { planRequest, type DescriptorPlan } from './descriptor-plan';
import { limitHeaders, type HeaderNames } from './limit-headers';
import { validateRequest, type RequestLimits } from './validate-request';
import type { Code, DescriptorStatus, RateLimitRequest, RateLimitResponse } from './types';
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
    // The policy runs first, so the tier applied includes this request's own signals.
    const decision = await this.policyDecision(rules, request, deadline);
    const { domainKnown, plans, checks } = planRequest(rules, request);
    if (!domainKnown) this.deps.metrics.domainNotFound(request.domain);
    const results = await this.count(checks, decision, deadline);
    const response = this.respond(request, plans, results, decision);
    // A denial by the limits is a signal of the client's next decision (not the box's own).
    if (decision !== undefined && decision.blockedMsLeft === 0 && response.overallCode === 'OVER_LIMIT') this.deps.policy?.noteDenial(decision);
    return response;
  }

  /** The domain's policy decision for this request; undefined (no call) when it names no client. */
  private async policyDecision(rules: RuleSet, request: RateLimitRequest, deadline: number): Promise<PolicyDecision | undefined> {
    const engine = this.deps.policy;
    if (engine === undefined) return undefined;
    const policy = rules.policy(request.domain);
    if (policy === undefined) return undefined;
    const client = engine.clientOf(policy, request);
    return client === undefined ? undefined : engine.decide(policy, client, request, deadline);
  }

  /** The limiter's answers; in the penalty box every check is denied without a call. */
  private async count(checks: readonly LimitCheck[], decision: PolicyDecision | undefined, deadline: number): Promise<readonly LimitResult[]> {
    if (checks.length === 0) return [];
    if (decision !== undefined && decision.blockedMsLeft > 0) return penaltyBoxResults(checks, decision.blockedMsLeft);
    const effective = decision !== undefined && decision.limitPercent < 100 ? scaleChecks(checks, decision.limitPercent) : checks;
    return this.deps.limiter.check(effective, { deadline, stopIncrementWhenOverLimit: this.deps.config.stopIncrementWhenOverLimit });
  }

  private respond(request: RateLimitRequest, plans: readonly DescriptorPlan[], results: readonly LimitResult[], decision?: PolicyDecision): RateLimitResponse {
    const { config, metrics } = this.deps;
    const statuses: DescriptorStatus[] = new Array<DescriptorStatus>(plans.length);
    let nonQuotaOver = false;
    let quotaCount = 0;
    let quotaOver = 0;
    // Retry-After: the request is allowed again once every non-quota rule over its limit is,
    // and (when all quota rules are over) one of the quota rules is.
    let retryNonQuotaMs = 0;
    let retryQuotaMs = Number.POSITIVE_INFINITY;
    const quotaFlags: boolean[] | undefined = config.headers ? new Array<boolean>(plans.length).fill(false) : undefined;
    // Metadata of the rules whose descriptor passed, in descriptor order; only when it is asked for.
    const passedMetadata: Readonly<Record<string, unknown>>[] | undefined = config.responseDynamicMetadata ? [] : undefined;
    for (let i = 0; i < plans.length; i++) {
      const plan = plans[i] as DescriptorPlan;
      const rule = plan.rule;
      if (rule === undefined) {
        statuses[i] = STATUS_NO_LIMIT;
        continue;
      }
      if (plan.checkIndex < 0) {
        statuses[i] = STATUS_UNLIMITED;
        continue;
      }
      const result = results[plan.checkIndex] as LimitResult;
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
      metrics.recordRule(request.domain, plan.metricKey, counts);
      const over = !result.allowed && !rule.shadowMode;
      const quota = rule.quotaMode || config.quotaMode;
      if (quotaFlags !== undefined) quotaFlags[i] = quota;
      if (quota) {
        quotaCount++;
        if (over) {
          quotaOver++;
          retryQuotaMs = Math.min(retryQuotaMs, result.retryAfterMs);
        }
      } else if (over) {
        nonQuotaOver = true;
        retryNonQuotaMs = Math.max(retryNonQuotaMs, result.retryAfterMs);
      }
      if (!over && plan.metadata !== undefined) passedMetadata?.push(plan.metadata);
      statuses[i] = {
        code: over ? 'OVER_LIMIT' : 'OK',
        currentLimit: { ...(rule.name ? { name: rule.name } : {}), requestsPerUnit: limit, unit: rule.unit ?? 'SECOND' },
        limitRemaining: result.remaining,
        durationUntilResetSeconds: Math.ceil(result.resetMs / 1000),
      };
    }
    const allQuotaOver = quotaCount > 0 && quotaOver === quotaCount;
    // The penalty box denies the whole request, also when no rule matched.
    const boxMs = decision?.blockedMsLeft ?? 0;
    const limited: Code = nonQuotaOver || allQuotaOver || boxMs > 0 ? 'OVER_LIMIT' : 'OK';
    const overallCode: Code = config.shadowMode ? 'OK' : limited;
    if (config.shadowMode && limited === 'OVER_LIMIT') metrics.globalShadowMode();
    const retryAfterMs = Math.max(retryNonQuotaMs, allQuotaOver ? retryQuotaMs : 0, boxMs);
    const headers = config.headers && quotaFlags !== undefined ? limitHeaders(config.headers, { statuses, quota: quotaFlags, overall: overallCode, retryAfterMs }) : [];
    if (config.headers && decision !== undefined) headers.push({ key: TIER_HEADER, value: decision.tier });
    let dynamicMetadata: Record<string, unknown> | undefined;
    if (passedMetadata !== undefined) {
      dynamicMetadata = buildDynamicMetadata(request, passedMetadata);
      if (decision !== undefined) dynamicMetadata[TIER_METADATA_KEY] = decision.tier;
    }
    return {
      overallCode,
      statuses,
      responseHeadersToAdd: headers,
      requestHeadersToAdd: [],
      ...(dynamicMetadata !== undefined ? { dynamicMetadata } : {}),
    };
  }
}
