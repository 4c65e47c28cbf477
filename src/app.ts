import cluster from 'node:cluster';
import type { Registry } from 'prom-client';
import type { RuleSet } from './config/rule-types';
import { HealthState } from './health';
import { createLimiter } from './limiter/create-limiter';
import type { Limiter } from './limiter/limiter';
import { createLogger, type Logger } from './log';
import { PrometheusMetrics } from './metrics/metrics';
import { StatsdMetrics } from './metrics/statsd-metrics';
import { OrphanScan } from './redis-keys/orphan-scan';
import { RateLimitService, type ServiceConfig } from './service/rate-limit-service';
import type { Settings } from './settings';
import { BackendUnavailableError } from './errors';
import { PrometheusPolicyMetrics } from './metrics/policy-metrics';
import { createPolicyStore } from './policy/create-policy-store';
import { PolicyEngine } from './policy/policy-engine';
import type { PolicyStore } from './policy/policy-store';

import { closeRunning, type Core, type Running } from './app-running';
import { startRules, type RulesHolder } from './app-rules';
import { openPorts, reportHealthChanges, type Ports } from './app-ports';
import { startMetrics } from './app-metrics';

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
}

const BACKEND_STARTUP_WAIT_MS = 5000;

/** Resolves true once `isReady` says the backend is connected, false after `maxMs`. */
async function backendReady(isReady: () => boolean, maxMs: number): Promise<boolean> {
  const until = Date.now() + maxMs;
  while (!isReady()) {
    if (Date.now() >= until) return false;
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
 * The Redis client never queues commands, so a call that arrived before the first connection
 * is up would fail (and a burst of them would open the circuit breaker). The ports open only
 * once the backend is connected, or after a bound, so that with Redis away the service still
 * starts and the failure mode answers.
 */
async function startLimiter(settings: Settings, options: AppOptions, { logger, metrics, operator }: Core, running: Running): Promise<Limiter> {
  const wrapScript = running.tracing?.traceScript.bind(running.tracing);
  const limiter = options.limiter ?? createLimiter(settings, { logger, metrics, operator, ...(wrapScript ? { wrapScript } : {}) });
  running.limiter = limiter;
  const mustConnectWithinMs = settings.backendType === 'redis' ? settings.redisStartupMaxElapsedMs : 0;
  if (mustConnectWithinMs > 0) {
    // REDIS_STARTUP_MAX_ELAPSED_TIME: as the reference, no Redis within that time is a failed start.
    if (!(await backendReady(() => limiter.isHealthy(), mustConnectWithinMs))) {
      throw new BackendUnavailableError(`Redis not reachable within REDIS_STARTUP_MAX_ELAPSED_TIME (${mustConnectWithinMs} ms)`);
    }
    return limiter;
  }
  if (!(await backendReady(() => limiter.isHealthy(), BACKEND_STARTUP_WAIT_MS))) {
    logger.warn(
      `backend not connected after ${BACKEND_STARTUP_WAIT_MS} ms; serving anyway (BACKEND_FAILURE_MODE=${settings.backendFailureMode})`,
    );
  }
  return limiter;
}

/** The background orphan-key scan, when ORPHAN_SCAN_INTERVAL is set: one per deployment of workers (the first worker, or the only process). */
function startOrphanScan(settings: Settings, { logger, prometheus }: Core, running: Running): void {
  if (settings.orphanScan === undefined || settings.redis === undefined || (cluster.isWorker && cluster.worker?.id !== 1)) return;
  running.orphanScan = new OrphanScan({
    redis: settings.redis,
    scan: settings.orphanScan,
    prefix: settings.cacheKeyPrefix,
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
  const { startTracing: start } = await import('./tracing/start-tracing.js');
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
    if (limiter.isHealthy() && !(await backendReady(() => policy.isReady(), BACKEND_STARTUP_WAIT_MS))) {
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
    const holder = await startRules(settings, core, running);
    const rules = (): RuleSet | undefined => holder.current;
    const limiter = await startLimiter(settings, options, core, running);
    startOrphanScan(settings, core, running);
    const health = startHealth(settings, limiter, holder, running);
    const policy = await startPolicy(settings, options, core, { holder, limiter }, running);
    const untraced = new RateLimitService({ rules, limiter, metrics: core.metrics, config: serviceConfig(settings), policy });
    const service = running.tracing ? running.tracing.traceService(untraced) : untraced;
    const ports = await openPorts(settings, core, { service, policy, health, rules, limiter }, running);
    reportHealthChanges(health, core);
    let stopping: Promise<void> | undefined;
    const stop = (): Promise<void> => (stopping ??= closeRunning(running, settings.shutdownGraceMs));
    return { ...ports, health, metrics: prometheus, prometheusRegistry, ...(statsd ? { statsd } : {}), limiter, rules, stop };
  } catch (err) {
    await closeRunning(running, 0);
    throw err;
  }
}
