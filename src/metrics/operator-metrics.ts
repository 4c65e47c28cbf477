import { Counter, Gauge, type Registry } from 'prom-client';
import { DeadlineExceededError } from '../base/errors';
import { PlainHistogram, type HistogramChild } from './plain-histogram';
import type { BreakerState, RedisCallObserver } from './redis-call-observer';

/** What rulesLoaded reads of a RuleSet: its rules per domain. */
export interface LoadedRules {
  readonly rulesByDomain: ReadonlyMap<string, readonly { readonly unlimited: boolean }[]>;
}

/** `floodgate_rules_loaded` series of their own at most, by default (METRICS_MAX_SERIES). */
const DEFAULT_MAX_DOMAIN_SERIES = 1000;

/** The `domain` of `floodgate_rules_loaded` that sums the domains beyond the bound. */
export const OTHER_DOMAINS_LABEL = '(other)';

/**
 * A call that ends with less than this share of its deadline left is near it
 * (floodgate_calls_near_deadline_total). Above the 25 % that BACKEND_FAILURE_MODE keeps back for
 * its own answer (failure-mode-limiter.ts), so a call the backend did not answer in time counts.
 */
export const NEAR_DEADLINE_SHARE = 0.3;

/** Kinds of Redis errors; a fixed set, so the label stays bounded. */
export type RedisErrorKind = 'timeout' | 'breaker_open' | 'connection' | 'noscript' | 'cluster' | 'readonly' | 'oom' | 'other';

/** Sorts an error from ioredis / Redis into one RedisErrorKind. */
export function redisErrorKind(err: unknown): RedisErrorKind {
  if (err instanceof DeadlineExceededError) return 'timeout';
  const message = err instanceof Error ? err.message : String(err);
  if (/^NOSCRIPT/.test(message)) return 'noscript';
  if (/^(MOVED|ASK|CLUSTERDOWN|TRYAGAIN|CROSSSLOT)\b/.test(message)) return 'cluster';
  if (/^READONLY\b/.test(message)) return 'readonly';
  if (/^OOM\b/.test(message)) return 'oom';
  if (/timed? ?out/i.test(message)) return 'timeout';
  if (/Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|ENOTFOUND|Stream isn't writeable|offline queue|not connected/i.test(message))
    return 'connection';
  return 'other';
}

// Node labels come from the Redis topology (a cluster has a few dozen masters at most); past
// this many, new ones fold into 'other' so a flapping topology cannot grow the series forever.
const MAX_NODE_LABELS = 64;

/** `m|host:port` → `host:port`; the per-second deployment's nodes get a `persecond/` prefix. */
function nodeLabel(node: string): string {
  if (node.startsWith('m|')) return node.slice(2);
  if (node.startsWith('s|')) return 'persecond/' + node.slice(2);
  return node;
}

/**
 * Metrics an operator needs beyond the reference's names: Redis script latency per script and
 * node, Redis errors by kind, circuit breaker state per node, failure-mode answers, local
 * cache hits, rules loaded per domain and the time of the last good load. Event-loop lag and
 * the process metrics are prom-client's default metrics (nodejs_eventloop_lag_*, process_*).
 */
export class OperatorMetrics implements RedisCallObserver {
  /** Observed on every script call: a PlainHistogram, not prom-client's (see plain-histogram.ts). */
  private readonly scriptSeconds: PlainHistogram<'script' | 'node'>;
  /**
   * scriptSeconds' children by script + '\u0000' + node label, resolved once. Bounded as the labels
   * are: scripts are the algorithms, and node labels at most MAX_NODE_LABELS and 'other'.
   */
  private readonly scriptChildren = new Map<string, HistogramChild>();
  private readonly redisErrors: Counter<'kind'>;
  private readonly failureModeAnswers: Counter<'mode'>;
  private readonly localCacheHits: Counter;
  private readonly xdsNacks: Counter;
  private readonly nearDeadline: Counter;
  /** What `floodgate_rules_loaded` reports at the next scrape: at most maxDomainSeries + 1 series. */
  private rulesLoadedSeries: readonly (readonly [domain: string, rules: number])[] = [];
  private readonly lastReload: Gauge;
  private readonly nodes = new Set<string>();
  private breakers: () => readonly BreakerState[] = () => [];
  /** Epoch seconds of the last good rule load. */
  lastLoad: number | undefined;
  /** The last rule load that failed (the rules in force stayed): when, and why. */
  lastLoadError: { readonly at: number; readonly message: string } | undefined;

  /** Domains with a `floodgate_rules_loaded` series of their own; the rest are summed under OTHER_DOMAINS_LABEL. */
  private readonly maxDomainSeries: number;

  constructor(registry: Registry, options: { readonly maxDomainSeries?: number } = {}) {
    this.maxDomainSeries = options.maxDomainSeries ?? DEFAULT_MAX_DOMAIN_SERIES;
    const registers = [registry];
    this.scriptSeconds = new PlainHistogram({
      name: 'floodgate_redis_script_duration_seconds',
      help: 'Time of one Lua script call, per script (algorithm) and Redis node',
      labelNames: ['script', 'node'],
      buckets: [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
      registers,
    });
    this.redisErrors = new Counter({
      name: 'floodgate_redis_errors_total',
      help: 'Redis calls that failed, by kind',
      labelNames: ['kind'],
      registers,
    });
    const breakers = (): readonly BreakerState[] => this.breakers();
    new Gauge({
      name: 'floodgate_redis_circuit_open',
      help: '1 while the circuit breaker of a Redis node is open (calls to it fail fast)',
      labelNames: ['node'],
      registers,
      collect() {
        this.reset();
        for (const b of breakers()) this.set({ node: nodeLabel(b.node) }, b.open ? 1 : 0);
      },
    });
    this.failureModeAnswers = new Counter({
      name: 'floodgate_backend_failure_mode_answers_total',
      help: 'Calls answered by BACKEND_FAILURE_MODE because the backend could not answer in time',
      labelNames: ['mode'],
      registers,
    });
    this.xdsNacks = new Counter({
      name: 'floodgate_xds_nacks_total',
      help: 'xDS snapshots rejected (NACKed); the rules in force stayed',
      registers,
    });
    this.nearDeadline = new Counter({
      name: 'floodgate_calls_near_deadline_total',
      help: `Calls answered with less than ${NEAR_DEADLINE_SHARE * 100} % of the caller's deadline left, or after it`,
      registers,
    });
    this.localCacheHits = new Counter({
      name: 'floodgate_local_cache_hits_total',
      help: 'Checks answered over-limit from the local cache, without Redis',
      registers,
    });
    const rulesLoadedSeries = (): readonly (readonly [string, number])[] => this.rulesLoadedSeries;
    new Gauge({
      name: 'floodgate_rules_loaded',
      help: 'Rules with a limit in the current rule set, per domain',
      labelNames: ['domain'],
      registers,
      collect() {
        this.reset();
        for (const [domain, rules] of rulesLoadedSeries()) this.set({ domain }, rules);
      },
    });
    this.lastReload = new Gauge({
      name: 'floodgate_config_last_success_timestamp_seconds',
      help: 'When the current rule set was loaded',
      registers,
    });
    for (const mode of ['allow', 'deny', 'local'] as const) this.failureModeAnswers.inc({ mode }, 0);
    for (const kind of ['timeout', 'breaker_open', 'connection', 'other'] as const) this.redisErrors.inc({ kind }, 0);
    this.localCacheHits.inc(0);
    this.xdsNacks.inc(0);
    this.nearDeadline.inc(0);
  }

  /** The Redis nodes' breaker states now (the debug page shows them). */
  breakerStates(): { node: string; open: boolean }[] {
    return this.breakers().map((b) => ({ node: nodeLabel(b.node), open: b.open }));
  }

  /** Where breaker states are read at scrape time (the Redis limiter). */
  watchBreakers(states: () => readonly BreakerState[]): void {
    this.breakers = states;
  }

  scriptCall(script: string, node: string, seconds: number, error?: unknown): void {
    let label = nodeLabel(node);
    if (!this.nodes.has(label)) {
      if (this.nodes.size >= MAX_NODE_LABELS) label = 'other';
      else this.nodes.add(label);
    }
    const key = script + '\u0000' + label;
    let child = this.scriptChildren.get(key);
    if (child === undefined) {
      child = this.scriptSeconds.child(script, label);
      this.scriptChildren.set(key, child);
    }
    child.observe(seconds);
    if (error !== undefined) this.redisErrors.inc({ kind: redisErrorKind(error) });
  }

  refused(kind: 'breaker_open' | 'timeout'): void {
    this.redisErrors.inc({ kind });
  }

  /** `mode` is a BACKEND_FAILURE_MODE value, a fixed set, so the label stays bounded. */
  failureModeAnswer(mode: string): void {
    this.failureModeAnswers.inc({ mode });
  }

  /** An xDS snapshot was rejected (counted once per distinct snapshot, as the client logs it). */
  xdsNack(): void {
    this.xdsNacks.inc();
  }

  /**
   * A call ended: counted when less than NEAR_DEADLINE_SHARE of its budget (from `startedMs` to
   * `deadlineMs`) was left at `endedMs`. Envoy's 20 ms timeout fails such calls open when slower.
   */
  callEnded(startedMs: number, deadlineMs: number, endedMs: number): void {
    const budget = deadlineMs - startedMs;
    if (budget > 0 && deadlineMs - endedMs < budget * NEAR_DEADLINE_SHARE) this.nearDeadline.inc();
  }

  localCacheHit(): void {
    this.localCacheHits.inc();
  }

  /** A rule set is in service: its rules per domain (domains that left are dropped) and now. */
  /** `rules` is the loaded RuleSet, seen through the one field counted (metrics sit below config). */
  rulesLoaded(rules: LoadedRules): void {
    // Bounded, and only counted here (the gauge is set at scrape): an xDS snapshot may hold
    // 10,000 domains, and prom-client's set of a new label set costs ~10 µs; 9,000 of them
    // blocked the event loop for 60-350 ms when a snapshot was swapped in, every scrape as much again.
    const series: (readonly [string, number])[] = [];
    let others = 0;
    for (const [domain, list] of rules.rulesByDomain) {
      let limited = 0;
      for (const rule of list) if (!rule.unlimited) limited++;
      if (series.length < this.maxDomainSeries) series.push([domain, limited]);
      else others += limited;
    }
    if (series.length < rules.rulesByDomain.size) series.push([OTHER_DOMAINS_LABEL, others]);
    this.rulesLoadedSeries = series;
    this.lastLoad = Date.now() / 1000;
    this.lastReload.set(this.lastLoad);
  }

  /** A rule load failed: kept for the debug page until the next failure. */
  loadFailed(message: string): void {
    this.lastLoadError = { at: Date.now() / 1000, message };
  }
}
