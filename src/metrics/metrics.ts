import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { boundedLabel } from './bounded-label';
import { PlainHistogram, type HistogramChild } from './plain-histogram';
import { sanitizeStatName } from './stat-name';

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
  /** The memory backend dropped `count` least recently used counters to stay within its bound. */
  memoryCountersEvicted(count: number): void;
}

export type RedisPool = 'redis_pool' | 'redis_per_second_pool';

/**
 * The hits of one rule path not yet handed to prom-client. A call adds plain numbers here; a
 * scrape moves them into the counters (prom-client hashes and validates the labels on every
 * inc, even through a child, which is too much for every call).
 */
interface RuleTally {
  readonly labels: { domain: string; key1: string; key2: string };
  total: number;
  within: number;
  near: number;
  over: number;
  overLocal: number;
  shadow: number;
}
type RuleCounterName = Exclude<keyof RuleTally, 'labels'>;
const RULE_COUNTER_NAMES: readonly RuleCounterName[] = ['total', 'within', 'near', 'over', 'overLocal', 'shadow'];

/**
 * The `domain` label of ratelimit_service_domain_not_found: an unknown domain is request text,
 * so it is never a label value.
 */
export const UNKNOWN_DOMAIN_LABEL = '(unknown)';

/**
 * Rule label sets kept by default (METRICS_MAX_SERIES); each is six counter series. At most
 * 6,000 sample lines of at most ~450 bytes: a scrape stays a few MB and some tens of ms.
 */
export const DEFAULT_MAX_SERIES = 1000;

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

export interface PrometheusMetricsOptions {
  readonly collectDefault?: boolean;
  /** METRICS_MAX_SERIES: rule label sets (domain, key1, key2) kept at most. */
  readonly maxSeries?: number;
  /** PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS: the reference's legacy unit. */
  readonly responseTimeInMilliseconds?: boolean;
}

/**
 * prom-client implementation with the reference's metric names.
 *
 * Label values are never raw request text, with one opt-in exception: the rule counters'
 * `key1`/`key2` are the rule's key from the file, except under `detailed_metric` or
 * `value_to_metric`, where the file asks for request values (limit overrides are counted under
 * the matched rule's key). Those values are cut to a bounded length (boundedLabel), and there
 * are at most `maxSeries` rule label sets: beyond that a new label set is not created and the
 * recording is counted in floodgate_metrics_series_dropped_total instead.
 */
export class PrometheusMetrics implements ServiceMetrics {
  readonly registry = new Registry();
  private readonly ruleCounters: Record<RuleCounterName, Counter<'domain' | 'key1' | 'key2'>>;
  /**
   * Per domain, per metric key. Two levels, not one `domain + key` string: the metric key is
   * the rule's own string, whose hash V8 keeps, while a concatenated key is a new string to
   * flatten and hash on every call.
   */
  private readonly tallies = new Map<string, Map<string, RuleTally>>();
  private tallyCount = 0;
  /** Per gRPC method: the request counter's and the histogram's child, resolved once. */
  /**
   * Per gRPC method: calls not yet handed to the request counter (a scrape does, as for the
   * rule tallies) and the histogram's child, resolved once.
   */
  private readonly methodChildren = new Map<string, { pending: number; time: HistogramChild }>();
  private readonly configLoadSuccess: Counter;
  private readonly configLoadError: Counter;
  private readonly lastLoadOk: Gauge;
  private readonly errors: Counter<'err_type'>;
  private readonly totalRequests: Counter<'grpc_method'>;
  /** Observed on every call: a PlainHistogram, not prom-client's (see plain-histogram.ts). */
  private readonly responseTime: PlainHistogram<'grpc_method'>;
  private readonly domainNotFoundCounter: Counter<'domain'>;
  private readonly globalShadowModeCounter: Counter;
  private readonly backendHealthy: Gauge;
  private readonly seriesDropped: Counter;
  private readonly countersEvicted: Counter;
  private readonly maxSeries: number;

  private readonly responseTimeScale: number;

  constructor(options: PrometheusMetricsOptions = {}) {
    this.maxSeries = options.maxSeries ?? DEFAULT_MAX_SERIES;
    this.responseTimeScale = options.responseTimeInMilliseconds ? 1000 : 1;
    const labelNames = ['domain', 'key1', 'key2'] as const;
    const rule = (suffix: string, help: string) =>
      new Counter({
        name: `ratelimit_service_rate_limit_${suffix}`,
        help,
        labelNames,
        registers: [this.registry],
        collect: () => this.flushRuleTallies(),
      });
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
    // A state, not a count: it stays 0 while the bad rules are there (a watcher reports a broken
    // tree once), so an alert on it does not resolve itself. Workers summed by the primary: min,
    // so one worker on old rules shows.
    this.lastLoadOk = new Gauge({
      name: 'floodgate_rules_last_load_ok',
      help: 'Whether the last rule load (files or xDS) succeeded: 1, or 0 until a load succeeds again',
      registers: reg,
      aggregator: 'min',
    });
    this.lastLoadOk.set(1);
    this.errors = new Counter({
      name: 'ratelimit_service_should_rate_limit_error',
      help: 'Failed ShouldRateLimit calls',
      labelNames: ['err_type'],
      registers: reg,
    });
    this.totalRequests = new Counter({
      name: 'ratelimit_service_total_requests',
      help: 'Calls received',
      labelNames: ['grpc_method'],
      registers: reg,
      collect: () => this.flushRequestCounts(),
    });
    this.responseTime = new PlainHistogram({
      name: 'ratelimit_service_response_time_seconds',
      help: 'Time to answer a call',
      labelNames: ['grpc_method'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1].map((b) => b * this.responseTimeScale),
      registers: reg,
    });
    this.domainNotFoundCounter = new Counter({
      name: 'ratelimit_service_domain_not_found',
      help: 'Calls for a domain without rules',
      labelNames: ['domain'],
      registers: reg,
    });
    // The name the reference's statsd exporter gives its unmapped ratelimit.service.global_shadow_mode.
    this.globalShadowModeCounter = new Counter({
      name: 'ratelimit_service_global_shadow_mode',
      help: 'OVER_LIMIT answers sent as OK by SHADOW_MODE',
      registers: reg,
    });
    this.backendHealthy = new Gauge({ name: 'floodgate_backend_healthy', help: '1 while the counter backend answers', registers: reg });
    this.backendHealthy.set(1);
    this.seriesDropped = new Counter({
      name: 'floodgate_metrics_series_dropped_total',
      help: 'Rule counts not recorded because METRICS_MAX_SERIES label sets exist already',
      registers: reg,
    });
    this.countersEvicted = new Counter({
      name: 'floodgate_memory_counters_evicted_total',
      help: 'Memory-backend counters dropped (least recently used) to stay within MEMORY_MAX_BYTES and MEMORY_MAX_COUNTERS',
      registers: reg,
    });
    if (options.collectDefault) collectDefaultMetrics({ register: this.registry });
  }

  recordRule(domain: string, metricKey: string, counts: RuleHitCounts): void {
    const t = this.tallyFor(domain, metricKey);
    if (t === undefined) {
      this.seriesDropped.inc();
      return;
    }
    t.total += counts.totalHits;
    t.within += counts.withinLimit;
    t.near += counts.nearLimit;
    t.over += counts.overLimit;
    t.overLocal += counts.overLimitWithLocalCache;
    t.shadow += counts.shadowMode;
  }

  /** The domain is request text, so it is never a label value: one fixed series counts them all. */
  domainNotFound(): void {
    this.domainNotFoundCounter.inc({ domain: UNKNOWN_DOMAIN_LABEL });
  }

  globalShadowMode(): void {
    this.globalShadowModeCounter.inc();
  }

  shouldRateLimitError(errType: string): void {
    this.errors.inc({ err_type: errType });
  }

  configLoad(success: boolean): void {
    (success ? this.configLoadSuccess : this.configLoadError).inc();
    this.lastLoadOk.set(success ? 1 : 0);
  }

  requestDone(method: string, seconds: number): void {
    let c = this.methodChildren.get(method);
    if (c === undefined) {
      c = { pending: 0, time: this.responseTime.child(method) };
      this.methodChildren.set(method, c);
    }
    c.pending++;
    c.time.observe(seconds * this.responseTimeScale);
  }

  setBackendHealthy(healthy: boolean): void {
    this.backendHealthy.set(healthy ? 1 : 0);
  }

  redisConnection(): void {
    // floodgate_backend_healthy says what matters here; the pool stats go to statsd only.
  }

  memoryCountersEvicted(count: number): void {
    this.countersEvicted.inc(count);
  }

  /**
   * The tally of one label set; undefined when the cap forbids a new one. Tallies are never
   * dropped: there are at most `maxSeries` of them, one per exported label set.
   */
  private tallyFor(domain: string, metricKey: string): RuleTally | undefined {
    let byKey = this.tallies.get(domain);
    let t = byKey?.get(metricKey);
    if (t === undefined) {
      if (this.tallyCount >= this.maxSeries) return undefined;
      const raw = ruleLabels(domain, metricKey);
      const labels = { domain: boundedLabel(raw.domain), key1: boundedLabel(raw.key1), key2: boundedLabel(raw.key2) };
      t = { labels, total: 0, within: 0, near: 0, over: 0, overLocal: 0, shadow: 0 };
      if (byKey === undefined) {
        byKey = new Map();
        this.tallies.set(domain, byKey);
      }
      byKey.set(metricKey, t);
      this.tallyCount++;
    }
    return t;
  }

  /** Moves the tallied hits into the prom-client counters (on every scrape, before reading). */
  private flushRequestCounts(): void {
    for (const [method, c] of this.methodChildren) {
      if (c.pending === 0) continue;
      this.totalRequests.inc({ grpc_method: method }, c.pending);
      c.pending = 0;
    }
  }

  private flushRuleTallies(): void {
    for (const byKey of this.tallies.values()) {
      for (const t of byKey.values()) {
        for (const name of RULE_COUNTER_NAMES) {
          const n = t[name];
          // total_hits is exported for every rule path seen, also at 0, as before.
          if (n !== 0 || name === 'total') {
            this.ruleCounters[name].inc(t.labels, n);
            t[name] = 0;
          }
        }
      }
    }
  }
}
