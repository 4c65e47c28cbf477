import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Per-rule counters of one descriptor evaluation, in hits (not requests), as the reference counts. */
export interface RuleHitCounts {
  totalHits: number;
  withinLimit: number;
  nearLimit: number;
  overLimit: number;
  overLimitWithLocalCache: number;
  shadowMode: number;
}

/** What the service reports. Injected everywhere; there is no global registry. */
export interface ServiceMetrics {
  recordRule(domain: string, metricKey: string, counts: RuleHitCounts): void;
  domainNotFound(domain: string): void;
  /** SHADOW_MODE turned an OVER_LIMIT answer into OK. */
  globalShadowMode(): void;
  shouldRateLimitError(errType: string): void;
  configLoad(success: boolean): void;
  requestDone(method: string, seconds: number): void;
  setBackendHealthy(healthy: boolean): void;
  /** A connection to Redis opened or closed (the reference's redis_pool / redis_per_second_pool stats). */
  redisConnection(pool: RedisPool, event: 'open' | 'close'): void;
}

export type RedisPool = 'redis_pool' | 'redis_per_second_pool';

interface RuleChildren {
  total: Counter.Internal;
  within: Counter.Internal;
  near: Counter.Internal;
  over: Counter.Internal;
  overLocal: Counter.Internal;
  shadow: Counter.Internal;
}

// Label sets per rule path are few (rule paths, not raw values), so children are cached to keep
// prom-client's label hashing off the request path.
const MAX_CACHED_RULE_LABELS = 10_000;

// The reference's utils.SanitizeStatName, applied to every stat name before its statsd exporter
// maps it: `:` and `|` become `_`, and so do the dots of anything shaped like an IPv4 address.
const IPV4 = /\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/g;
export function sanitizeStatName(s: string): string {
  return s.replace(/[:|]/g, '_').replace(IPV4, (ip) => ip.replace(/\./g, '_'));
}

/**
 * Splits `domain.key1_value1.key2_value2...` into labels as the reference's default statsd
 * exporter mapping does (`rate_limit.(domain).(key1).(key2)(\..*)?.<stat>`): key1 and key2 are
 * the first two levels, deeper levels are dropped. Our one change: a domain that contains dots
 * stays whole in `domain` instead of spilling into key1.
 */
export function ruleLabels(domain: string, metricKey: string): { domain: string; key1: string; key2: string } {
  const rest = sanitizeStatName(metricKey.startsWith(domain + '.') ? metricKey.slice(domain.length + 1) : metricKey);
  const [key1 = '', key2 = ''] = rest.split('.', 2);
  return { domain: sanitizeStatName(domain), key1, key2 };
}

/** prom-client implementation with the reference's metric names. */
export class PrometheusMetrics implements ServiceMetrics {
  readonly registry = new Registry();
  private readonly ruleCounters: Record<keyof RuleChildren, Counter<'domain' | 'key1' | 'key2'>>;
  private readonly children = new Map<string, RuleChildren>();
  private readonly configLoadSuccess: Counter;
  private readonly configLoadError: Counter;
  private readonly errors: Counter<'err_type'>;
  private readonly totalRequests: Counter<'grpc_method'>;
  private readonly responseTime: Histogram<'grpc_method'>;
  private readonly domainNotFoundCounter: Counter<'domain'>;
  private readonly globalShadowModeCounter: Counter;
  private readonly backendHealthy: Gauge;

  private readonly responseTimeScale: number;

  /** responseTimeInMilliseconds: PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS, the reference's legacy unit. */
  constructor(options: { collectDefault?: boolean; responseTimeInMilliseconds?: boolean } = {}) {
    this.responseTimeScale = options.responseTimeInMilliseconds ? 1000 : 1;
    const labelNames = ['domain', 'key1', 'key2'] as const;
    const rule = (suffix: string, help: string) =>
      new Counter({ name: `ratelimit_service_rate_limit_${suffix}`, help, labelNames, registers: [this.registry] });
    this.ruleCounters = {
      total: rule('total_hits', 'Hits evaluated against the rule'),
      within: rule('within_limit', 'Hits within the limit'),
      near: rule('near_limit', 'Hits above NEAR_LIMIT_RATIO of the limit and within it'),
      over: rule('over_limit', 'Hits over the limit'),
      overLocal: rule('over_limit_with_local_cache', 'Hits over the limit answered from the local cache'),
      shadow: rule('shadow_mode', 'Hits over the limit let through by shadow mode'),
    };
    const reg = [this.registry];
    this.configLoadSuccess = new Counter({ name: 'ratelimit_service_config_load_success', help: 'Successful rule loads', registers: reg });
    this.configLoadError = new Counter({ name: 'ratelimit_service_config_load_error', help: 'Rejected rule loads', registers: reg });
    this.errors = new Counter({ name: 'ratelimit_service_should_rate_limit_error', help: 'Failed ShouldRateLimit calls', labelNames: ['err_type'], registers: reg });
    this.totalRequests = new Counter({ name: 'ratelimit_service_total_requests', help: 'Calls received', labelNames: ['grpc_method'], registers: reg });
    this.responseTime = new Histogram({
      name: 'ratelimit_service_response_time_seconds',
      help: 'Time to answer a call',
      labelNames: ['grpc_method'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1].map((b) => b * this.responseTimeScale),
      registers: reg,
    });
    this.domainNotFoundCounter = new Counter({ name: 'ratelimit_service_domain_not_found', help: 'Calls for a domain without rules', labelNames: ['domain'], registers: reg });
    // The name the reference's statsd exporter gives its unmapped ratelimit.service.global_shadow_mode.
    this.globalShadowModeCounter = new Counter({ name: 'ratelimit_service_global_shadow_mode', help: 'OVER_LIMIT answers sent as OK by SHADOW_MODE', registers: reg });
    this.backendHealthy = new Gauge({ name: 'floodgate_backend_healthy', help: '1 while the counter backend answers', registers: reg });
    this.backendHealthy.set(1);
    if (options.collectDefault) collectDefaultMetrics({ register: this.registry });
  }

  recordRule(domain: string, metricKey: string, counts: RuleHitCounts): void {
    const c = this.childrenFor(domain, metricKey);
    c.total.inc(counts.totalHits);
    if (counts.withinLimit) c.within.inc(counts.withinLimit);
    if (counts.nearLimit) c.near.inc(counts.nearLimit);
    if (counts.overLimit) c.over.inc(counts.overLimit);
    if (counts.overLimitWithLocalCache) c.overLocal.inc(counts.overLimitWithLocalCache);
    if (counts.shadowMode) c.shadow.inc(counts.shadowMode);
  }

  domainNotFound(domain: string): void {
    this.domainNotFoundCounter.inc({ domain });
  }

  globalShadowMode(): void {
    this.globalShadowModeCounter.inc();
  }

  shouldRateLimitError(errType: string): void {
    this.errors.inc({ err_type: errType });
  }

  configLoad(success: boolean): void {
    (success ? this.configLoadSuccess : this.configLoadError).inc();
  }

  requestDone(method: string, seconds: number): void {
    this.totalRequests.inc({ grpc_method: method });
    this.responseTime.observe({ grpc_method: method }, seconds * this.responseTimeScale);
  }

  setBackendHealthy(healthy: boolean): void {
    this.backendHealthy.set(healthy ? 1 : 0);
  }

  redisConnection(): void {
    // floodgate_backend_healthy says what matters here; the pool stats go to statsd only.
  }

  private childrenFor(domain: string, metricKey: string): RuleChildren {
    const cacheKey = domain + '\n' + metricKey;
    let c = this.children.get(cacheKey);
    if (c === undefined) {
      const labels = ruleLabels(domain, metricKey);
      const r = this.ruleCounters;
      c = {
        total: r.total.labels(labels),
        within: r.within.labels(labels),
        near: r.near.labels(labels),
        over: r.over.labels(labels),
        overLocal: r.overLocal.labels(labels),
        shadow: r.shadow.labels(labels),
      };
      if (this.children.size >= MAX_CACHED_RULE_LABELS) this.children.clear();
      this.children.set(cacheKey, c);
    }
    return c;
  }
}
