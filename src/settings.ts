import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { SettingsError } from './errors';
import type { XdsSettings } from './config/xds/xds-rules-client';
import type { GrpcTls } from './grpc/credentials';
import type { GrpcLimits } from './grpc/grpc-server';
import type { HttpLimits } from './http/http-listener';
import type { BackendType, LimiterSettings } from './limiter/create-limiter';
import type { FailureMode } from './limiter/failure-mode-limiter';
import type { RedisSettings, RedisType } from './limiter/redis/redis-client';
import type { LogFormat, LogLevel } from './log';
import type { TracingSettings } from './tracing/tracing-settings';
import { splitRedisUrl, type SplitRedisUrl } from './redis-url-credentials';
import type { OrphanScanSettings } from './redis-keys/orphan-scan';
import type { ResponseHeadersStyle } from './service/header-styles';
import type { Mogrifier } from './metrics/dogstatsd-mogrifier';
import type { PrometheusMetricsOptions } from './metrics/metrics';
import type { StatsdSettings } from './metrics/statsd-metrics';
import { sanitizeTagName, sanitizeTagValue } from './metrics/stat-name';
import type { RequestLimits } from './service/validate-request';
import { bool, duration, float, int, list, listenAddress, oneOf, port, str, stringMap, type Env } from './settings-parse';

export interface Settings {
  readonly host: string;
  readonly port: number;
  readonly grpcHost: string;
  readonly grpcPort: number;
  readonly grpcUds?: string;
  readonly grpcTls?: GrpcTls;
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
  /** MEMORY_MAX_COUNTERS: counters the memory backend (and failure mode `local`) keeps at most. */
  readonly memoryMaxCounters: LimiterSettings['memoryMaxCounters'];
  /** METRICS_MAX_SERIES: rule label sets (domain, key1, key2) the metrics keep at most. */
  readonly metricsMaxSeries: Required<PrometheusMetricsOptions>['maxSeries'];
  // Reference settings added by issue 13 (see src/settings-reference.ts for the whole list).
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
   * REDIS_STARTUP_MAX_ELAPSED_TIME: when > 0, start-up waits this long for Redis and fails without
   * it, as the reference does; 0 (the default) waits 5 s and then serves with BACKEND_FAILURE_MODE.
   */
  readonly redisStartupMaxElapsedMs: number;
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

/** `password` or `user:password` (REDIS_AUTH form), split at the first colon. */
function credentials(auth: string): { username?: string; password: string } | undefined {
  if (auth === '') return undefined;
  const colon = auth.indexOf(':');
  return colon >= 0 ? { username: auth.slice(0, colon), password: auth.slice(colon + 1) } : { password: auth };
}

type RedisPrefix = 'REDIS' | 'REDIS_PERSECOND';
type RedisCredentials = Pick<RedisSettings, 'username' | 'password' | 'sentinelUsername' | 'sentinelPassword'>;
type RedisTlsFiles = Pick<RedisSettings, 'tlsCaCert' | 'tlsClientCert' | 'tlsClientKey'>;

/** The master's credentials, from `<prefix>_AUTH` or the URL (never both), and the sentinels' own. */
function redisCredentials(env: Env, prefix: RedisPrefix, fromUrl: SplitRedisUrl): RedisCredentials {
  const auth = credentials(str(env, `${prefix}_AUTH`, ''));
  if (auth !== undefined && fromUrl.password !== undefined) {
    throw new SettingsError(`invalid value for ${prefix}_URL: it carries a password and ${prefix}_AUTH is set too (use one of them)`);
  }
  const sentinelAuth = credentials(str(env, prefix === 'REDIS' ? 'REDIS_SENTINEL_AUTH' : 'REDIS_PERSECOND_SENTINEL_AUTH', ''));
  return {
    ...(auth ?? { ...(fromUrl.username ? { username: fromUrl.username } : {}), ...(fromUrl.password ? { password: fromUrl.password } : {}) }),
    ...(sentinelAuth?.username ? { sentinelUsername: sentinelAuth.username } : {}),
    ...(sentinelAuth ? { sentinelPassword: sentinelAuth.password } : {}),
  };
}

/** The TLS files; a client certificate comes with its key. */
function redisTlsFiles(env: Env, prefix: RedisPrefix): RedisTlsFiles {
  // The reference has one set of REDIS_TLS_* files for both connections; REDIS_PERSECOND_TLS_*
  // (ours) may override them for the per-second one.
  const tlsFile = (suffix: string) => str(env, `${prefix}_${suffix}`, '') || str(env, `REDIS_${suffix}`, '') || undefined;
  const tlsCaCert = tlsFile('TLS_CACERT');
  const tlsClientCert = tlsFile('TLS_CLIENT_CERT');
  const tlsClientKey = tlsFile('TLS_CLIENT_KEY');
  if ((tlsClientCert === undefined) !== (tlsClientKey === undefined)) {
    throw new SettingsError(`invalid value for ${prefix}_TLS_CLIENT_CERT/${prefix}_TLS_CLIENT_KEY: both or neither must be set`);
  }
  return {
    ...(tlsCaCert ? { tlsCaCert } : {}),
    ...(tlsClientCert ? { tlsClientCert } : {}),
    ...(tlsClientKey ? { tlsClientKey } : {}),
  };
}

function redisSettings(env: Env, prefix: RedisPrefix, url: string): RedisSettings {
  const type = oneOf<RedisType>(env, `${prefix}_TYPE`, 'SINGLE', ['SINGLE', 'SENTINEL', 'CLUSTER']);
  // A path (`/run/redis.sock`, `./redis.sock`) is a unix socket; `host:port` and `redis://host:port` are tcp.
  const inferred = type === 'SINGLE' && /^\.{0,2}\//.test(url) ? 'unix' : 'tcp';
  const fromUrl = splitRedisUrl(url, `${prefix}_URL`, type === 'SINGLE');
  const auth = redisCredentials(env, prefix, fromUrl);
  const tlsFiles = redisTlsFiles(env, prefix);
  return Object.freeze({
    type,
    url: fromUrl.url,
    socketType: oneOf(env, `${prefix}_SOCKET_TYPE`, inferred, ['tcp', 'unix']),
    ...auth,
    tls: bool(env, `${prefix}_TLS`, false),
    ...tlsFiles,
    tlsSkipHostnameVerification: bool(env, 'REDIS_TLS_SKIP_HOSTNAME_VERIFICATION', false),
    poolSize: int(env, `${prefix}_POOL_SIZE`, 10, 1, 1024),
    timeoutMs: duration(env, `${prefix}_TIMEOUT`, 10_000),
    pipelineWindowMs: duration(env, `${prefix}_PIPELINE_WINDOW`, 0),
    pipelineLimit: int(env, `${prefix}_PIPELINE_LIMIT`, 0, 0, 1_000_000),
  });
}

function backendSettings(env: Env) {
  const redisUrl = str(env, 'REDIS_URL', '');
  const backendType = oneOf<BackendType>(env, 'BACKEND_TYPE', redisUrl ? 'redis' : 'memory', ['memory', 'redis']);
  if (backendType === 'memory') return { backendType };
  if (!redisUrl) throw new SettingsError(`invalid value for REDIS_URL: '' (required when BACKEND_TYPE is redis)`);
  const redis = redisSettings(env, 'REDIS', redisUrl);
  if (!bool(env, 'REDIS_PERSECOND', false)) return { backendType, redis };
  const perSecondUrl = str(env, 'REDIS_PERSECOND_URL', '');
  if (!perSecondUrl) {
    throw new SettingsError(`invalid value for REDIS_PERSECOND_URL: '' (required when REDIS_PERSECOND is true)`);
  }
  return { backendType, redis, redisPerSecond: redisSettings(env, 'REDIS_PERSECOND', perSecondUrl) };
}

function grpcTls(env: Env): Settings['grpcTls'] {
  const clientCaCert = str(env, 'GRPC_CLIENT_TLS_CACERT', '') || undefined;
  const clientSan = str(env, 'GRPC_CLIENT_TLS_SAN', '') || undefined;
  if (!bool(env, 'GRPC_SERVER_USE_TLS', false)) {
    // Serving plaintext while the operator asked for client certificates would be a silent hole.
    const asked = clientCaCert ? 'GRPC_CLIENT_TLS_CACERT' : clientSan ? 'GRPC_CLIENT_TLS_SAN' : undefined;
    if (asked) throw new SettingsError(`invalid settings: ${asked} is set but GRPC_SERVER_USE_TLS is not true, so gRPC would serve plaintext`);
    return undefined;
  }
  const cert = str(env, 'GRPC_SERVER_TLS_CERT', '');
  const key = str(env, 'GRPC_SERVER_TLS_KEY', '');
  if (!cert || !key) {
    throw new SettingsError(`invalid value for GRPC_SERVER_TLS_CERT/GRPC_SERVER_TLS_KEY: both are required when GRPC_SERVER_USE_TLS is true`);
  }
  if (clientSan && !clientCaCert) {
    throw new SettingsError(
      `invalid settings: GRPC_CLIENT_TLS_SAN is set without GRPC_CLIENT_TLS_CACERT, so no client certificate could carry it`,
    );
  }
  return Object.freeze({ cert, key, ...(clientCaCert ? { clientCaCert } : {}), ...(clientSan ? { clientSan } : {}) });
}

// ---- CONFIG_TYPE=GRPC_XDS_SOTW: rules from an xDS management server (the reference's names and defaults) ----

export type ConfigType = 'FILE' | 'GRPC_XDS_SOTW';

/** `key=value,key2=value2`; like the reference, an entry without `=` is skipped. */
function xdsNodeMetadata(env: Env): Record<string, string> {
  const metadata: Record<string, string> = {};
  for (const entry of str(env, 'CONFIG_GRPC_XDS_NODE_METADATA', '').split(',')) {
    const eq = entry.indexOf('=');
    if (eq >= 0) metadata[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return metadata;
}

/** `name:value,name2:value2` (the reference's map syntax); names become lower-case gRPC metadata keys. */
function xdsAdditionalHeaders(env: Env): Record<string, string> {
  const name = 'CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS';
  const raw = str(env, name, '');
  const headers: Record<string, string> = {};
  if (raw === '') return headers;
  for (const entry of raw.split(',')) {
    const colon = entry.indexOf(':');
    const key = entry.slice(0, colon).trim().toLowerCase();
    // -bin keys carry bytes and grpc- keys are reserved: neither can be sent as text.
    if (colon < 0 || !/^[0-9a-z_.-]+$/.test(key) || key.endsWith('-bin') || key.startsWith('grpc-')) {
      throw new SettingsError(`invalid value for ${name}: '${raw}' (expected name:value pairs separated by commas; bad entry '${entry}')`);
    }
    headers[key] = entry.slice(colon + 1);
  }
  return headers;
}

function xdsTls(env: Env): XdsSettings['tls'] {
  // As in the reference, the TLS files mean nothing unless CONFIG_GRPC_XDS_SERVER_USE_TLS is true.
  if (!bool(env, 'CONFIG_GRPC_XDS_SERVER_USE_TLS', false)) return undefined;
  const caCert = str(env, 'CONFIG_GRPC_XDS_SERVER_TLS_CACERT', '');
  const clientCert = str(env, 'CONFIG_GRPC_XDS_CLIENT_TLS_CERT', '');
  const clientKey = str(env, 'CONFIG_GRPC_XDS_CLIENT_TLS_KEY', '');
  const serverSan = str(env, 'CONFIG_GRPC_XDS_SERVER_TLS_SAN', '');
  if ((clientCert === '') !== (clientKey === '')) {
    throw new SettingsError(`invalid value for CONFIG_GRPC_XDS_CLIENT_TLS_CERT/CONFIG_GRPC_XDS_CLIENT_TLS_KEY: both or neither must be set`);
  }
  return Object.freeze({
    ...(caCert ? { caCert } : {}),
    ...(clientCert ? { clientCert, clientKey } : {}),
    ...(serverSan ? { serverSan } : {}),
  });
}

function nonNegativeDuration(env: Env, name: string, fallbackMs: number): number {
  const ms = duration(env, name, fallbackMs);
  if (ms > 24 * 3_600_000) throw new SettingsError(`invalid value for ${name}: '${env[name]}' (expected a duration up to 24h)`);
  return ms;
}

/** Every CONFIG_GRPC_XDS_* and XDS_CLIENT_* setting; read (and so validated) whatever CONFIG_TYPE is, as the reference does. */
function xdsSettings(env: Env): XdsSettings {
  const tls = xdsTls(env);
  return Object.freeze({
    serverUrl: str(env, 'CONFIG_GRPC_XDS_SERVER_URL', 'localhost:18000'),
    nodeId: str(env, 'CONFIG_GRPC_XDS_NODE_ID', 'default'),
    nodeMetadata: Object.freeze(xdsNodeMetadata(env)),
    additionalHeaders: Object.freeze(xdsAdditionalHeaders(env)),
    connectRetryIntervalMs: nonNegativeDuration(env, 'CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL', 3_000),
    backoff: Object.freeze({
      initialMs: nonNegativeDuration(env, 'XDS_CLIENT_BACKOFF_INITIAL_INTERVAL', 10_000),
      maxMs: nonNegativeDuration(env, 'XDS_CLIENT_BACKOFF_MAX_INTERVAL', 60_000),
      factor: float(env, 'XDS_CLIENT_BACKOFF_RANDOM_FACTOR', 0.5, 0, 1000),
      jitter: bool(env, 'XDS_CLIENT_BACKOFF_JITTER', true),
    }),
    maxReceiveMessageBytes: int(env, 'XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES', 0, 0, 2 ** 31 - 1),
    maxResources: int(env, 'XDS_MAX_RESOURCES', 10_000, 1, 1_000_000),
    ...(tls ? { tls } : {}),
  });
}

function rulesSource(env: Env): Pick<Settings, 'configType' | 'xds'> {
  const xds = xdsSettings(env);
  const configType = oneOf<ConfigType>(env, 'CONFIG_TYPE', 'FILE', ['FILE', 'GRPC_XDS_SOTW']);
  return configType === 'GRPC_XDS_SOTW' ? { configType, xds } : { configType };
}

// ---- end of the xDS settings ----

// ---- TRACING_*: OpenTelemetry traces (the reference's names and defaults) ----

/**
 * TRACING_SERVICE_* and the sampling rate. Read whatever TRACING_ENABLED says, as envconfig
 * reads every variable; the OTLP endpoint and the rest are the SDK's own OTEL_* variables.
 */
function tracingSettings(env: Env): Pick<Settings, 'tracing'> {
  const tracing: TracingSettings = Object.freeze({
    serviceName: str(env, 'TRACING_SERVICE_NAME', 'RateLimit'),
    serviceNamespace: str(env, 'TRACING_SERVICE_NAMESPACE', ''),
    serviceInstanceId: str(env, 'TRACING_SERVICE_INSTANCE_ID', ''),
    // Any number, as in the reference: >= 1 samples every root trace, <= 0 none.
    samplingRate: float(env, 'TRACING_SAMPLING_RATE', 1, -Number.MAX_VALUE, Number.MAX_VALUE),
    exporterProtocol: oneOf<TracingSettings['exporterProtocol']>(env, 'TRACING_EXPORTER_PROTOCOL', 'http', ['http', 'grpc']),
  });
  return bool(env, 'TRACING_ENABLED', false) ? { tracing } : {};
}

// ---- end of the tracing settings ----

// 64 KiB holds any request Envoy sends (a few descriptors of short values) many times over,
// while a 4 MiB message of empty descriptors took 600 MB and 1.4 s to decode.
const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024;

function grpcLimits(env: Env): GrpcLimits {
  const idleMs = duration(env, 'GRPC_MAX_CONNECTION_IDLE', 60_000);
  if (idleMs < 1 || idleMs > 24 * 3_600_000) {
    throw new SettingsError(
      `invalid value for GRPC_MAX_CONNECTION_IDLE: '${env.GRPC_MAX_CONNECTION_IDLE}' (expected a duration from 1ms to 24h)`,
    );
  }
  return Object.freeze({
    maxReceiveMessageBytes: int(env, 'GRPC_MAX_RECEIVE_MESSAGE_BYTES', DEFAULT_MAX_MESSAGE_BYTES, 1024, 16 * 1024 * 1024),
    maxConcurrentStreams: int(env, 'GRPC_MAX_CONCURRENT_STREAMS', 1000, 1, 1_000_000),
    maxConnectionIdleMs: Math.ceil(idleMs),
  });
}

function httpLimits(env: Env): HttpLimits {
  const positive = (name: string, fallbackMs: number): number => {
    const ms = duration(env, name, fallbackMs);
    if (ms < 1 || ms > 3_600_000) throw new SettingsError(`invalid value for ${name}: '${env[name]}' (expected a duration from 1ms to 1h)`);
    return Math.ceil(ms);
  };
  const requestTimeoutMs = positive('HTTP_REQUEST_TIMEOUT', 10_000);
  const headersTimeoutMs = positive('HTTP_HEADERS_TIMEOUT', 5_000);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new SettingsError(
      `invalid value for HTTP_HEADERS_TIMEOUT: '${env.HTTP_HEADERS_TIMEOUT}' (must not exceed HTTP_REQUEST_TIMEOUT, ${requestTimeoutMs} ms)`,
    );
  }
  return Object.freeze({
    requestTimeoutMs,
    headersTimeoutMs,
    maxBodyBytes: int(env, 'HTTP_MAX_BODY_BYTES', DEFAULT_MAX_MESSAGE_BYTES, 1024, 16 * 1024 * 1024),
    maxConnections: int(env, 'HTTP_MAX_CONNECTIONS', 1024, 1, 1_000_000),
  });
}

function cacheKeyPrefix(env: Env): string {
  const prefix = str(env, 'CACHE_KEY_PREFIX', '');
  // A brace in the prefix would become the Redis Cluster hash tag and pile every key on one slot.
  if (/[{}]/.test(prefix)) throw new SettingsError(`invalid value for CACHE_KEY_PREFIX: '${prefix}' (must not contain '{' or '}')`);
  return prefix;
}

function header(env: Env, name: string, fallback: string): string {
  const v = str(env, name, fallback);
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(v)) throw new SettingsError(`invalid value for ${name}: '${v}' (expected an HTTP header name)`);
  return v;
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

// ---- Reference settings added by issue 13: stats sinks and the Prometheus mapper, gRPC connection
// age, the Redis start-up wait, logrus level names, and the accepted variables checked by type. ----

/** Longest Go duration we accept where Node timers are used (setTimeout's limit, ~24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

function positiveDuration(env: Env, name: string, fallbackMs: number): number {
  const ms = duration(env, name, fallbackMs);
  if (ms <= 0 || ms > MAX_TIMER_MS)
    throw new SettingsError(`invalid value for ${name}: '${env[name]}' (expected a duration above 0 and at most 596h)`);
  return ms;
}

/**
 * EXTRA_TAGS as gostats serializes them: empty names or values dropped, sorted by name, `.`, `:`
 * and `|` in values made `_` (and, ours, control characters anywhere: no tag starts a new line).
 */
function extraTags(env: Env): Array<[string, string]> {
  return stringMap(env, 'EXTRA_TAGS')
    .filter(([k, v]) => k !== '' && v !== '')
    .map(([k, v]): [string, string] => [sanitizeTagName(k), sanitizeTagValue(v)])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** USE_DOG_STATSD_MOGRIFIERS=A,B with DOG_STATSD_MOGRIFIER_A_PATTERN, _NAME and _TAGS for each, as the reference reads them. */
function dogStatsdMogrifiers(env: Env): Mogrifier[] {
  return list(env, 'USE_DOG_STATSD_MOGRIFIERS').map((id) => {
    const prefix = `DOG_STATSD_MOGRIFIER_${id}`;
    const source = str(env, `${prefix}_PATTERN`, '');
    if (source === '') throw new SettingsError(`invalid value for ${prefix}_PATTERN: '' (required for mogrifier ${id})`);
    let pattern: RegExp;
    try {
      pattern = new RegExp(source);
    } catch (err) {
      throw new SettingsError(`invalid value for ${prefix}_PATTERN: '${source}' (${(err as Error).message})`);
    }
    const name = str(env, `${prefix}_NAME`, '');
    if (name === '') throw new SettingsError(`invalid value for ${prefix}_NAME: '' (required for mogrifier ${id})`);
    const tags = stringMap(env, `${prefix}_TAGS`);
    for (const [k, v] of tags) {
      if (k === '' || v === '')
        throw new SettingsError(`invalid value for ${prefix}_TAGS: '${env[`${prefix}_TAGS`]}' (a tag needs a name and a value)`);
    }
    return Object.freeze({ id, pattern, name, tags });
  });
}

/**
 * The reference's stats sink: DISABLE_STATS wins, then USE_DOG_STATSD, then USE_STATSD (true by
 * default). Prometheus is independent of these here (the reference allows one sink at a time).
 * STATSD_PROTOCOL is lyft/gostats' own variable, which the reference's statsd sink reads too.
 */
function statsdSettings(env: Env, flushIntervalMs: number, tags: Array<[string, string]>): StatsdSettings | undefined {
  const disabled = bool(env, 'DISABLE_STATS', false);
  const dog = bool(env, 'USE_DOG_STATSD', false);
  const plain = bool(env, 'USE_STATSD', true);
  const host = str(env, 'STATSD_HOST', 'localhost');
  const statsdPort = port(env, 'STATSD_PORT', 8125);
  const protocol = oneOf<'tcp' | 'udp'>(env, 'STATSD_PROTOCOL', 'tcp', ['tcp', 'udp']);
  const mogrifiers = dogStatsdMogrifiers(env);
  if (disabled || (!dog && !plain)) return undefined;
  return Object.freeze({
    format: dog ? ('dogstatsd' as const) : ('statsd' as const),
    host,
    port: statsdPort,
    // The reference's DogStatsD client sends UDP datagrams.
    protocol: dog ? ('udp' as const) : protocol,
    flushIntervalMs,
    extraTags: tags,
    mogrifiers,
  });
}

/**
 * Reference variables accepted with no effect (see src/settings-reference.ts): still checked with
 * the reference's types, so that a value the reference would refuse is refused here too.
 */
function checkAcceptedVariables(env: Env): void {
  for (const name of ['REDIS_STARTUP_INITIAL_INTERVAL', 'REDIS_STARTUP_MAX_INTERVAL']) duration(env, name, 0);
  for (const name of ['REDIS_CLUSTER_PIPELINE_PARALLELISM', 'REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM']) int(env, name, 1, 0, 1_000_000);
  for (const name of ['REDIS_POOL_ON_EMPTY_BEHAVIOR', 'REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR'])
    oneOf(env, name, 'WAIT', ['WAIT', 'CREATE', 'ERROR']);
}

// logrus level names, as the reference parses LOG_LEVEL, onto floodgate's four levels.
const LOGRUS_LEVELS: Readonly<Record<string, LogLevel>> = { trace: 'DEBUG', warning: 'WARN', fatal: 'ERROR', panic: 'ERROR' };

function logLevel(env: Env): LogLevel {
  const alias = LOGRUS_LEVELS[str(env, 'LOG_LEVEL', '').trim().toLowerCase()];
  return alias ?? oneOf<LogLevel>(env, 'LOG_LEVEL', 'WARN', ['DEBUG', 'INFO', 'WARN', 'ERROR']);
}

function issue13Settings(env: Env) {
  checkAcceptedVariables(env);
  const flushIntervalMs = positiveDuration(env, 'STATS_FLUSH_INTERVAL', 10_000);
  const tags = extraTags(env);
  const statsd = statsdSettings(env, flushIntervalMs, tags);
  const mapperYaml = str(env, 'PROMETHEUS_MAPPER_YAML', '');
  return {
    ...(statsd ? { statsd } : {}),
    ...(mapperYaml ? { prometheusMapper: Object.freeze({ path: mapperYaml, flushIntervalMs, extraTags: tags }) } : {}),
    // DISABLE_STATS: no stats at all, as in the reference (whose Prometheus endpoint is a stats sink too).
    ...(bool(env, 'DISABLE_STATS', false) ? { usePrometheus: false } : {}),
    prometheusResponseTimeAsMilliseconds: bool(env, 'PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS', false),
    redisStartupMaxElapsedMs: duration(env, 'REDIS_STARTUP_MAX_ELAPSED_TIME', 0),
    grpcMaxConnectionAgeMs: positiveDuration(env, 'GRPC_MAX_CONNECTION_AGE', 24 * 3_600_000),
    grpcMaxConnectionAgeGraceMs: positiveDuration(env, 'GRPC_MAX_CONNECTION_AGE_GRACE', 3_600_000),
  };
}

/** Reads and validates every setting once; throws SettingsError naming the variable and value. */
export function loadSettings(env: Env = process.env): Settings {
  const prometheus = listenAddress(env, 'PROMETHEUS_ADDR', ':9090');
  const runtimeRoot = str(env, 'RUNTIME_ROOT', '/srv/runtime_data/current');
  const runtimeSubdirectory = str(env, 'RUNTIME_SUBDIRECTORY', '');
  const runtimeAppDirectory = str(env, 'RUNTIME_APPDIRECTORY', 'config');
  const grpcUds = str(env, 'GRPC_UDS', '') || undefined;
  const prometheusPath = str(env, 'PROMETHEUS_PATH', '/metrics');
  if (!prometheusPath.startsWith('/')) throw new SettingsError(`invalid value for PROMETHEUS_PATH: '${prometheusPath}' (must start with '/')`);
  const tls = grpcTls(env);
  const backend = backendSettings(env);
  return Object.freeze({
    host: str(env, 'HOST', '0.0.0.0'),
    port: port(env, 'PORT', 8080),
    grpcHost: str(env, 'GRPC_HOST', '0.0.0.0'),
    grpcPort: port(env, 'GRPC_PORT', 8081),
    ...(grpcUds ? { grpcUds } : {}),
    ...(tls ? { grpcTls: tls } : {}),
    debugHost: str(env, 'DEBUG_HOST', '127.0.0.1'),
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
    forceStartWithoutInitialConfig: bool(env, 'FORCE_START_WITHOUT_INITIAL_CONFIG', false),
    healthyWithAtLeastOneConfigLoaded: bool(env, 'HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED', false),
    redisHealthCheckActiveConnection: bool(env, 'REDIS_HEALTH_CHECK_ACTIVE_CONNECTION', false),
    ...rulesSource(env),
    ...tracingSettings(env),
    ...backend,
    cacheKeyPrefix: cacheKeyPrefix(env),
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
    }),
    defaultDeadlineMs: int(env, 'DEFAULT_DEADLINE_MS', 1000, 1, 600_000),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    workers: workers(env, backend.backendType),
    grpcLimits: grpcLimits(env),
    httpLimits: httpLimits(env),
    memoryMaxCounters: int(env, 'MEMORY_MAX_COUNTERS', 100_000, 1, 100_000_000),
    metricsMaxSeries: int(env, 'METRICS_MAX_SERIES', 1000, 1, 1_000_000),
    ...issue13Settings(env),
    ...operatorSettings(env, backend.backendType),
  } satisfies Settings);
}
