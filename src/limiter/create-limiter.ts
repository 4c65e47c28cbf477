import type { Logger } from '../log';
import type { ServiceMetrics } from '../metrics/metrics';
import type { Settings } from '../settings';
import { FailureModeLimiter } from './failure-mode-limiter';
import type { Limiter } from './limiter';
import { MemoryLimiter } from './memory-limiter';
import { OverLimitCache } from './over-limit-cache';
import { createRedisClient, type RedisClient } from './redis/redis-client';
import { RedisLimiter } from './redis/redis-limiter';

export interface LimiterDeps {
  readonly logger: Logger;
  readonly metrics: ServiceMetrics;
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
export function createLimiter(settings: Settings, deps: LimiterDeps): Limiter {
  const memoryLimiter = (): MemoryLimiter =>
    new MemoryLimiter({ maxCounters: settings.memoryMaxCounters, onEvict: (count) => deps.metrics.memoryCountersEvicted(count) });
  if (settings.backendType === 'memory' || settings.redis === undefined) return memoryLimiter();
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
    coalescing: { windowMs: settings.redis.pipelineWindowMs, maxKeys: settings.redis.pipelineLimit },
  });
  if (settings.localCacheSizeInBytes > 0) limiter = new OverLimitCache(limiter, { maxBytes: settings.localCacheSizeInBytes });
  return new FailureModeLimiter(limiter, {
    mode: settings.backendFailureMode,
    ...(settings.backendFailureMode === 'local' ? { local: memoryLimiter() } : {}),
    onFallback: (mode, err) => deps.logger.debug(`backend failed, answering with failure mode ${mode}`, { error: err.message }),
  });
}
