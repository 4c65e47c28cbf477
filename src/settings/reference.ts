import type { Logger } from '../base/log';
import type { Env } from './parse';

/**
 * Every environment variable that envoyproxy/ratelimit reads (each `envconfig:"..."` field of its
 * src/settings/settings.go), with what floodgate does with it. This one list drives the start-up
 * report below, and a test checks it against the README table and against what loadSettings reads.
 *
 * - supported: read and honoured.
 * - accepted: read (and validated where it has a value to check) but it changes nothing; `why`.
 * - unsupported: floodgate does not offer the feature; `why`.
 */
export type ReferenceStatus = 'supported' | 'accepted' | 'unsupported';

export interface ReferenceVariable {
  readonly name: string;
  readonly status: ReferenceStatus;
  /** For accepted and unsupported: why it has no effect. */
  readonly why?: string;
  /** A value that asks for what floodgate does anyway (CONFIG_TYPE=FILE): set to it, nothing is reported. */
  readonly harmlessValue?: string;
}

const supported = (...names: string[]): ReferenceVariable[] => names.map((name) => ({ name, status: 'supported' as const }));
const withStatus = (status: Exclude<ReferenceStatus, 'supported'>, why: string, ...names: string[]): ReferenceVariable[] =>
  names.map((name) => ({ name, status, why }));

const NO_GO_POOL = 'floodgate keeps one multiplexed connection per Redis node, there is no connection pool';
const MEMCACHE = 'the memcache backend is not offered; use BACKEND_TYPE=redis or memory';

export const REFERENCE_VARIABLES: readonly ReferenceVariable[] = Object.freeze([
  ...supported('HOST', 'PORT', 'DEBUG_HOST', 'DEBUG_PORT', 'GRPC_UDS', 'GRPC_HOST', 'GRPC_PORT'),
  ...supported('GRPC_MAX_CONNECTION_AGE', 'GRPC_MAX_CONNECTION_AGE_GRACE'),
  ...supported('GRPC_SERVER_USE_TLS', 'GRPC_SERVER_TLS_CERT', 'GRPC_SERVER_TLS_KEY', 'GRPC_CLIENT_TLS_CACERT', 'GRPC_CLIENT_TLS_SAN'),
  ...supported('LOG_LEVEL', 'LOG_FORMAT'),
  ...supported('CONFIG_TYPE'),
  ...supported('FORCE_START_WITHOUT_INITIAL_CONFIG'),
  ...supported(
    'CONFIG_GRPC_XDS_NODE_ID',
    'CONFIG_GRPC_XDS_NODE_METADATA',
    'CONFIG_GRPC_XDS_SERVER_URL',
    'CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL',
    'CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS',
    'CONFIG_GRPC_XDS_SERVER_USE_TLS',
    'CONFIG_GRPC_XDS_CLIENT_TLS_CERT',
    'CONFIG_GRPC_XDS_CLIENT_TLS_KEY',
    'CONFIG_GRPC_XDS_SERVER_TLS_CACERT',
    'CONFIG_GRPC_XDS_SERVER_TLS_SAN',
    'XDS_CLIENT_BACKOFF_INITIAL_INTERVAL',
    'XDS_CLIENT_BACKOFF_MAX_INTERVAL',
    'XDS_CLIENT_BACKOFF_RANDOM_FACTOR',
    'XDS_CLIENT_BACKOFF_JITTER',
    'XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES',
  ),
  ...supported(
    'USE_DOG_STATSD',
    'USE_DOG_STATSD_MOGRIFIERS',
    'USE_STATSD',
    'STATSD_HOST',
    'STATSD_PORT',
    'EXTRA_TAGS',
    'STATS_FLUSH_INTERVAL',
    'DISABLE_STATS',
  ),
  ...supported('USE_PROMETHEUS', 'PROMETHEUS_ADDR', 'PROMETHEUS_PATH'),
  ...supported('PROMETHEUS_MAPPER_YAML', 'PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS'),
  ...supported('RUNTIME_ROOT', 'RUNTIME_SUBDIRECTORY', 'RUNTIME_APPDIRECTORY', 'RUNTIME_IGNOREDOTFILES', 'RUNTIME_WATCH_ROOT'),
  // Added to the expiry of the reference's keys with REDIS_KEY_LAYOUT=reference, as the reference adds it.
  ...supported('EXPIRATION_JITTER_MAX_SECONDS'),
  ...supported('LOCAL_CACHE_SIZE_IN_BYTES', 'NEAR_LIMIT_RATIO', 'CACHE_KEY_PREFIX', 'BACKEND_TYPE', 'STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT'),
  ...supported('LIMIT_RESPONSE_HEADERS_ENABLED', 'LIMIT_LIMIT_HEADER', 'LIMIT_REMAINING_HEADER', 'LIMIT_RESET_HEADER'),
  ...supported('HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED'),
  ...supported('REDIS_SOCKET_TYPE', 'REDIS_TYPE', 'REDIS_URL'),
  ...withStatus('accepted', NO_GO_POOL, 'REDIS_POOL_SIZE'),
  ...supported(
    'REDIS_AUTH',
    'REDIS_TLS',
    'REDIS_TLS_CLIENT_CERT',
    'REDIS_TLS_CLIENT_KEY',
    'REDIS_TLS_CACERT',
    'REDIS_TLS_SKIP_HOSTNAME_VERIFICATION',
  ),
  ...supported('REDIS_PIPELINE_WINDOW', 'REDIS_PIPELINE_LIMIT'),
  ...withStatus(
    'accepted',
    'the script calls of one request to different cluster slots are always sent in parallel',
    'REDIS_CLUSTER_PIPELINE_PARALLELISM',
  ),
  ...supported('REDIS_PERSECOND', 'REDIS_PERSECOND_SOCKET_TYPE', 'REDIS_PERSECOND_TYPE', 'REDIS_PERSECOND_URL'),
  ...withStatus('accepted', NO_GO_POOL, 'REDIS_PERSECOND_POOL_SIZE'),
  ...supported('REDIS_PERSECOND_AUTH', 'REDIS_PERSECOND_TLS'),
  ...supported('REDIS_SENTINEL_AUTH', 'REDIS_PERSECOND_SENTINEL_AUTH'),
  ...supported('REDIS_PERSECOND_PIPELINE_WINDOW', 'REDIS_PERSECOND_PIPELINE_LIMIT'),
  ...withStatus(
    'accepted',
    'the script calls of one request to different cluster slots are always sent in parallel',
    'REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM',
  ),
  ...supported('REDIS_HEALTH_CHECK_ACTIVE_CONNECTION'),
  ...supported('REDIS_TIMEOUT', 'REDIS_PERSECOND_TIMEOUT'),
  ...withStatus(
    'accepted',
    'a Go connection-pool setting; commands never wait for a pooled connection here',
    'REDIS_POOL_ON_EMPTY_BEHAVIOR',
    'REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR',
  ),
  ...withStatus(
    'accepted',
    'the Redis client retries on its own schedule (every 50 ms growing to 1 s), at start-up and after',
    'REDIS_STARTUP_INITIAL_INTERVAL',
    'REDIS_STARTUP_MAX_INTERVAL',
  ),
  ...supported('REDIS_STARTUP_MAX_ELAPSED_TIME'),
  ...withStatus(
    'unsupported',
    MEMCACHE,
    'MEMCACHE_HOST_PORT',
    'MEMCACHE_MAX_IDLE_CONNS',
    'MEMCACHE_SRV',
    'MEMCACHE_SRV_REFRESH',
    'MEMCACHE_TLS',
    'MEMCACHE_TLS_CLIENT_CERT',
    'MEMCACHE_TLS_CLIENT_KEY',
    'MEMCACHE_TLS_CACERT',
    'MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION',
  ),
  ...supported('SHADOW_MODE', 'QUOTA_MODE', 'RESPONSE_DYNAMIC_METADATA', 'MERGE_DOMAIN_CONFIG'),
  ...supported(
    'TRACING_ENABLED',
    'TRACING_SERVICE_NAME',
    'TRACING_SERVICE_NAMESPACE',
    'TRACING_SERVICE_INSTANCE_ID',
    'TRACING_EXPORTER_PROTOCOL',
    'TRACING_SAMPLING_RATE',
  ),
]);

/** One line per reference variable that is set but changes nothing here, at start-up. */
export function reportIneffectiveVariables(env: Env, logger: Logger): number {
  let reported = 0;
  for (const v of REFERENCE_VARIABLES) {
    const value = env[v.name];
    if (v.status === 'supported' || value === undefined || value === '') continue;
    if (v.harmlessValue !== undefined && value.trim().toUpperCase() === v.harmlessValue) continue;
    reported++;
    if (v.status === 'accepted') logger.warn(`${v.name} is set but has no effect: ${v.why}`);
    else logger.warn(`${v.name} is set but not supported: ${v.why}`);
  }
  return reported;
}
