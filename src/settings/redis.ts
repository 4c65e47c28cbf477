import { SettingsError } from '../base/errors';
import type { BackendType } from '../limiter/create-limiter';
import type { RedisSettings, RedisType } from '../limiter/redis/redis-client';
import { splitRedisUrl, type SplitRedisUrl } from './redis-url-credentials';
import { bool, duration, int, oneOf, str, type Env } from './parse';

// The backend settings: BACKEND_TYPE, REDIS_* (the reference's names and defaults), CACHE_KEY_PREFIX.

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

/** BACKEND_TYPE, REDIS_* and REDIS_PERSECOND_*: which backend counts, and how to reach Redis. */
export function backendSettings(env: Env): { backendType: BackendType; redis?: RedisSettings; redisPerSecond?: RedisSettings } {
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

/**
 * REDIS_STARTUP_MAX_ELAPSED_TIME (the reference's: 0 waits for Redis for ever, above 0 gives up
 * after that long and the start fails) and REDIS_STARTUP_SERVE_ANYWAY (ours: give up and serve
 * instead). Serving without Redis is an explicit choice that names how long to wait first.
 */
export function redisStartup(env: Env): { redisStartupMaxElapsedMs: number; redisStartupServeAnyway: boolean } {
  const redisStartupMaxElapsedMs = duration(env, 'REDIS_STARTUP_MAX_ELAPSED_TIME', 0);
  const redisStartupServeAnyway = bool(env, 'REDIS_STARTUP_SERVE_ANYWAY', false);
  if (redisStartupServeAnyway && redisStartupMaxElapsedMs === 0) {
    throw new SettingsError(
      `invalid value for REDIS_STARTUP_SERVE_ANYWAY: 'true' (needs REDIS_STARTUP_MAX_ELAPSED_TIME above 0: how long to wait for Redis before serving without it)`,
    );
  }
  return { redisStartupMaxElapsedMs, redisStartupServeAnyway };
}

export function cacheKeyPrefix(env: Env): string {
  const prefix = str(env, 'CACHE_KEY_PREFIX', '');
  // A brace in the prefix would become the Redis Cluster hash tag and pile every key on one slot.
  if (/[{}]/.test(prefix)) throw new SettingsError(`invalid value for CACHE_KEY_PREFIX: '${prefix}' (must not contain '{' or '}')`);
  return prefix;
}

/**
 * Reference variables accepted with no effect (see src/settings/reference.ts): still checked with
 * the reference's types, so that a value the reference would refuse is refused here too.
 */
export function checkAcceptedVariables(env: Env): void {
  for (const name of ['REDIS_STARTUP_INITIAL_INTERVAL', 'REDIS_STARTUP_MAX_INTERVAL']) duration(env, name, 0);
  for (const name of ['REDIS_CLUSTER_PIPELINE_PARALLELISM', 'REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM']) int(env, name, 1, 0, 1_000_000);
  for (const name of ['REDIS_POOL_ON_EMPTY_BEHAVIOR', 'REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR'])
    oneOf(env, name, 'WAIT', ['WAIT', 'CREATE', 'ERROR']);
}
