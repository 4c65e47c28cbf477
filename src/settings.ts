import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { SettingsError } from './errors';
import { bool, duration, float, int, listenAddress, oneOf, port, str, type Env } from './settings-parse';

export type BackendType = 'memory' | 'redis';
export type RedisType = 'SINGLE' | 'SENTINEL' | 'CLUSTER';
export type FailureMode = 'error' | 'allow' | 'deny' | 'local';
export type LogLevel = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';

/** One Redis deployment (the main one, or the per-second one). */
export interface RedisSettings {
  readonly type: RedisType;
  /** SINGLE: host:port or a socket path; SENTINEL: master,host:port,...; CLUSTER: seed list. */
  readonly url: string;
  readonly socketType: 'tcp' | 'unix';
  readonly username?: string;
  readonly password?: string;
  readonly tls: boolean;
  readonly tlsClientCert?: string;
  readonly tlsClientKey?: string;
  readonly tlsCaCert?: string;
  readonly tlsSkipHostnameVerification: boolean;
  readonly poolSize: number;
  /** Upper bound of any one Redis command, in ms (REDIS_TIMEOUT). */
  readonly timeoutMs: number;
  /** REDIS_PIPELINE_WINDOW in ms; 0 = send at once. */
  readonly pipelineWindowMs: number;
  readonly pipelineLimit: number;
}

/** Limits on one request's size; a request over them is INVALID_ARGUMENT. */
export interface RequestLimits {
  readonly maxDescriptors: number;
  readonly maxEntries: number;
  readonly maxKeyBytes: number;
  readonly maxValueBytes: number;
}

export interface Settings {
  readonly host: string;
  readonly port: number;
  readonly grpcHost: string;
  readonly grpcPort: number;
  readonly grpcUds?: string;
  readonly grpcTls?: { readonly cert: string; readonly key: string; readonly clientCaCert?: string; readonly clientSan?: string };
  readonly debugHost: string;
  readonly debugPort: number;
  readonly usePrometheus: boolean;
  readonly prometheusHost: string;
  readonly prometheusPort: number;
  readonly prometheusPath: string;
  readonly logLevel: LogLevel;
  readonly logFormat: 'text' | 'json';

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

  // Bounds on the state that request values can create (issue 8).
  /** MEMORY_MAX_COUNTERS: counters the memory backend (and failure mode `local`) keeps at most. */
  readonly memoryMaxCounters: number;
  /** METRICS_MAX_SERIES: rule label sets (domain, key1, key2) the metrics keep at most. */
  readonly metricsMaxSeries: number;
}

function redisSettings(env: Env, prefix: 'REDIS' | 'REDIS_PERSECOND', url: string): RedisSettings {
  const type = oneOf<RedisType>(env, `${prefix}_TYPE`, 'SINGLE', ['SINGLE', 'SENTINEL', 'CLUSTER']);
  // A path (`/run/redis.sock`, `./redis.sock`) is a unix socket; `host:port` and `redis://host:port` are tcp.
  const inferred = type === 'SINGLE' && /^\.{0,2}\//.test(url) ? 'unix' : 'tcp';
  const auth = str(env, `${prefix}_AUTH`, '');
  const colon = auth.indexOf(':');
  // The reference has one set of REDIS_TLS_* files for both connections; REDIS_PERSECOND_TLS_*
  // (ours) may override them for the per-second one.
  const tlsFile = (suffix: string) => str(env, `${prefix}_${suffix}`, '') || str(env, `REDIS_${suffix}`, '') || undefined;
  const tlsCaCert = tlsFile('TLS_CACERT');
  const tlsClientCert = tlsFile('TLS_CLIENT_CERT');
  const tlsClientKey = tlsFile('TLS_CLIENT_KEY');
  if ((tlsClientCert === undefined) !== (tlsClientKey === undefined)) {
    throw new SettingsError(`invalid value for ${prefix}_TLS_CLIENT_CERT/${prefix}_TLS_CLIENT_KEY: both or neither must be set`);
  }
  return Object.freeze({
    type,
    url,
    socketType: oneOf(env, `${prefix}_SOCKET_TYPE`, inferred, ['tcp', 'unix']),
    ...(auth === '' ? {} : colon >= 0 ? { username: auth.slice(0, colon), password: auth.slice(colon + 1) } : { password: auth }),
    tls: bool(env, `${prefix}_TLS`, false),
    ...(tlsCaCert ? { tlsCaCert } : {}),
    ...(tlsClientCert ? { tlsClientCert } : {}),
    ...(tlsClientKey ? { tlsClientKey } : {}),
    tlsSkipHostnameVerification: bool(env, 'REDIS_TLS_SKIP_HOSTNAME_VERIFICATION', false),
    poolSize: int(env, `${prefix}_POOL_SIZE`, 10, 1, 1024),
    timeoutMs: duration(env, 'REDIS_TIMEOUT', 10_000),
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
  if (!bool(env, 'GRPC_SERVER_USE_TLS', false)) return undefined;
  const cert = str(env, 'GRPC_SERVER_TLS_CERT', '');
  const key = str(env, 'GRPC_SERVER_TLS_KEY', '');
  if (!cert || !key) {
    throw new SettingsError(`invalid value for GRPC_SERVER_TLS_CERT/GRPC_SERVER_TLS_KEY: both are required when GRPC_SERVER_USE_TLS is true`);
  }
  const clientCaCert = str(env, 'GRPC_CLIENT_TLS_CACERT', '') || undefined;
  const clientSan = str(env, 'GRPC_CLIENT_TLS_SAN', '') || undefined;
  return Object.freeze({ cert, key, ...(clientCaCert ? { clientCaCert } : {}), ...(clientSan ? { clientSan } : {}) });
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
    throw new SettingsError(`invalid value for WORKERS: '${raw}' (more than one worker needs BACKEND_TYPE=redis; memory counters are per process)`);
  }
  return n;
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
    logLevel: oneOf<LogLevel>(env, 'LOG_LEVEL', 'WARN', ['DEBUG', 'INFO', 'WARN', 'ERROR']),
    logFormat: oneOf(env, 'LOG_FORMAT', 'text', ['text', 'json']),
    runtimeRoot,
    runtimeSubdirectory,
    runtimeAppDirectory,
    rulesDir: join(runtimeRoot, runtimeSubdirectory, runtimeAppDirectory),
    runtimeWatchRoot: bool(env, 'RUNTIME_WATCH_ROOT', true),
    runtimeIgnoreDotFiles: bool(env, 'RUNTIME_IGNOREDOTFILES', false),
    mergeDomainConfig: bool(env, 'MERGE_DOMAIN_CONFIG', false),
    forceStartWithoutInitialConfig: bool(env, 'FORCE_START_WITHOUT_INITIAL_CONFIG', false),
    healthyWithAtLeastOneConfigLoaded: bool(env, 'HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED', false),
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
    memoryMaxCounters: int(env, 'MEMORY_MAX_COUNTERS', 100_000, 1, 100_000_000),
    metricsMaxSeries: int(env, 'METRICS_MAX_SERIES', 1000, 1, 1_000_000),
  } satisfies Settings);
}
