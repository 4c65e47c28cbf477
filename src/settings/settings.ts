import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { SettingsError } from '../base/errors';
import type { XdsSettings } from '../config/xds/xds-rules-client';
import type { GrpcTls } from '../grpc/credentials';
import type { GrpcLimits, RlsHandlerKind } from '../grpc/grpc-server';
import type { HttpLimits } from '../http/http-listener';
import type { BackendType, LimiterSettings } from '../limiter/create-limiter';
import type { FailureMode } from '../limiter/failure-mode-limiter';
import { DEFAULT_MAX_BYTES } from '../limiter/memory/memory-limiter';
import type { RedisSettings } from '../limiter/redis/redis-client';
import type { LogFormat, LogLevel } from '../base/log';
import type { TracingSettings } from '../tracing/tracing-settings';
import type { OrphanScanSettings } from '../redis-keys/orphan-scan';
import type { ResponseHeadersStyle } from '../service/header-styles';
import type { PrometheusMetricsOptions } from '../metrics/metrics';
import type { StatsdSettings } from '../metrics/statsd-metrics';
import { MAX_LIMITS_PER_LIST } from '../config/check-rules';
import { DEFAULT_MAX_RULE_TREE_BYTES } from '../config/load-rule-directory';
import { MAX_RULE_FILE_BYTES } from '../config/parse-rule-file';
import { DEFAULT_MAX_COUNTERS_PER_REQUEST, type RequestLimits } from '../service/validate-request';
import type { KeyLayout } from '../limiter/reference-key';
import { DEFAULT_CARRY_OVER_MS } from '../limiter/redis/reference-carry-over';
import { bool, duration, float, int, listenAddress, listenHost, oneOf, port, str, type Env } from './parse';
import { backendSettings, cacheKeyPrefix, checkAcceptedVariables, redisStartup } from './redis';
import { rulesSource, type ConfigType } from './rules-source';
import { statsSettings, tracingSettings } from './stats';
import { grpcConnectionAge, grpcLimits, grpcRlsHandler, grpcTls, header, httpLimits } from './transport';

export type { ConfigType } from './rules-source';

export interface Settings {
  readonly host: string;
  readonly port: number;
  readonly grpcHost: string;
  readonly grpcPort: number;
  readonly grpcUds?: string;
  readonly grpcTls?: GrpcTls;
  /** HTTP_JSON_WITHOUT_CLIENT_CERT: /json answers every client even while gRPC requires client certificates. */
  readonly httpJsonWithoutClientCert: boolean;
  readonly debugHost: string;
  readonly debugPort: number;
  readonly usePrometheus: boolean;
  readonly prometheusHost: string;
  readonly prometheusPort: number;
  readonly prometheusPath: string;
  readonly logLevel: LogLevel;
  readonly logFormat: LogFormat;

  readonly runtimeRoot: string;
  readonly runtimeSubdirectory: string;
  readonly runtimeAppDirectory: string;
  /** RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY: every file in it is a rule file. */
  readonly rulesDir: string;
  readonly runtimeWatchRoot: boolean;
  readonly runtimeIgnoreDotFiles: boolean;
  readonly mergeDomainConfig: boolean;
  /** MAX_RULE_TREE_BYTES: all rule files together (issue 26). */
  readonly maxRuleTreeBytes: number;
  readonly forceStartWithoutInitialConfig: boolean;
  readonly healthyWithAtLeastOneConfigLoaded: boolean;
  /** REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: a lost backend makes /healthcheck and service `ratelimit` fail. */
  readonly redisHealthCheckActiveConnection: boolean;
  /** CONFIG_TYPE: rules from the rule files, or from an xDS management server (then `xds` is set). */
  readonly configType: ConfigType;
  readonly xds?: XdsSettings;
  /** Present only when TRACING_ENABLED is true; otherwise no tracing code is even loaded. */
  readonly tracing?: TracingSettings;

  readonly backendType: BackendType;
  readonly redis?: RedisSettings;
  readonly redisPerSecond?: RedisSettings;
  readonly cacheKeyPrefix: string;
  /**
   * REDIS_KEY_LAYOUT (ours): `floodgate`, its own hash-tagged keys, or `reference`, the keys
   * envoyproxy/ratelimit counts in, for the rules it can express, so that both count together
   * during a rolling update (issue 30).
   */
  readonly redisKeyLayout: KeyLayout;
  /**
   * REDIS_KEY_LAYOUT_CARRY_OVER (ours, ms): with the own layout, a fixed window that began before
   * this long after start starts from the count the reference's key holds for it (issue 30);
   * 0: counters start at zero.
   */
  readonly redisKeyLayoutCarryOverMs: number;
  /**
   * REDIS_KEY_LAYOUT_UNTIL (ours, epoch ms): with REDIS_KEY_LAYOUT=reference, the moment (by the
   * pod's clock) from which the pod counts in floodgate's own keys, carrying over the windows in
   * progress: every pod leaves the shared layout at once (issue 30). Undefined: never.
   */
  readonly redisKeyLayoutUntilMs?: number;
  readonly backendFailureMode: FailureMode;
  readonly expirationJitterMaxSeconds: number;
  readonly localCacheSizeInBytes: number;
  readonly nearLimitRatio: number;
  readonly stopCacheKeyIncrementWhenOverlimit: boolean;

  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly responseDynamicMetadata: boolean;
  readonly limitResponseHeadersEnabled: boolean;
  readonly limitLimitHeader: string;
  readonly limitRemainingHeader: string;
  readonly limitResetHeader: string;

  readonly requestLimits: RequestLimits;
  /** Budget for a call that arrives without a deadline (Envoy always sends one). */
  readonly defaultDeadlineMs: number;
  /** How long SIGTERM waits for calls in flight before the process exits anyway. */
  readonly shutdownGraceMs: number;
  /** WORKERS: server processes sharing the ports (Node cluster); 1 = this process serves. */
  readonly workers: number;
  readonly grpcLimits: GrpcLimits;
  readonly httpLimits: HttpLimits;
  // Bounds on the state that request values can create (issue 8).
  /** MEMORY_MAX_COUNTERS: counters the memory backend (and failure mode `local`) keeps at most; unset = only MEMORY_MAX_BYTES bounds them. */
  readonly memoryMaxCounters: LimiterSettings['memoryMaxCounters'];
  /** MEMORY_MAX_BYTES: the memory those counters may take. */
  readonly memoryMaxBytes: LimiterSettings['memoryMaxBytes'];
  /** METRICS_MAX_SERIES: rule label sets (domain, key1, key2) the metrics keep at most. */
  readonly metricsMaxSeries: Required<PrometheusMetricsOptions>['maxSeries'];
  // Reference settings added by issue 13 (see src/settings/reference.ts for the whole list).
  /** USE_STATSD (on by default, as in the reference) or USE_DOG_STATSD; undefined when off. */
  readonly statsd?: StatsdSettings;
  /**
   * PROMETHEUS_MAPPER_YAML: the Prometheus endpoint serves the stats mapped by this statsd_exporter
   * mapping file, flushed every STATS_FLUSH_INTERVAL, as the reference's Prometheus sink does.
   */
  readonly prometheusMapper?: { readonly path: string; readonly flushIntervalMs: number; readonly extraTags: StatsdSettings['extraTags'] };
  /** PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS: the response-time histogram counts milliseconds. */
  readonly prometheusResponseTimeAsMilliseconds: boolean;
  /**
   * REDIS_STARTUP_MAX_ELAPSED_TIME: the ports open only once Redis is connected; when > 0, start-up
   * gives up after this long and fails, as the reference does; 0 (the default) waits for ever.
   */
  readonly redisStartupMaxElapsedMs: number;
  /**
   * REDIS_STARTUP_SERVE_ANYWAY (ours): after REDIS_STARTUP_MAX_ELAPSED_TIME without Redis, serve
   * (BACKEND_FAILURE_MODE answering) instead of failing. The explicit opt-in to a Ready pod without Redis.
   */
  readonly redisStartupServeAnyway: boolean;
  /** GRPC_RLS_HANDLER: ShouldRateLimit served on node:http2 directly (`http2`) or by grpc-js. */
  readonly grpcRlsHandler: RlsHandlerKind;
  /** GRPC_MAX_CONNECTION_AGE: a connection gets GOAWAY after this long (grpc-js adds ±10 % jitter). */
  readonly grpcMaxConnectionAgeMs: number;
  /** GRPC_MAX_CONNECTION_AGE_GRACE: then calls in flight get this long before it is closed. */
  readonly grpcMaxConnectionAgeGraceMs: number;

  // ---- operating floodgate (orphan-key scan, header style) ----
  /** ORPHAN_SCAN_*: the background scan for counter keys without a TTL; undefined = off. */
  readonly orphanScan?: OrphanScanSettings;
  /** RESPONSE_HEADERS_STYLE: which rate-limit headers LIMIT_RESPONSE_HEADERS_ENABLED sends. */
  readonly responseHeadersStyle: ResponseHeadersStyle;
}

/** The operator settings, one block: ORPHAN_SCAN_* and RESPONSE_HEADERS_STYLE. */
function operatorSettings(env: Env, backendType: BackendType): Pick<Settings, 'orphanScan' | 'responseHeadersStyle'> {
  const responseHeadersStyle = oneOf<ResponseHeadersStyle>(env, 'RESPONSE_HEADERS_STYLE', 'reference', ['reference', 'ietf', 'x-ratelimit']);
  const intervalMs = duration(env, 'ORPHAN_SCAN_INTERVAL', 0);
  if (intervalMs === 0) return { responseHeadersStyle };
  const raw = str(env, 'ORPHAN_SCAN_INTERVAL', '');
  if (backendType !== 'redis')
    throw new SettingsError(`invalid value for ORPHAN_SCAN_INTERVAL: '${raw}' (the orphan scan needs BACKEND_TYPE=redis)`);
  // A full scan every few ms would be a load, not a check.
  if (intervalMs < 1000) throw new SettingsError(`invalid value for ORPHAN_SCAN_INTERVAL: '${raw}' (expected 0 (off) or at least 1s)`);
  const pauseMs = duration(env, 'ORPHAN_SCAN_PAUSE', 10);
  if (pauseMs > 10_000)
    throw new SettingsError(`invalid value for ORPHAN_SCAN_PAUSE: '${str(env, 'ORPHAN_SCAN_PAUSE', '')}' (expected at most 10s)`);
  const orphanScan: OrphanScanSettings = Object.freeze({
    intervalMs,
    count: int(env, 'ORPHAN_SCAN_COUNT', 100, 1, 1000),
    pauseMs,
    replicas: bool(env, 'ORPHAN_SCAN_REPLICAS', false),
  });
  return { orphanScan, responseHeadersStyle };
}

function workers(env: Env, backendType: BackendType): number {
  const raw = str(env, 'WORKERS', '1').trim();
  const n = raw.toLowerCase() === 'auto' ? availableParallelism() : int(env, 'WORKERS', 1, 1, 256);
  // Memory counters live in one process: several workers would each grant the full limit.
  if (n > 1 && backendType === 'memory') {
    throw new SettingsError(
      `invalid value for WORKERS: '${raw}' (more than one worker needs BACKEND_TYPE=redis; memory counters are per process)`,
    );
  }
  return n;
}

// logrus level names, as the reference parses LOG_LEVEL, onto floodgate's four levels.
const LOGRUS_LEVELS: Readonly<Record<string, LogLevel>> = { trace: 'DEBUG', warning: 'WARN', fatal: 'ERROR', panic: 'ERROR' };

function logLevel(env: Env): LogLevel {
  const alias = LOGRUS_LEVELS[str(env, 'LOG_LEVEL', '').trim().toLowerCase()];
  return alias ?? oneOf<LogLevel>(env, 'LOG_LEVEL', 'WARN', ['DEBUG', 'INFO', 'WARN', 'ERROR']);
}

/** REDIS_KEY_LAYOUT_UNTIL: an RFC 3339 time (`2026-12-01T03:00:00Z`) or epoch seconds; only with REDIS_KEY_LAYOUT=reference. */
function layoutUntil(env: Env): { redisKeyLayoutUntilMs?: number } {
  const text = env['REDIS_KEY_LAYOUT_UNTIL']?.trim();
  if (text === undefined || text === '') return {};
  const ms = /^\d{1,12}$/.test(text) ? Number(text) * 1000 : /^\d{4}-\d{2}-\d{2}T/.test(text) ? Date.parse(text) : NaN;
  if (!Number.isFinite(ms)) {
    throw new SettingsError(
      `invalid value for REDIS_KEY_LAYOUT_UNTIL: '${text}' (expected an RFC 3339 time such as 2026-12-01T03:00:00Z, or epoch seconds)`,
    );
  }
  if (env['REDIS_KEY_LAYOUT']?.trim().toLowerCase() !== 'reference') {
    throw new SettingsError(
      `invalid value for REDIS_KEY_LAYOUT_UNTIL: '${text}' (needs REDIS_KEY_LAYOUT=reference: it says when to leave the shared layout)`,
    );
  }
  return { redisKeyLayoutUntilMs: ms };
}

/**
 * REDIS_KEY_LAYOUT_CARRY_OVER, refused at 0 with REDIS_KEY_LAYOUT_UNTIL: the switch at T would
 * count every window then in progress afresh in floodgate's own keys, silently.
 */
function carryOver(env: Env, until: number | undefined): number {
  const ms = duration(env, 'REDIS_KEY_LAYOUT_CARRY_OVER', DEFAULT_CARRY_OVER_MS);
  if (ms <= 0 && until !== undefined) {
    const text = env['REDIS_KEY_LAYOUT_CARRY_OVER'] ?? '';
    throw new SettingsError(
      `invalid value for REDIS_KEY_LAYOUT_CARRY_OVER: '${text}' (REDIS_KEY_LAYOUT_UNTIL is set: leaving the shared layout without the carry-over would reset every window in progress at that moment; unset REDIS_KEY_LAYOUT_UNTIL, or let the carry-over on)`,
    );
  }
  return ms;
}

/** Reads and validates every setting once; throws SettingsError naming the variable and value. */
export function loadSettings(env: Env = process.env): Settings {
  checkAcceptedVariables(env);
  const prometheus = listenAddress(env, 'PROMETHEUS_ADDR', ':9090');
  const runtimeRoot = str(env, 'RUNTIME_ROOT', '/srv/runtime_data/current');
  const runtimeSubdirectory = str(env, 'RUNTIME_SUBDIRECTORY', '');
  const runtimeAppDirectory = str(env, 'RUNTIME_APPDIRECTORY', 'config');
  const grpcUds = str(env, 'GRPC_UDS', '') || undefined;
  const prometheusPath = str(env, 'PROMETHEUS_PATH', '/metrics');
  if (!prometheusPath.startsWith('/')) throw new SettingsError(`invalid value for PROMETHEUS_PATH: '${prometheusPath}' (must start with '/')`);
  const tls = grpcTls(env);
  const backend = backendSettings(env);
  const until = layoutUntil(env);
  return Object.freeze({
    host: listenHost(env, 'HOST', '0.0.0.0'),
    port: port(env, 'PORT', 8080),
    grpcHost: listenHost(env, 'GRPC_HOST', '0.0.0.0'),
    grpcPort: port(env, 'GRPC_PORT', 8081),
    ...(grpcUds ? { grpcUds } : {}),
    ...(tls ? { grpcTls: tls } : {}),
    httpJsonWithoutClientCert: bool(env, 'HTTP_JSON_WITHOUT_CLIENT_CERT', false),
    debugHost: listenHost(env, 'DEBUG_HOST', '127.0.0.1'),
    debugPort: port(env, 'DEBUG_PORT', 6070),
    usePrometheus: bool(env, 'USE_PROMETHEUS', true),
    prometheusHost: prometheus.host,
    prometheusPort: prometheus.port,
    prometheusPath,
    logLevel: logLevel(env),
    logFormat: oneOf<LogFormat>(env, 'LOG_FORMAT', 'text', ['text', 'json']),
    runtimeRoot,
    runtimeSubdirectory,
    runtimeAppDirectory,
    rulesDir: join(runtimeRoot, runtimeSubdirectory, runtimeAppDirectory),
    runtimeWatchRoot: bool(env, 'RUNTIME_WATCH_ROOT', true),
    runtimeIgnoreDotFiles: bool(env, 'RUNTIME_IGNOREDOTFILES', false),
    mergeDomainConfig: bool(env, 'MERGE_DOMAIN_CONFIG', false),
    // At least one file of the per-file bound, or a tree of one large file could never load.
    maxRuleTreeBytes: int(env, 'MAX_RULE_TREE_BYTES', DEFAULT_MAX_RULE_TREE_BYTES, MAX_RULE_FILE_BYTES, 2 ** 40),
    forceStartWithoutInitialConfig: bool(env, 'FORCE_START_WITHOUT_INITIAL_CONFIG', false),
    healthyWithAtLeastOneConfigLoaded: bool(env, 'HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED', false),
    redisHealthCheckActiveConnection: bool(env, 'REDIS_HEALTH_CHECK_ACTIVE_CONNECTION', false),
    ...rulesSource(env),
    ...tracingSettings(env),
    ...backend,
    cacheKeyPrefix: cacheKeyPrefix(env),
    redisKeyLayout: oneOf<KeyLayout>(env, 'REDIS_KEY_LAYOUT', 'floodgate', ['floodgate', 'reference']),
    redisKeyLayoutCarryOverMs: carryOver(env, until.redisKeyLayoutUntilMs),
    ...until,
    backendFailureMode: oneOf<FailureMode>(env, 'BACKEND_FAILURE_MODE', 'error', ['error', 'allow', 'deny', 'local']),
    expirationJitterMaxSeconds: int(env, 'EXPIRATION_JITTER_MAX_SECONDS', 300, 0, 86400),
    localCacheSizeInBytes: int(env, 'LOCAL_CACHE_SIZE_IN_BYTES', 0, 0, 2 ** 40),
    nearLimitRatio: float(env, 'NEAR_LIMIT_RATIO', 0.8, 0, 1),
    stopCacheKeyIncrementWhenOverlimit: bool(env, 'STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT', false),
    shadowMode: bool(env, 'SHADOW_MODE', false),
    quotaMode: bool(env, 'QUOTA_MODE', false),
    responseDynamicMetadata: bool(env, 'RESPONSE_DYNAMIC_METADATA', false),
    limitResponseHeadersEnabled: bool(env, 'LIMIT_RESPONSE_HEADERS_ENABLED', false),
    limitLimitHeader: header(env, 'LIMIT_LIMIT_HEADER', 'RateLimit-Limit'),
    limitRemainingHeader: header(env, 'LIMIT_REMAINING_HEADER', 'RateLimit-Remaining'),
    limitResetHeader: header(env, 'LIMIT_RESET_HEADER', 'RateLimit-Reset'),
    requestLimits: Object.freeze({
      maxDescriptors: int(env, 'MAX_DESCRIPTORS_PER_REQUEST', 64, 1, 4096),
      maxEntries: int(env, 'MAX_ENTRIES_PER_DESCRIPTOR', 32, 1, 1024),
      maxKeyBytes: int(env, 'MAX_DESCRIPTOR_KEY_BYTES', 256, 1, 65536),
      maxValueBytes: int(env, 'MAX_DESCRIPTOR_VALUE_BYTES', 4096, 1, 65536),
      // At least one full rate_limits list, or a descriptor that matches one could never be counted.
      maxCounters: int(env, 'MAX_COUNTERS_PER_REQUEST', DEFAULT_MAX_COUNTERS_PER_REQUEST, MAX_LIMITS_PER_LIST, 65536),
    }),
    defaultDeadlineMs: int(env, 'DEFAULT_DEADLINE_MS', 1000, 1, 600_000),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    workers: workers(env, backend.backendType),
    grpcLimits: grpcLimits(env),
    httpLimits: httpLimits(env),
    // Unset (0 here, which a value cannot be): no bound on the count, only on the bytes.
    memoryMaxCounters: int(env, 'MEMORY_MAX_COUNTERS', 0, 1, 100_000_000) || undefined,
    memoryMaxBytes: int(env, 'MEMORY_MAX_BYTES', DEFAULT_MAX_BYTES, 1024 * 1024, 2 ** 40),
    metricsMaxSeries: int(env, 'METRICS_MAX_SERIES', 1000, 1, 1_000_000),
    ...statsSettings(env),
    ...redisStartup(env),
    ...grpcConnectionAge(env),
    ...grpcRlsHandler(env),
    ...operatorSettings(env, backend.backendType),
  } satisfies Settings);
}
