import * as grpc from '@grpc/grpc-js';
import { checkAlgorithms } from './config/check-algorithms';
import { loadRules } from './config/load-rules';
import type { RuleSet } from './config/rule-types';
import { RulesWatcher } from './config/rules-watcher';
import { GrpcServer } from './grpc/grpc-server';
import { HealthState } from './health';
import { rlconfigRoute } from './http/debug-routes';
import { HttpListener } from './http/http-listener';
import { metricsRoute } from './http/metrics-route';
import { healthcheckRoute, jsonRoute } from './http/service-routes';
import { createLimiter } from './limiter/create-limiter';
import { IMPLEMENTED_ALGORITHMS, type Limiter } from './limiter/limiter';
import { createLogger, type Logger } from './log';
import { PrometheusMetrics } from './metrics/metrics';
import { RateLimitService, type ServiceConfig } from './service/rate-limit-service';
import type { Settings } from './settings';
import { SettingsError } from './errors';

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
}

// How often TLS files are re-read: a rotated certificate is in use within this time.
const TLS_REFRESH_MS = 1000;

/** Resolves once `provider` has read its files, so the first connection already finds them. */
function firstLoad(provider: grpc.experimental.CertificateProvider, kind: 'identity' | 'ca', what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new SettingsError(`cannot read ${what} within 5 s`)), 5000);
    const done = (update: unknown): void => {
      clearTimeout(timer);
      if (update === null) reject(new SettingsError(`cannot read ${what}`));
      else resolve();
    };
    if (kind === 'identity') provider.addIdentityCertificateListener(done);
    else provider.addCaCertificateListener(done);
  });
}

/**
 * Plaintext, TLS, or mTLS when a client CA is set. The files are watched, so a certificate that
 * cert-manager (or anyone) rotates is served without a restart.
 */
async function grpcCredentials(settings: Settings): Promise<grpc.ServerCredentials> {
  const tls = settings.grpcTls;
  if (tls === undefined) return grpc.ServerCredentials.createInsecure();
  const identity = new grpc.experimental.FileWatcherCertificateProvider({
    certificateFile: tls.cert,
    privateKeyFile: tls.key,
    refreshIntervalMs: TLS_REFRESH_MS,
  });
  const clientCa = tls.clientCaCert
    ? new grpc.experimental.FileWatcherCertificateProvider({ caCertificateFile: tls.clientCaCert, refreshIntervalMs: TLS_REFRESH_MS })
    : null;
  await Promise.all([
    firstLoad(identity, 'identity', `GRPC_SERVER_TLS_CERT/GRPC_SERVER_TLS_KEY (${tls.cert}, ${tls.key})`),
    clientCa && firstLoad(clientCa, 'ca', `GRPC_CLIENT_TLS_CACERT (${tls.clientCaCert})`),
  ]);
  // grpc-js names the first parameter caCertificateProvider but uses it as the identity provider.
  return grpc.experimental.createCertificateProviderServerCredentials(identity, clientCa, clientCa !== null);
}

/** Reads and validates every rule file; the whole load fails on any error. */
async function readRules(settings: Settings): Promise<RuleSet> {
  const rules = await loadRules(settings.rulesDir, { mergeDomainConfig: settings.mergeDomainConfig, ignoreDotFiles: settings.runtimeIgnoreDotFiles });
  return checkAlgorithms(rules, IMPLEMENTED_ALGORITHMS);
}

async function initialRules(settings: Settings, logger: Logger, metrics: PrometheusMetrics): Promise<RuleSet | undefined> {
  try {
    const rules = await readRules(settings);
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

/** The one place that wires concrete pieces together. */
export async function startApp(settings: Settings, options: AppOptions = {}): Promise<App> {
  const logger = options.logger ?? createLogger(settings.logLevel, settings.logFormat);
  const metrics = new PrometheusMetrics({ collectDefault: true, maxSeries: settings.metricsMaxSeries });
  let current: RuleSet | undefined;
  const watcher = new RulesWatcher({
    root: settings.runtimeRoot,
    subdirectory: settings.runtimeSubdirectory,
    appDirectory: settings.runtimeAppDirectory,
    watchRoot: settings.runtimeWatchRoot,
    load: () => readRules(settings),
    onLoaded: (rules) => {
      current = rules;
      metrics.configLoad(true);
      logger.info('rules reloaded', { domains: rules.domainCount });
    },
    onError: (err) => {
      metrics.configLoad(false);
      logger.error(`error loading new configuration from runtime: ${err.message}`);
    },
  });
  // The watcher takes its baseline before the first load, so no change can fall in between.
  await watcher.start();
  current = await initialRules(settings, logger, metrics).catch((err: unknown) => {
    watcher.close();
    throw err;
  });
  const limiter = options.limiter ?? createLimiter(settings, { logger, metrics });
  // The Redis client never queues commands, so a call that arrived before the first connection
  // is up would fail (and a burst of them would open the circuit breaker). Open the ports only
  // once the backend is connected, or after a bound, so that with Redis away the service still
  // starts and the failure mode answers.
  if (!(await backendReady(limiter, BACKEND_STARTUP_WAIT_MS))) {
    logger.warn(`backend not connected after ${BACKEND_STARTUP_WAIT_MS} ms; serving anyway (BACKEND_FAILURE_MODE=${settings.backendFailureMode})`);
  }

  const rules = (): RuleSet | undefined => current;
  const health = new HealthState({
    backendHealthy: () => limiter.isHealthy(),
    rulesReady: () => !settings.healthyWithAtLeastOneConfigLoaded || current !== undefined,
  });
  const service = new RateLimitService({ rules, limiter, metrics, config: serviceConfig(settings) });

  const grpcServer = new GrpcServer({
    service,
    health,
    metrics,
    logger,
    defaultDeadlineMs: settings.defaultDeadlineMs,
    ...(settings.grpcTls?.clientSan ? { requiredClientSan: settings.grpcTls.clientSan } : {}),
  });
  const grpcAddress = settings.grpcUds ? `unix:${settings.grpcUds}` : `${settings.grpcHost}:${settings.grpcPort}`;
  const grpcPort = await grpcServer.listen(grpcAddress, await grpcCredentials(settings));
  const http = new HttpListener({ '/healthcheck': healthcheckRoute(health), '/json': jsonRoute(service, settings.defaultDeadlineMs) });
  const httpPort = await http.listen(settings.host, settings.port);
  const debug = new HttpListener({ '/rlconfig': rlconfigRoute(rules), '/metrics': metricsRoute(metrics.registry) });
  const debugPort = await debug.listen(settings.debugHost, settings.debugPort);
  let prometheus: HttpListener | undefined;
  let metricsPort: number | undefined;
  if (settings.usePrometheus) {
    prometheus = new HttpListener({ [settings.prometheusPath]: metricsRoute(metrics.registry) });
    metricsPort = await prometheus.listen(settings.prometheusHost, settings.prometheusPort);
  }
  health.on('change', (serving: boolean) => {
    metrics.setBackendHealthy(limiter.isHealthy());
    logger.warn(serving ? 'health: SERVING' : 'health: NOT_SERVING');
  });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      health.markShuttingDown();
      watcher.close();
      await grpcServer.shutdown(settings.shutdownGraceMs);
      await Promise.all([http.close(), debug.close(), prometheus?.close()]);
      health.close();
      await limiter.close();
    })());

  return { grpcPort, httpPort, debugPort, ...(metricsPort !== undefined ? { metricsPort } : {}), health, metrics, limiter, rules, stop };
}
