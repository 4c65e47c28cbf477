import type { Logger } from '../log';
import type { ServiceMetrics } from '../metrics/metrics';
import { FailureModeLimiter, type FailureMode } from './failure-mode-limiter';
import type { Limiter } from './limiter';
import { MemoryLimiter } from './memory/memory-limiter';
import { OverLimitCache } from './over-limit-cache';
import { createRedisClient, type RedisClient, type RedisSettings } from './redis/redis-client';
import type { WrapScript } from './redis/algorithm-scripts';
import { RedisLimiter } from './redis/redis-limiter';

export type BackendType = 'memory' | 'redis';

/** The settings that choose and tune the limiter stack. */
export interface LimiterSettings {
  readonly backendType: BackendType;
  readonly redis?: RedisSettings;
  readonly redisPerSecond?: RedisSettings;
  readonly cacheKeyPrefix: string;
  readonly backendFailureMode: FailureMode;
  readonly localCacheSizeInBytes: number;
}

export interface LimiterDeps {
  readonly logger: Logger;
  readonly metrics: ServiceMetrics;
  /** TRACING_ENABLED: wraps each Redis script call in a span. */
  readonly wrapScript?: WrapScript;
}

function logConnectionErrors(client: RedisClient, name: string, logger: Logger): void {
  // ioredis emits 'error' for every failed reconnect; without a listener Node would crash.
  let last = '';
  client.on('error', (err: Error) => {
    if (err.message !== last) logger.warn(`${name}: ${err.message}`);
    last = err.message;
  });
  client.on('ready', () => {
    last = '';
    logger.info(`${name}: ready`);
  });
}

/**
 * Builds the limiter stack the settings describe. For Redis, from the outside in: the failure
 * mode (so a fallback answer is never cached), the local over-limit cache, the Redis limiter.
 */
export function createLimiter(settings: LimiterSettings, deps: LimiterDeps): Limiter {
  if (settings.backendType === 'memory' || settings.redis === undefined) return new MemoryLimiter();
  const client = createRedisClient(settings.redis);
  logConnectionErrors(client, 'redis', deps.logger);
  let perSecondClient: RedisClient | undefined;
  if (settings.redisPerSecond !== undefined) {
    perSecondClient = createRedisClient(settings.redisPerSecond);
    logConnectionErrors(perSecondClient, 'redis (per second)', deps.logger);
  }
  let limiter: Limiter = new RedisLimiter({
    client,
    ...(perSecondClient ? { perSecondClient } : {}),
    keyPrefix: settings.cacheKeyPrefix,
    ...(deps.wrapScript ? { wrapScript: deps.wrapScript } : {}),
    coalescing: { windowMs: settings.redis.pipelineWindowMs, maxKeys: settings.redis.pipelineLimit },
  });
  if (settings.localCacheSizeInBytes > 0) limiter = new OverLimitCache(limiter, { maxBytes: settings.localCacheSizeInBytes });
  return new FailureModeLimiter(limiter, {
    mode: settings.backendFailureMode,
    ...(settings.backendFailureMode === 'local' ? { local: new MemoryLimiter() } : {}),
    onFallback: (mode, err) => deps.logger.debug(`backend failed, answering with failure mode ${mode}`, { error: err.message }),
  });
}
