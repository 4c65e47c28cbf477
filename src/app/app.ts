import cluster from 'node:cluster';
import type { Registry } from 'prom-client';
import type { RuleSet } from '../config/rule-types';
import { HealthState } from '../base/health';
import { createLimiter } from '../limiter/create-limiter';
import type { Limiter } from '../limiter/limiter';
import { createLogger, type Logger } from '../base/log';
import { PrometheusMetrics } from '../metrics/metrics';
import { StatsdMetrics } from '../metrics/statsd-metrics';
import { referenceDomainsOf } from '../redis-keys/key-shape';
import { OrphanScan } from '../redis-keys/orphan-scan';
import { RateLimitService, type ServiceConfig } from '../service/rate-limit-service';
import type { Settings } from '../settings/settings';
import { BackendUnavailableError } from '../base/errors';
import { PrometheusPolicyMetrics } from '../metrics/policy-metrics';
import { RuleActivity } from '../metrics/rule-activity';
import { createPolicyStore } from '../policy/create-policy-store';
import { PolicyEngine } from '../policy/policy-engine';
import type { PolicyStore } from '../policy/policy-store';

import { closeRunning, type Core, type Running } from './running';
import { startRules, type RulesHolder } from './rules';
import { openPorts, reportHealthChanges, type Ports } from './ports';
import { startMetrics, watchDeadlines } from './metrics';

/** A running floodgate instance. */
export interface App extends Ports {
  readonly health: HealthState;
  readonly metrics: PrometheusMetrics;
  /** What the Prometheus endpoints serve (metrics.registry unless PROMETHEUS_MAPPER_YAML is set). */
  readonly prometheusRegistry: Registry;
  /** Undefined when statsd is off (USE_STATSD=false, DISABLE_STATS). */
  readonly statsd?: StatsdMetrics;
  readonly limiter: Limiter;
  rules(): RuleSet | undefined;
  /** SIGTERM path: NOT_SERVING, let calls in flight finish (bounded), close everything. */
  stop(): Promise<void>;
}

export interface AppOptions {
  readonly logger?: Logger;
  /** A limiter to use instead of the one the settings describe (tests). */
  readonly limiter?: Limiter;
  /** A policy store to use instead of the one the settings describe (tests). */
  readonly policyStore?: PolicyStore;
  /** With TRACING_ENABLED: export spans here, one by one, instead of OTLP (tests). */
  readonly spanExporter?: import('@opentelemetry/sdk-trace-base').SpanExporter;
  /**
   * Aborting it ends the start: the wait for Redis (for ever by default) stops, what was opened
   * is closed and startApp rejects with the signal's reason. SIGTERM during start-up uses it.
   */
  readonly signal?: AbortSignal;
}

/** How long the policy store's own connection is waited for, when the limiter's backend is up. */
const POLICY_STARTUP_WAIT_MS = 5000;

/** While start-up waits for Redis, a line every this often says so (the ports are closed meanwhile). */
const STARTUP_WAIT_REPORT_MS = 10_000;

/**
 * Resolves true once `isReady` says the backend is connected, false after `maxMs` (never, when
 * `maxMs` is Infinity). `onWaiting` hears every STARTUP_WAIT_REPORT_MS how long it has waited.
 * Rejects with the signal's reason once `signal` aborts.
 */
async function backendReady(
  isReady: () => boolean,
  maxMs: number,
  signal: AbortSignal | undefined,
  onWaiting?: (waitedMs: number) => void,
): Promise<boolean> {
  const started = Date.now();
  let nextReport = started + STARTUP_WAIT_REPORT_MS;
  while (!isReady()) {
    signal?.throwIfAborted();
    const now = Date.now();
    if (now - started >= maxMs) return false;
    if (onWaiting && now >= nextReport) {
      onWaiting(now - started);
      nextReport += STARTUP_WAIT_REPORT_MS;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return true;
}

/** The service's behaviour switches, from settings. */
function serviceConfig(settings: Settings): ServiceConfig {
  return {
    shadowMode: settings.shadowMode,
    quotaMode: settings.quotaMode,
    stopIncrementWhenOverLimit: settings.stopCacheKeyIncrementWhenOverlimit,
    nearLimitRatio: settings.nearLimitRatio,
    responseDynamicMetadata: settings.responseDynamicMetadata,
    ...(settings.limitResponseHeadersEnabled
      ? {
          headers: {
            limit: settings.limitLimitHeader,
            remaining: settings.limitRemainingHeader,
            reset: settings.limitResetHeader,
            style: settings.responseHeadersStyle,
          },
        }
      : {}),
    requestLimits: settings.requestLimits,
  };
}

/**
 * The ports open only once Redis is connected, as in the reference, which retries and never opens
 * its ports without it: a pod whose Redis setting is wrong is never Ready, so it never replaces a
 * working pod nor counts alone (issue 28). The client retries in the background meanwhile. Also,
 * the client never queues commands: a call that arrived before the connection would fail.
 * REDIS_STARTUP_MAX_ELAPSED_TIME bounds the wait (then the start fails, as in the reference), and
 * REDIS_STARTUP_SERVE_ANYWAY turns that failure into serving with BACKEND_FAILURE_MODE.
 */
async function startLimiter(settings: Settings, options: AppOptions, { logger, metrics, operator }: Core, running: Running): Promise<Limiter> {
  const wrapScript = running.tracing?.traceScript.bind(running.tracing);
  const limiter = options.limiter ?? createLimiter(settings, { logger, metrics, operator, ...(wrapScript ? { wrapScript } : {}) });
  running.limiter = limiter;
  if (settings.backendType !== 'redis') return limiter;
  const bound = settings.redisStartupMaxElapsedMs;
  const connected = await backendReady(
    () => limiter.isHealthy(),
    bound > 0 ? bound : Infinity,
    options.signal,
    (waitedMs) =>
      logger.warn(
        `redis: not connected after ${Math.round(waitedMs / 1000)} s; still retrying, and the ports open once it answers ` +
          (bound > 0 ? `(REDIS_STARTUP_MAX_ELAPSED_TIME ${bound} ms)` : '(no bound: REDIS_STARTUP_MAX_ELAPSED_TIME is 0)'),
      ),
  );
  if (connected) return limiter;
  if (!settings.redisStartupServeAnyway) {
    throw new BackendUnavailableError(`Redis not reachable within REDIS_STARTUP_MAX_ELAPSED_TIME (${bound} ms)`);
  }
  logger.warn(
    `redis: not connected within REDIS_STARTUP_MAX_ELAPSED_TIME (${bound} ms); serving anyway as REDIS_STARTUP_SERVE_ANYWAY asks, ` +
      `calls follow BACKEND_FAILURE_MODE=${settings.backendFailureMode} until it connects`,
  );
  return limiter;
}

/** The background orphan-key scan, when ORPHAN_SCAN_INTERVAL is set: one per deployment of workers (the first worker, or the only process). */
function startOrphanScan(settings: Settings, { logger, prometheus }: Core, running: Running, holder: RulesHolder): void {
  if (settings.orphanScan === undefined || settings.redis === undefined || (cluster.isWorker && cluster.worker?.id !== 1)) return;
  running.orphanScan = new OrphanScan({
    redis: settings.redis,
    scan: settings.orphanScan,
    prefix: settings.cacheKeyPrefix,
    ...(settings.redisKeyLayout === 'reference'
      ? { referenceDomains: () => (holder.current !== undefined ? referenceDomainsOf(holder.current.rulesByDomain) : new Map()) }
      : {}),
    registry: prometheus.registry,
    logger,
  });
  running.orphanScan.start();
}

function startHealth(settings: Settings, limiter: Limiter, holder: RulesHolder, running: Running): HealthState {
  running.health = new HealthState({
    backendHealthy: () => limiter.isHealthy(),
    backendCountsForHealth: settings.redisHealthCheckActiveConnection,
    rulesReady: () => !settings.healthyWithAtLeastOneConfigLoaded || holder.current !== undefined,
  });
  return running.health;
}

/**
 * TRACING_ENABLED: the SDK is loaded here and only here, so with tracing off not one module of
 * it is in the process and the request path has no tracing code at all.
 */
async function startTracing(settings: Settings, options: AppOptions, running: Running): Promise<void> {
  if (!settings.tracing) return;
  const { startTracing: start } = await import('../tracing/start-tracing.js');
  running.tracing = await start(settings.tracing, options.spanExporter ? { exporter: options.spanExporter } : {});
}

/** What the policy engine needs from the steps before it. */
interface PolicyNeeds {
  readonly holder: RulesHolder;
  readonly limiter: Limiter;
}

async function startPolicy(
  settings: Settings,
  options: AppOptions,
  core: Core,
  { holder, limiter }: PolicyNeeds,
  running: Running,
): Promise<PolicyEngine> {
  const policy = new PolicyEngine({
    store: options.policyStore ?? createPolicyStore(settings, core.logger),
    metrics: new PrometheusPolicyMetrics(core.prometheusRegistry),
  });
  running.policy = policy;
  // Its own connection, opened only for rules with a policy (a reload that adds the first
  // policy opens it with the first decision). A call before it is up would take the normal
  // tier for nothing; not waited for when the limiter's backend is away too.
  if ((holder.current?.policies.length ?? 0) > 0) {
    policy.connect();
    if (limiter.isHealthy() && !(await backendReady(() => policy.isReady(), POLICY_STARTUP_WAIT_MS, options.signal))) {
      core.logger.warn('policy store not connected; policies answer normal until it is');
    }
  }
  return policy;
}

/** The one place that wires concrete pieces together. A start that fails partway closes what it started. */
export async function startApp(settings: Settings, options: AppOptions = {}): Promise<App> {
  const logger = options.logger ?? createLogger(settings.logLevel, settings.logFormat);
  const running: Running = { listeners: [], stats: [] };
  const { core, statsd } = await startMetrics(settings, logger, running);
  const { prometheus, prometheusRegistry } = core;
  try {
    await startTracing(settings, options, running);
    // Its totals follow the rule set in service: each load drops the rules that left.
    const activity = new RuleActivity();
    const holder = await startRules(settings, core, running, (loaded) => activity.rulesLoaded(loaded));
    const rules = (): RuleSet | undefined => holder.current;
    const limiter = await startLimiter(settings, options, core, running);
    startOrphanScan(settings, core, running, holder);
    const health = startHealth(settings, limiter, holder, running);
    const policy = await startPolicy(settings, options, core, { holder, limiter }, running);
    const untraced = new RateLimitService({ rules, limiter, metrics: core.metrics, config: serviceConfig(settings), policy, activity });
    const service = watchDeadlines(running.tracing ? running.tracing.traceService(untraced) : untraced, core.operator);
    options.signal?.throwIfAborted();
    const ports = await openPorts(settings, core, { service, policy, health, rules, limiter, activity }, running);
    reportHealthChanges(health, core);
    let stopping: Promise<void> | undefined;
    const stop = (): Promise<void> => (stopping ??= closeRunning(running, settings.shutdownGraceMs));
    return { ...ports, health, metrics: prometheus, prometheusRegistry, ...(statsd ? { statsd } : {}), limiter, rules, stop };
  } catch (err) {
    await closeRunning(running, 0);
    throw err;
  }
}
