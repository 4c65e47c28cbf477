import { NotReadyError } from '../errors';
import type { RateLimitRule, RuleMatch, RuleSet } from '../config/rule-types';
import type { Limiter, LimitCheck, LimitResult } from '../limiter/limiter';
import type { ServiceMetrics } from '../metrics/metrics';
import type { RequestLimits } from '../settings';
import { UNIT_SECONDS } from '../units';
import { hitCounts } from './hit-counts';
import { buildDynamicMetadata } from './dynamic-metadata';
import { limitHeaders, type HeaderNames } from './limit-headers';
import { validateRequest } from './validate-request';
import type { Code, DescriptorStatus, RateLimitRequest, RateLimitResponse, RequestDescriptor } from './types';

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

/** What one request descriptor resolved to before counting. */
export interface DescriptorPlan {
  readonly rule?: RateLimitRule;
  readonly match?: RuleMatch;
  readonly hits: number;
  /** Index into the limiter's checks, or -1 when nothing is counted. */
  checkIndex: number;
}

/** Statuses a descriptor gets without counting. */
const STATUS_NO_LIMIT: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: 0, durationUntilResetSeconds: 0 });
const STATUS_UNLIMITED: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: 4294967295, durationUntilResetSeconds: 0 });

/** `domain.key1_value1.key2` — the reference's runtime path, used for override stats. */
function runtimePath(domain: string, descriptor: RequestDescriptor): string {
  let path = domain;
  for (const e of descriptor.entries) path += '.' + (e.value === '' ? e.key : e.key + '_' + e.value);
  return path;
}

/**
 * The metric key of a limit override: the rule file's key of the rule it overrides, or one
 * fixed key per domain. Never the request's values (the reference's runtime path): those
 * would make one metric series per value.
 */
function overrideMetricKey(domain: string, match: RuleMatch | undefined): string {
  return match?.rule?.fullKey ?? `${domain}.limit_override`;
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
  };
}

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
    const plans = this.plan(rules, request);
    const checks = this.checksOf(request, plans);
    const results = checks.length === 0 ? [] : await limiter.check(checks, { deadline, stopIncrementWhenOverLimit: config.stopIncrementWhenOverLimit });
    return this.respond(request, plans, results);
  }

  private plan(rules: RuleSet, request: RateLimitRequest): DescriptorPlan[] {
    const domain = request.domain;
    const domainKnown = rules.hasDomain(domain);
    if (!domainKnown) this.deps.metrics.domainNotFound(domain);
    let replaced: Set<string> | undefined;
    const plans = request.descriptors.map((d): DescriptorPlan => {
      const hits = d.hitsAddend ?? request.hitsAddend;
      if (!domainKnown || d.entries.length === 0) return { hits, checkIndex: -1 };
      const match = rules.match(domain, d.entries);
      const rule = overrideRule(domain, d) ?? match?.rule;
      if (rule !== undefined && rule.replaces.length > 0) {
        replaced ??= new Set();
        for (const name of rule.replaces) replaced.add(name);
      }
      return { rule, match, hits, checkIndex: -1 };
    });
    if (replaced !== undefined) this.dropReplaced(plans, replaced);
    return plans;
  }

  /** A rule named in another matched rule's `replaces` is not evaluated at all. */
  private dropReplaced(plans: DescriptorPlan[], replaced: ReadonlySet<string>): void {
    for (let i = 0; i < plans.length; i++) {
      const plan = plans[i] as DescriptorPlan;
      const name = plan.rule?.name;
      if (name !== undefined && name !== '' && replaced.has(name)) plans[i] = { hits: plan.hits, checkIndex: -1 };
    }
  }

  private checksOf(request: RateLimitRequest, plans: DescriptorPlan[]): LimitCheck[] {
    const checks: LimitCheck[] = [];
    for (let i = 0; i < plans.length; i++) {
      const plan = plans[i] as DescriptorPlan;
      const rule = plan.rule;
      if (rule === undefined || rule.unlimited) continue;
      const entries = plan.match?.counterEntries ?? (request.descriptors[i] as RequestDescriptor).entries;
      plan.checkIndex = checks.length;
      checks.push({
        counter: { domain: request.domain, entries },
        spec: { algorithm: rule.algorithm, limit: rule.requestsPerUnit, windowSeconds: rule.windowSeconds, burst: rule.burst },
        hits: plan.hits,
      });
    }
    return checks;
  }

  private respond(request: RateLimitRequest, plans: readonly DescriptorPlan[], results: readonly LimitResult[]): RateLimitResponse {
    const { config, metrics } = this.deps;
    const statuses: DescriptorStatus[] = new Array(plans.length);
    let nonQuotaOver = false;
    let quotaCount = 0;
    let quotaOver = 0;
    let retryAfterMs = 0;
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
      const metricKey = plan.match?.rule === rule ? plan.match.metricKey : overrideMetricKey(request.domain, plan.match);
      const counts = hitCounts(rule.requestsPerUnit, result.used, plan.hits, result.allowed, config.nearLimitRatio, result.fromLocalCache === true, rule.shadowMode);
      metrics.recordRule(request.domain, metricKey, counts);
      const over = !result.allowed && !rule.shadowMode;
      const quota = rule.quotaMode || config.quotaMode;
      if (quota) {
        quotaCount++;
        if (over) quotaOver++;
      } else if (over) {
        nonQuotaOver = true;
      }
      if (over && result.retryAfterMs > retryAfterMs) retryAfterMs = result.retryAfterMs;
      statuses[i] = {
        code: over ? 'OVER_LIMIT' : 'OK',
        currentLimit: { ...(rule.name ? { name: rule.name } : {}), requestsPerUnit: rule.requestsPerUnit, unit: rule.unit ?? 'SECOND' },
        limitRemaining: result.remaining,
        durationUntilResetSeconds: Math.ceil(result.resetMs / 1000),
      };
    }
    const limited: Code = nonQuotaOver || (quotaCount > 0 && quotaOver === quotaCount) ? 'OVER_LIMIT' : 'OK';
    const overallCode: Code = config.shadowMode ? 'OK' : limited;
    return {
      overallCode,
      statuses,
      responseHeadersToAdd: config.headers ? limitHeaders(config.headers, statuses, overallCode, retryAfterMs) : [],
      requestHeadersToAdd: [],
      ...(config.responseDynamicMetadata ? { dynamicMetadata: buildDynamicMetadata(request, plans, statuses) } : {}),
    };
  }
}
