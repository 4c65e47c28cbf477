import { boundedLabel } from './bounded-label';
import { mogrify, type Mogrifier } from './dogstatsd-mogrifier';
import type { RedisPool, RuleHitCounts, ServiceMetrics } from './metrics';
import { boundedStatPath, sanitizeStatName } from './stat-name';
import type { StatsdTransport } from './statsd-transport';

/** USE_STATSD / USE_DOG_STATSD and their settings. */
export interface StatsdSettings {
  /** statsd lines as lyft/gostats writes them, or DogStatsD lines (tags after `|#`). */
  readonly format: 'statsd' | 'dogstatsd';
  readonly host: string;
  readonly port: number;
  readonly protocol: 'tcp' | 'udp';
  readonly flushIntervalMs: number;
  /** EXTRA_TAGS, sorted by name, values with `.`, `:` and `|` made `_` (as gostats does). */
  readonly extraTags: readonly (readonly [string, string])[];
  readonly mogrifiers: readonly Mogrifier[];
}

/** What StatsdMetrics needs to count and write lines; where they go is the transport's business. */
export type StatsdFormat = Pick<StatsdSettings, 'format' | 'flushIntervalMs' | 'extraTags' | 'mogrifiers'>;

/** One rule path's counters since the last flush, and their stat names. */
interface RuleCounts {
  readonly base: string;
  total: number;
  over: number;
  near: number;
  overLocal: number;
  within: number;
  shadow: number;
}

// Rule paths with detailed_metric carry request values: bound what is kept between flushes, in
// count and in bytes of names (each up to ~600 characters, see boundedStatPath). A flush of the
// most the bytes allow stays well under the transport's 4 MiB bound.
const MAX_RULE_ENTRIES = 10_000;
const MAX_RULE_NAME_BYTES = 512 * 1024;
// A flush goes to the transport in pieces of about this size (gostats' TCP buffer is 64 KiB):
// one piece too many for a slow statsd is dropped, never the whole flush.
const FLUSH_PIECE_BYTES = 64 * 1024;
// Timer samples kept per flush interval; beyond, a uniform sample is kept and sent with its rate.
const MAX_TIMER_SAMPLES = 10_000;

const SERVICE = 'ratelimit.service';

/**
 * The reference's stats under its names and types (lyft/gostats scopes `ratelimit.service`,
 * `ratelimit_server`): counters are plain numbers added on the request path and sent as deltas
 * (`name:n|c`, zero deltas not sent) every STATS_FLUSH_INTERVAL; response times are timers in
 * whole milliseconds (`|ms`). Nothing here does I/O on the request path.
 */
/** Distinct counter names kept between two flushes; more are dropped until the next flush. */
const MAX_COUNTER_NAMES = 10_000;

export class StatsdMetrics implements ServiceMetrics {
  private rules = new Map<string, Map<string, RuleCounts>>();
  private ruleEntries = 0;
  private ruleNameBytes = 0;
  private readonly counters = new Map<string, number>();
  /** Per gRPC method, its total_requests name: built once, not a new string to hash on every call. */
  private readonly requestCounterNames = new Map<string, string>();
  /** Gauges are sent at every flush, whatever their value, as gostats does. */
  private readonly gauges = new Map<string, number>();
  private readonly timerName: string;
  private timerSamples: number[] = [];
  private timerSeen = 0;
  private readonly tagSuffix: string;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly settings: StatsdFormat,
    private readonly transport: StatsdTransport,
  ) {
    // gostats puts a scope's tags at the end of every name as `.__key=value`; the DogStatsD
    // sink takes them back out as tags.
    this.tagSuffix = settings.extraTags.map(([k, v]) => `.__${k}=${v}`).join('');
    this.timerName = 'ratelimit_server.ShouldRateLimit.response_time';
    this.timer = setInterval(() => this.flush(), settings.flushIntervalMs);
    this.timer.unref();
  }

  recordRule(domain: string, metricKey: string, counts: RuleHitCounts): void {
    const r = this.ruleCounts(domain, metricKey);
    r.total += counts.totalHits;
    r.over += counts.overLimit;
    r.near += counts.nearLimit;
    r.overLocal += counts.overLimitWithLocalCache;
    r.within += counts.withinLimit;
    r.shadow += counts.shadowMode;
  }

  domainNotFound(domain: string): void {
    // The domain is request text: cut to a bounded length, as a label would be.
    this.add(`${SERVICE}.rate_limit.${sanitizeStatName(boundedLabel(domain))}.domain_not_found`);
  }

  globalShadowMode(): void {
    this.add(`${SERVICE}.global_shadow_mode`);
  }

  shouldRateLimitError(errType: string): void {
    // The reference counts a Redis failure as redis_error and every other failure as service_error.
    this.add(`${SERVICE}.call.should_rate_limit.${errType === 'redis_error' ? 'redis_error' : 'service_error'}`);
  }

  configLoad(success: boolean): void {
    this.add(`${SERVICE}.${success ? 'config_load_success' : 'config_load_error'}`);
  }

  requestDone(method: string, seconds: number): void {
    this.add(this.requestCounterName(method));
    // The reference reports time.Since(start).Milliseconds(): whole milliseconds, rounded down.
    const ms = Math.floor(seconds * 1000);
    this.timerSeen++;
    if (this.timerSamples.length < MAX_TIMER_SAMPLES) this.timerSamples.push(ms);
    else {
      const slot = Math.floor(Math.random() * this.timerSeen);
      if (slot < MAX_TIMER_SAMPLES) this.timerSamples[slot] = ms;
    }
  }

  setBackendHealthy(): void {
    // floodgate_backend_healthy is a Prometheus series of ours; the reference has no such stat.
  }

  memoryCountersEvicted(): void {
    // floodgate_memory_counters_evicted_total is a Prometheus series of ours; the reference has no memory backend.
  }

  redisConnection(pool: RedisPool, event: 'open' | 'close'): void {
    const active = `ratelimit.${pool}.cx_active`;
    const now = this.gauges.get(active) ?? 0;
    if (event === 'open') {
      this.gauges.set(active, now + 1);
      this.add(`ratelimit.${pool}.cx_total`);
    } else {
      this.gauges.set(active, Math.max(0, now - 1));
      this.add(`ratelimit.${pool}.cx_local_close`);
    }
  }

  /** Sends every non-zero counter delta and the timer samples, then zeroes them. */
  flush(): void {
    const out = new PieceWriter(this.transport);
    for (const byKey of this.rules.values()) {
      for (const r of byKey.values()) {
        if (r.total !== 0) out.add(this.line(r.base + 'total_hits', r.total, 'c'));
        if (r.over !== 0) out.add(this.line(r.base + 'over_limit', r.over, 'c'));
        if (r.near !== 0) out.add(this.line(r.base + 'near_limit', r.near, 'c'));
        if (r.overLocal !== 0) out.add(this.line(r.base + 'over_limit_with_local_cache', r.overLocal, 'c'));
        if (r.within !== 0) out.add(this.line(r.base + 'within_limit', r.within, 'c'));
        if (r.shadow !== 0) out.add(this.line(r.base + 'shadow_mode', r.shadow, 'c'));
        r.total = r.over = r.near = r.overLocal = r.within = r.shadow = 0;
      }
    }
    for (const [name, n] of this.counters) {
      if (n !== 0) out.add(this.line(name, n, 'c'));
    }
    this.counters.clear();
    for (const [name, n] of this.gauges) out.add(this.line(name, n, 'g'));
    const rate = this.timerSeen > this.timerSamples.length ? this.timerSamples.length / this.timerSeen : 1;
    for (const ms of this.timerSamples) out.add(this.line(this.timerName, ms, 'ms', rate));
    this.timerSamples = [];
    this.timerSeen = 0;
    out.end();
  }

  /** Sends what is counted, then closes the connection. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.flush();
    await this.transport.close();
  }

  droppedBytes(): number {
    return this.transport.droppedBytes();
  }

  private add(name: string): void {
    const count = this.counters.get(name);
    // Names made from request text (unknown domains) are bounded per flush interval too.
    if (count === undefined && this.counters.size >= MAX_COUNTER_NAMES) return;
    this.counters.set(name, (count ?? 0) + 1);
  }

  private requestCounterName(method: string): string {
    let name = this.requestCounterNames.get(method);
    if (name === undefined) {
      name = `ratelimit_server.${method}.total_requests`;
      this.requestCounterNames.set(method, name);
    }
    return name;
  }

  private ruleCounts(domain: string, metricKey: string): RuleCounts {
    let byKey = this.rules.get(domain);
    let rule = byKey?.get(metricKey);
    if (rule !== undefined) return rule;
    if (this.ruleEntries >= MAX_RULE_ENTRIES || this.ruleNameBytes >= MAX_RULE_NAME_BYTES) {
      this.flush();
      this.rules = new Map();
      this.ruleEntries = 0;
      this.ruleNameBytes = 0;
      byKey = undefined;
    }
    if (byKey === undefined) {
      byKey = new Map();
      this.rules.set(domain, byKey);
    }
    const base = `${SERVICE}.rate_limit.${boundedStatPath(metricKey)}.`;
    rule = { base, total: 0, over: 0, near: 0, overLocal: 0, within: 0, shadow: 0 };
    byKey.set(metricKey, rule);
    this.ruleEntries++;
    this.ruleNameBytes += base.length;
    return rule;
  }

  private line(name: string, value: number, type: 'c' | 'g' | 'ms', rate = 1): string {
    const sampled = rate < 1 ? `|@${rate.toFixed(6)}` : '';
    if (this.settings.format === 'statsd') return `${name}${this.tagSuffix}:${value}|${type}${sampled}\n`;
    const m = mogrify(this.settings.mogrifiers, name);
    const tags = [...this.settings.extraTags.map(([k, v]) => `${k}:${v}`), ...m.tags];
    return `${m.name}:${value}|${type}${sampled}${tags.length > 0 ? `|#${tags.join(',')}` : ''}\n`;
  }
}

/** Collects lines and hands them to the transport in pieces of about FLUSH_PIECE_BYTES. */
class PieceWriter {
  private piece = '';
  private bytes = 0;

  constructor(private readonly transport: StatsdTransport) {}

  add(line: string): void {
    const bytes = Buffer.byteLength(line);
    if (this.bytes + bytes > FLUSH_PIECE_BYTES && this.piece !== '') this.end();
    this.piece += line;
    this.bytes += bytes;
  }

  end(): void {
    if (this.piece !== '') this.transport.send(this.piece);
    this.piece = '';
    this.bytes = 0;
  }
}
