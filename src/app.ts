import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import type { Registry } from 'prom-client';
import { loadRuleTree } from './config/load-rule-directory';
import { ruleTreeOf } from './config/rule-tree';
import type { RuleSet } from './config/rule-types';
import { RulesWatcher } from './config/rules-watcher';
import { XdsRulesClient } from './config/xds/xds-rules-client';
import { grpcServerCredentials } from './grpc/credentials';
import { GrpcServer } from './grpc/grpc-server';
import { HealthState } from './health';
import { debugPageRoute, debugStateRoute } from './http/debug-page';
import { rlconfigRoute } from './http/debug-routes';
import { allowedHostsOnly } from './http/host-check';
import { HttpListener, type Route } from './http/http-listener';
import { metricsRoute } from './http/metrics-route';
import { healthcheckRoute, jsonRouteFor } from './http/service-routes';
import { createLimiter } from './limiter/create-limiter';
import type { Limiter } from './limiter/limiter';
import { createLogger, type Logger } from './log';
import { PrometheusMetrics, type ServiceMetrics } from './metrics/metrics';
import { StatsdMetrics } from './metrics/statsd-metrics';
import { createStatsdTransport } from './metrics/statsd-transport';
import { TeeMetrics } from './metrics/tee-metrics';
import { OperatorMetrics } from './metrics/operator-metrics';
import { MappedPrometheusSink } from './metrics/mapped-prometheus-sink';
import { StatsdMapping } from './metrics/statsd-mapping';
import { OrphanScan } from './redis-keys/orphan-scan';
import { RateLimitService, type ServiceConfig } from './service/rate-limit-service';
import type { Settings } from './settings';
import { BackendUnavailableError, SettingsError } from './errors';
import { policyRoute } from './http/policy-route';
import { PrometheusPolicyMetrics } from './metrics/policy-metrics';
import { createPolicyStore } from './policy/create-policy-store';
import { PolicyEngine } from './policy/policy-engine';
import type { PolicyStore } from './policy/policy-store';
import type { RateLimitHandler } from './service/rate-limit-handler';
import type { Tracing } from './tracing/start-tracing';
import { joinHostPort } from './host-port';

/** A running floodgate instance. */
export interface App {
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly debugPort: number;
  /** Undefined when USE_PROMETHEUS is off. */
  readonly metricsPort?: number;
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

/**
 * The rule loader both the first load and every reload use (and `floodgate check` without a
 * directory); the whole load fails on any error.
 */
function ruleLoader(settings: Settings): () => Promise<RuleSet> {
  const options = { mergeDomainConfig: settings.mergeDomainConfig, ignoreDotFiles: settings.runtimeIgnoreDotFiles };
  const tree = ruleTreeOf({
    root: settings.runtimeRoot,
    subdirectory: settings.runtimeSubdirectory,
    appDirectory: settings.runtimeAppDirectory,
    watchRoot: settings.runtimeWatchRoot,
  });
  return () => loadRuleTree(tree, options);
}

/** The first load; without good rules the start fails, unless FORCE_START_WITHOUT_INITIAL_CONFIG. */
async function loadStartupRules(
  load: () => Promise<RuleSet>,
  settings: Settings,
  logger: Logger,
  metrics: ServiceMetrics,
): Promise<RuleSet | undefined> {
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
 * Everything startApp has started so far. Both a start that fails partway and stop() close it
 * through closeRunning, so what was opened is closed whichever way the app ends.
 */
interface Running {
  /** The rule files' watcher, or the xDS client (CONFIG_TYPE=GRPC_XDS_SOTW). */
  rulesSource?: { close(): void };
  limiter?: Limiter;
  policy?: PolicyEngine;
  health?: HealthState;
  grpcServer?: GrpcServer;
  orphanScan?: OrphanScan;
  tracing?: Tracing;
  readonly listeners: HttpListener[];
  /** statsd and the PROMETHEUS_MAPPER_YAML sink: each sends what it counted when closed. */
  readonly stats: StatsdMetrics[];
}

/** NOT_SERVING first, then calls in flight finish (bounded by `graceMs`), then the rest closes. */
async function closeRunning(running: Running, graceMs: number): Promise<void> {
  running.health?.markShuttingDown();
  running.rulesSource?.close();
  await running.grpcServer?.shutdown(graceMs);
  await Promise.all(running.listeners.map((listener) => listener.close()));
  running.health?.close();
  await running.orphanScan?.close();
  await running.limiter?.close();
  await running.policy?.close();
  await running.tracing?.shutdown();
  // Last, so that the final flush carries everything counted until the end.
  await Promise.all(running.stats.map((s) => s.close()));
}

interface Core {
  readonly logger: Logger;
  /** Every sink: Prometheus, and statsd when it is on. */
  readonly metrics: ServiceMetrics;
  readonly prometheus: PrometheusMetrics;
  /** What the Prometheus routes serve: floodgate's own series, or those of PROMETHEUS_MAPPER_YAML. */
  readonly prometheusRegistry: Registry;
  /** Operator metrics, registered with `prometheus`. */
  readonly operator: OperatorMetrics;
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
async function startRules(settings: Settings, { logger, metrics, operator }: Core, running: Running): Promise<RulesHolder> {
  const holder: RulesHolder = { current: undefined };
  const onLoaded = (rules: RuleSet): void => {
    holder.current = rules;
    operator.rulesLoaded(rules);
    metrics.configLoad(true);
    logger.info('rules reloaded', { domains: rules.domainCount });
  };
  if (settings.xds) {
    const client = new XdsRulesClient({
      settings: settings.xds,
      mergeDomainConfig: settings.mergeDomainConfig,
      logger,
      onLoaded,
      onError: (err, { log, unlogged }) => {
        metrics.configLoad(false);
        operator.loadFailed(`xDS: ${err.message}`);
        // Paced by the client: a server sending bad snapshots in a loop cannot flood the log.
        const since = unlogged > 0 ? ` (and ${unlogged} more rejected snapshots not logged since the last)` : '';
        if (log) logger.error(`error loading new configuration from xDS: ${err.message}${since}`);
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
    ignoreDotFiles: settings.runtimeIgnoreDotFiles,
    load,
    onLoaded,
    onError: (err) => {
      metrics.configLoad(false);
      operator.loadFailed(err.message);
      logger.error(`error loading new configuration from runtime: ${err.message}`);
    },
  });
  running.rulesSource = watcher;
  await watcher.start();
  holder.current = await loadStartupRules(load, settings, logger, metrics);
  if (holder.current !== undefined) operator.rulesLoaded(holder.current);
  return holder;
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

interface Served {
  readonly service: RateLimitHandler;
  readonly limiter: Limiter;
  readonly policy: PolicyEngine;
  readonly health: HealthState;
  readonly rules: () => RuleSet | undefined;
}

type Ports = Pick<App, 'grpcPort' | 'httpPort' | 'debugPort' | 'metricsPort'>;

/** Where a port is configured: the variable (GRPC_PORT, PORT...) and its value, for messages. */
interface PortSetting {
  readonly variable: string;
  readonly value: string | number;
}

/** Waits for `listening`; a port in use fails the start naming its variable (`GRPC_PORT 8081 is in use`). */
async function bound(listening: Promise<number>, { variable, value }: PortSetting): Promise<number> {
  try {
    return await listening;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new SettingsError(`${variable} ${value} is in use`);
    throw err;
  }
}

async function listenHttp(
  running: Running,
  routes: Record<string, Route>,
  settings: Settings,
  address: { host: string; port: number } & PortSetting,
): Promise<number> {
  const listener = new HttpListener(routes, settings.httpLimits);
  const port = await bound(listener.listen(address.host, address.port), address);
  running.listeners.push(listener);
  return port;
}

/** gRPC, then HTTP, debug and Prometheus; each one joins `running` as soon as it listens. */
async function openPorts(
  settings: Settings,
  { logger, metrics, prometheus, prometheusRegistry, operator }: Core,
  { service, policy, health, rules, limiter }: Served,
  running: Running,
): Promise<Ports> {
  running.grpcServer = new GrpcServer({
    service,
    health,
    metrics,
    logger,
    defaultDeadlineMs: settings.defaultDeadlineMs,
    limits: settings.grpcLimits,
    maxConnectionAgeMs: settings.grpcMaxConnectionAgeMs,
    maxConnectionAgeGraceMs: settings.grpcMaxConnectionAgeGraceMs,
    ...(settings.grpcTls?.clientSan ? { requiredClientSan: settings.grpcTls.clientSan } : {}),
  });
  const grpcAddress = settings.grpcUds ? `unix:${settings.grpcUds}` : joinHostPort(settings.grpcHost, settings.grpcPort);
  const grpcPort = await bound(
    running.grpcServer.listen(grpcAddress, await grpcServerCredentials(settings.grpcTls, settings.grpcLimits.maxConnectionIdleMs, logger)),
    settings.grpcUds ? { variable: 'GRPC_UDS', value: settings.grpcUds } : { variable: 'GRPC_PORT', value: settings.grpcPort },
  );
  const httpRoutes = {
    '/healthcheck': healthcheckRoute(health),
    '/json': jsonRouteFor(
      {
        defaultDeadlineMs: settings.defaultDeadlineMs,
        maxBodyBytes: settings.httpLimits.maxBodyBytes,
        grpcRequiresClientCerts: settings.grpcTls?.clientCaCert !== undefined,
        withoutClientCert: settings.httpJsonWithoutClientCert,
      },
      service,
    ),
  };
  const httpPort = await listenHttp(running, httpRoutes, settings, {
    host: settings.host,
    port: settings.port,
    variable: 'PORT',
    value: settings.port,
  });
  // Only the Host names an operator uses: a DNS-rebinding page gets nothing (issue 18).
  const debugRoutes = allowedHostsOnly(
    {
      '/rlconfig': rlconfigRoute(rules),
      '/metrics': metricsRoute(prometheusRegistry),
      '/': debugPageRoute(),
      '/debug/state': debugStateRoute({
        rules,
        registry: prometheus.registry,
        backendType: settings.backendType,
        backendHealthy: () => limiter.isHealthy(),
        serving: () => health.isServing(),
        breakers: () => operator.breakerStates(),
        lastLoad: () => operator.lastLoad,
        lastLoadError: () => operator.lastLoadError,
      }),
      '/policy': policyRoute(rules, policy),
    },
    settings.debugHost,
  );
  const debugPort = await listenHttp(running, debugRoutes, settings, {
    host: settings.debugHost,
    port: settings.debugPort,
    variable: 'DEBUG_PORT',
    value: settings.debugPort,
  });
  if (!settings.usePrometheus) return { grpcPort, httpPort, debugPort };
  const metricsRoutes = { [settings.prometheusPath]: metricsRoute(prometheusRegistry) };
  const metricsPort = await listenHttp(running, metricsRoutes, settings, {
    host: settings.prometheusHost,
    port: settings.prometheusPort,
    variable: 'PROMETHEUS_ADDR',
    value: joinHostPort(settings.prometheusHost, settings.prometheusPort),
  });
  return { grpcPort, httpPort, debugPort, metricsPort };
}

function reportHealthChanges(health: HealthState, { logger, metrics }: Core): void {
  let serving = health.isServing();
  let backend = health.isBackendHealthy();
  metrics.setBackendHealthy(backend);
  health.on('change', () => {
    if (backend !== health.isBackendHealthy()) {
      backend = !backend;
      metrics.setBackendHealthy(backend);
      logger.warn(backend ? 'backend: reachable again' : 'backend: unreachable; calls follow BACKEND_FAILURE_MODE');
    }
    if (serving !== health.isServing()) {
      serving = !serving;
      logger.warn(serving ? 'health: SERVING' : 'health: NOT_SERVING');
    }
  });
}

/** USE_STATSD / USE_DOG_STATSD: counted in memory, sent every STATS_FLUSH_INTERVAL. */
function startStatsd(settings: Settings, logger: Logger, running: Running): StatsdMetrics | undefined {
  const s = settings.statsd;
  if (s === undefined) return undefined;
  const transport = createStatsdTransport({
    host: s.host,
    port: s.port,
    protocol: s.protocol,
    onError: (message) => logger.warn(`stats not delivered: ${message}`),
  });
  const statsd = new StatsdMetrics(s, transport);
  running.stats.push(statsd);
  logger.info(`stats: ${s.format} to ${s.host}:${s.port} (${s.protocol}) every ${s.flushIntervalMs} ms`);
  return statsd;
}

/** PROMETHEUS_MAPPER_YAML: the reference's stats, flushed through that statsd_exporter mapping into a registry. */
function startMappedPrometheus(settings: Settings, running: Running): { metrics: StatsdMetrics; registry: Registry } | undefined {
  const m = settings.prometheusMapper;
  if (m === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(m.path, 'utf8');
  } catch (err) {
    throw new SettingsError(`invalid value for PROMETHEUS_MAPPER_YAML: '${m.path}' (${(err as Error).message})`);
  }
  const sink = new MappedPrometheusSink(new StatsdMapping(text), { maxSeries: settings.metricsMaxSeries });
  const metrics = new StatsdMetrics({ format: 'statsd', flushIntervalMs: m.flushIntervalMs, extraTags: m.extraTags, mogrifiers: [] }, sink);
  running.stats.push(metrics);
  return { metrics, registry: sink.registry };
}

/** The metric sinks: Prometheus always, statsd and the mapped registry when configured. */
async function startMetrics(settings: Settings, logger: Logger, running: Running): Promise<{ core: Core; statsd: StatsdMetrics | undefined }> {
  const prometheus = new PrometheusMetrics({
    collectDefault: true,
    maxSeries: settings.metricsMaxSeries,
    responseTimeInMilliseconds: settings.prometheusResponseTimeAsMilliseconds,
  });
  const statsd = startStatsd(settings, logger, running);
  let mapped;
  try {
    mapped = startMappedPrometheus(settings, running);
  } catch (err) {
    await closeRunning(running, 0);
    throw err;
  }
  const sinks = [prometheus, ...(statsd ? [statsd] : []), ...(mapped ? [mapped.metrics] : [])];
  const prometheusRegistry = mapped?.registry ?? prometheus.registry;
  return {
    core: {
      logger,
      prometheus,
      prometheusRegistry,
      metrics: sinks.length > 1 ? new TeeMetrics(sinks) : prometheus,
      // Served on /metrics with or without a mapping: the mapped registry holds the reference's
      // stats, these are floodgate's own. (A mapping that names a series like one of them loses
      // that series: the sink drops a name the registry already has, and counts it a conflict.)
      operator: new OperatorMetrics(prometheusRegistry, { maxDomainSeries: settings.metricsMaxSeries }),
    },
    statsd,
  };
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
