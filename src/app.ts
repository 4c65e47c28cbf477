import { loadRuleDirectory } from './config/load-rule-directory';
import type { RuleSet } from './config/rule-types';
import { RulesWatcher } from './config/rules-watcher';
import { XdsRulesClient } from './config/xds/xds-rules-client';
import { grpcServerCredentials } from './grpc/credentials';
import { GrpcServer } from './grpc/grpc-server';
import { HealthState } from './health';
import { rlconfigRoute } from './http/debug-routes';
import { HttpListener, type Route } from './http/http-listener';
import { metricsRoute } from './http/metrics-route';
import { healthcheckRoute, jsonRouteFor } from './http/service-routes';
import { createLimiter } from './limiter/create-limiter';
import type { Limiter } from './limiter/limiter';
import { createLogger, type Logger } from './log';
import { PrometheusMetrics } from './metrics/metrics';
import type { RateLimitHandler } from './service/rate-limit-handler';
import { RateLimitService, type ServiceConfig } from './service/rate-limit-service';
import type { Settings } from './settings';
import type { Tracing } from './tracing/start-tracing';

/** A running floodgate instance. */
export interface App {
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly debugPort: number;
  /** Undefined when USE_PROMETHEUS is off. */
  readonly metricsPort?: number;
  readonly health: HealthState;
  readonly metrics: PrometheusMetrics;
  readonly limiter: Limiter;
  rules(): RuleSet | undefined;
  /** SIGTERM path: NOT_SERVING, let calls in flight finish (bounded), close everything. */
  stop(): Promise<void>;
}

export interface AppOptions {
  readonly logger?: Logger;
  /** A limiter to use instead of the one the settings describe (tests). */
  readonly limiter?: Limiter;
  /** With TRACING_ENABLED: export spans here, one by one, instead of OTLP (tests). */
  readonly spanExporter?: import('@opentelemetry/sdk-trace-base').SpanExporter;
}

/** The rule loader both the first load and every reload use; the whole load fails on any error. */
function ruleLoader(settings: Settings): () => Promise<RuleSet> {
  const options = { mergeDomainConfig: settings.mergeDomainConfig, ignoreDotFiles: settings.runtimeIgnoreDotFiles };
  return () => loadRuleDirectory(settings.rulesDir, options);
}

/** The first load; without good rules the start fails, unless FORCE_START_WITHOUT_INITIAL_CONFIG. */
async function loadStartupRules(load: () => Promise<RuleSet>, settings: Settings, logger: Logger, metrics: PrometheusMetrics): Promise<RuleSet | undefined> {
  try {
    const rules = await load();
    metrics.configLoad(true);
    return rules;
  } catch (err) {
    metrics.configLoad(false);
    if (!settings.forceStartWithoutInitialConfig) throw err;
    logger.warn('starting without rules (FORCE_START_WITHOUT_INITIAL_CONFIG)', { error: (err as Error).message });
    return undefined;
  }
}

const BACKEND_STARTUP_WAIT_MS = 5000;

/** Resolves true once the limiter's backend is connected, false after `maxMs`. */
async function backendReady(limiter: Limiter, maxMs: number): Promise<boolean> {
  const until = Date.now() + maxMs;
  while (!limiter.isHealthy()) {
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
      ? { headers: { limit: settings.limitLimitHeader, remaining: settings.limitRemainingHeader, reset: settings.limitResetHeader } }
      : {}),
    requestLimits: settings.requestLimits,
  };
}

/**
 * Everything startApp has started so far. Both a start that fails partway and stop() close it
 * through closeRunning, so what was opened is closed whichever way the app ends.
 */
interface Running {
  /** The rule files' watcher, or the xDS client (CONFIG_TYPE=GRPC_XDS_SOTW). */
  rulesSource?: { close(): void };
  limiter?: Limiter;
  health?: HealthState;
  grpcServer?: GrpcServer;
  tracing?: Tracing;
  readonly listeners: HttpListener[];
}

/** NOT_SERVING first, then calls in flight finish (bounded by `graceMs`), then the rest closes. */
async function closeRunning(running: Running, graceMs: number): Promise<void> {
  running.health?.markShuttingDown();
  running.rulesSource?.close();
  await running.grpcServer?.shutdown(graceMs);
  await Promise.all(running.listeners.map((listener) => listener.close()));
  running.health?.close();
  await running.limiter?.close();
  await running.tracing?.shutdown();
}

interface Core {
  readonly logger: Logger;
  readonly metrics: PrometheusMetrics;
}

/** The rule set in use, swapped whole by each successful reload. */
interface RulesHolder {
  current: RuleSet | undefined;
}

/**
 * Starts the rules source and returns the holder it swaps. Files: watching starts, then the
 * first load; the baseline comes first, so no change falls in between. xDS: the rules arrive
 * with the first snapshot, as in the reference (the ports open without waiting for it).
 */
async function startRules(settings: Settings, { logger, metrics }: Core, running: Running): Promise<RulesHolder> {
  const holder: RulesHolder = { current: undefined };
  const onLoaded = (rules: RuleSet): void => {
    holder.current = rules;
    metrics.configLoad(true);
    logger.info('rules reloaded', { domains: rules.domainCount });
  };
  if (settings.xds) {
    const client = new XdsRulesClient({
      settings: settings.xds,
      mergeDomainConfig: settings.mergeDomainConfig,
      logger,
      onLoaded,
      onError: (err) => {
        metrics.configLoad(false);
        logger.error(`error loading new configuration from xDS: ${err.message}`);
      },
    });
    running.rulesSource = client;
    client.start();
    return holder;
  }
  const load = ruleLoader(settings);
  const watcher = new RulesWatcher({
    root: settings.runtimeRoot,
    subdirectory: settings.runtimeSubdirectory,
    appDirectory: settings.runtimeAppDirectory,
    watchRoot: settings.runtimeWatchRoot,
    load,
    onLoaded,
    onError: (err) => {
      metrics.configLoad(false);
      logger.error(`error loading new configuration from runtime: ${err.message}`);
    },
  });
  running.rulesSource = watcher;
  await watcher.start();
  holder.current = await loadStartupRules(load, settings, logger, metrics);
  return holder;
}

/**
 * The Redis client never queues commands, so a call that arrived before the first connection
 * is up would fail (and a burst of them would open the circuit breaker). The ports open only
 * once the backend is connected, or after a bound, so that with Redis away the service still
 * starts and the failure mode answers.
 */
async function startLimiter(settings: Settings, options: AppOptions, { logger, metrics }: Core, running: Running): Promise<Limiter> {
  const wrapScript = running.tracing?.traceScript;
  const limiter = options.limiter ?? createLimiter(settings, { logger, metrics, ...(wrapScript ? { wrapScript } : {}) });
  running.limiter = limiter;
  if (!(await backendReady(limiter, BACKEND_STARTUP_WAIT_MS))) {
    logger.warn(`backend not connected after ${BACKEND_STARTUP_WAIT_MS} ms; serving anyway (BACKEND_FAILURE_MODE=${settings.backendFailureMode})`);
  }
  return limiter;
}

function startHealth(settings: Settings, limiter: Limiter, holder: RulesHolder, running: Running): HealthState {
  running.health = new HealthState({
    backendHealthy: () => limiter.isHealthy(),
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

interface Served {
  readonly service: RateLimitHandler;
  readonly health: HealthState;
  readonly rules: () => RuleSet | undefined;
}

type Ports = Pick<App, 'grpcPort' | 'httpPort' | 'debugPort' | 'metricsPort'>;

async function listenHttp(running: Running, routes: Record<string, Route>, settings: Settings, host: string, port: number): Promise<number> {
  const listener = new HttpListener(routes, settings.httpLimits);
  const bound = await listener.listen(host, port);
  running.listeners.push(listener);
  return bound;
}

/** gRPC, then HTTP, debug and Prometheus; each one joins `running` as soon as it listens. */
async function openPorts(settings: Settings, { logger, metrics }: Core, { service, health, rules }: Served, running: Running): Promise<Ports> {
  running.grpcServer = new GrpcServer({
    service,
    health,
    metrics,
    logger,
    defaultDeadlineMs: settings.defaultDeadlineMs,
    limits: settings.grpcLimits,
    ...(settings.grpcTls?.clientSan ? { requiredClientSan: settings.grpcTls.clientSan } : {}),
  });
  const grpcAddress = settings.grpcUds ? `unix:${settings.grpcUds}` : `${settings.grpcHost}:${settings.grpcPort}`;
  const grpcPort = await running.grpcServer.listen(grpcAddress, await grpcServerCredentials(settings.grpcTls, settings.grpcLimits.maxConnectionIdleMs, logger));
  const httpRoutes = { '/healthcheck': healthcheckRoute(health), '/json': jsonRouteFor(
    { defaultDeadlineMs: settings.defaultDeadlineMs, maxBodyBytes: settings.httpLimits.maxBodyBytes, grpcRequiresClientCerts: settings.grpcTls?.clientCaCert !== undefined },
    service,
  ) };
  const httpPort = await listenHttp(running, httpRoutes, settings, settings.host, settings.port);
  const debugRoutes = { '/rlconfig': rlconfigRoute(rules), '/metrics': metricsRoute(metrics.registry) };
  const debugPort = await listenHttp(running, debugRoutes, settings, settings.debugHost, settings.debugPort);
  if (!settings.usePrometheus) return { grpcPort, httpPort, debugPort };
  const metricsRoutes = { [settings.prometheusPath]: metricsRoute(metrics.registry) };
  const metricsPort = await listenHttp(running, metricsRoutes, settings, settings.prometheusHost, settings.prometheusPort);
  return { grpcPort, httpPort, debugPort, metricsPort };
}

function reportHealthChanges(health: HealthState, limiter: Limiter, { logger, metrics }: Core): void {
  health.on('change', (serving: boolean) => {
    metrics.setBackendHealthy(limiter.isHealthy());
    logger.warn(serving ? 'health: SERVING' : 'health: NOT_SERVING');
  });
}

/** The one place that wires concrete pieces together. A start that fails partway closes what it started. */
export async function startApp(settings: Settings, options: AppOptions = {}): Promise<App> {
  const core: Core = { logger: options.logger ?? createLogger(settings.logLevel, settings.logFormat), metrics: new PrometheusMetrics({ collectDefault: true }) };
  const running: Running = { listeners: [] };
  try {
    await startTracing(settings, options, running);
    const holder = await startRules(settings, core, running);
    const rules = (): RuleSet | undefined => holder.current;
    const limiter = await startLimiter(settings, options, core, running);
    const health = startHealth(settings, limiter, holder, running);
    const untraced = new RateLimitService({ rules, limiter, metrics: core.metrics, config: serviceConfig(settings) });
    const service = running.tracing ? running.tracing.traceService(untraced) : untraced;
    const ports = await openPorts(settings, core, { service, health, rules }, running);
    reportHealthChanges(health, limiter, core);
    let stopping: Promise<void> | undefined;
    const stop = (): Promise<void> => (stopping ??= closeRunning(running, settings.shutdownGraceMs));
    return { ...ports, health, metrics: core.metrics, limiter, rules, stop };
  } catch (err) {
    await closeRunning(running, 0);
    throw err;
  }
}
