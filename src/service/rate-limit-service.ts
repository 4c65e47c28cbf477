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
    const { config, limiter } = this.deps;
    validateRequest(request, config.requestLimits);
    const rules = this.deps.rules();
    if (rules === undefined) throw new NotReadyError('no rate limit configuration loaded');
    const { domainKnown, plans, checks } = planRequest(rules, request);
    if (!domainKnown) this.deps.metrics.domainNotFound(request.domain);
    const results = checks.length === 0 ? [] : await limiter.check(checks, { deadline, stopIncrementWhenOverLimit: config.stopIncrementWhenOverLimit });
    return this.respond(request, plans, results);
  }

  private respond(request: RateLimitRequest, plans: readonly DescriptorPlan[], results: readonly LimitResult[]): RateLimitResponse {
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
      const counts = hitCounts({
        limit: rule.requestsPerUnit,
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
        currentLimit: { ...(rule.name ? { name: rule.name } : {}), requestsPerUnit: rule.requestsPerUnit, unit: rule.unit ?? 'SECOND' },
        limitRemaining: result.remaining,
        durationUntilResetSeconds: Math.ceil(result.resetMs / 1000),
      };
    }
    const allQuotaOver = quotaCount > 0 && quotaOver === quotaCount;
    const limited: Code = nonQuotaOver || allQuotaOver ? 'OVER_LIMIT' : 'OK';
    const overallCode: Code = config.shadowMode ? 'OK' : limited;
    if (config.shadowMode && limited === 'OVER_LIMIT') metrics.globalShadowMode();
    const retryAfterMs = Math.max(retryNonQuotaMs, allQuotaOver ? retryQuotaMs : 0);
    return {
      overallCode,
      statuses,
      responseHeadersToAdd:
        config.headers && quotaFlags !== undefined ? limitHeaders(config.headers, { statuses, quota: quotaFlags, overall: overallCode, retryAfterMs, request }) : [],
      requestHeadersToAdd: [],
      ...(passedMetadata !== undefined ? { dynamicMetadata: buildDynamicMetadata(request, passedMetadata) } : {}),
    };
  }
}
