import type { Logger } from '../base/log';
import type { RedisPool, ServiceMetrics } from '../metrics/metrics';
import type { OperatorMetrics } from '../metrics/operator-metrics';
import { FailureModeLimiter, type FailureMode } from './failure-mode-limiter';
import type { Limiter } from './limiter';
import { MemoryLimiter } from './memory/memory-limiter';
import { OverLimitCache } from './over-limit-cache';
import { Cluster } from 'ioredis';
import { createRedisClient, type RedisClient, type RedisSettings } from './redis/redis-client';
import type { WrapScript } from './redis/algorithm-scripts';
import { RedisLimiter } from './redis/redis-limiter';
import { ReferenceCarryOver, UNTIL_CLOCK_SKEW_MS } from './redis/reference-carry-over';
import { LayoutSwitch, OwnKeysOnly } from './redis/layout-switch';
import type { KeyLayout } from './reference-key';

export type BackendType = 'memory' | 'redis';

/** The settings that choose and tune the limiter stack. */
export interface LimiterSettings {
  readonly backendType: BackendType;
  readonly redis?: RedisSettings;
  readonly redisPerSecond?: RedisSettings;
  readonly cacheKeyPrefix: string;
  /** REDIS_KEY_LAYOUT: `reference` counts the limits the reference can express in its own keys (issue 30). */
  readonly redisKeyLayout?: KeyLayout;
  /** EXPIRATION_JITTER_MAX_SECONDS: added to a reference-layout key's expiry, as the reference adds it. */
  readonly expirationJitterMaxSeconds?: number;
  /** REDIS_KEY_LAYOUT_CARRY_OVER (ms): with the own layout, windows begun this long after start carry the reference's count over; 0 or absent: off. */
  readonly redisKeyLayoutCarryOverMs?: number;
  /** REDIS_KEY_LAYOUT_UNTIL (epoch ms): with the shared layout, when this pod switches to its own keys. */
  readonly redisKeyLayoutUntilMs?: number;
  readonly backendFailureMode: FailureMode;
  readonly localCacheSizeInBytes: number;
  /** MEMORY_MAX_COUNTERS: counters the memory backend (and failure mode `local`) keeps at most; undefined = no bound but the bytes. */
  readonly memoryMaxCounters: number | undefined;
  /** MEMORY_MAX_BYTES: the memory those counters may take (see memory/counter-table.ts COUNTER_BYTES). */
  readonly memoryMaxBytes: number;
}

export interface LimiterDeps {
  readonly logger: Logger;
  readonly metrics: ServiceMetrics;
  /** Redis latency and errors, breaker states, failure-mode answers, cache hits. */
  readonly operator?: OperatorMetrics;
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

/** Connections opened and closed, for the reference's redis_pool stats (a cluster: one per node). */
function reportConnections(client: RedisClient, pool: RedisPool, metrics: ServiceMetrics): void {
  if (client instanceof Cluster) {
    client.on('+node', () => metrics.redisConnection(pool, 'open'));
    client.on('-node', () => metrics.redisConnection(pool, 'close'));
    return;
  }
  let open = false;
  client.on('connect', () => {
    open = true;
    metrics.redisConnection(pool, 'open');
  });
  client.on('close', () => {
    // Also emitted after a failed attempt, when nothing was open.
    if (open) metrics.redisConnection(pool, 'close');
    open = false;
  });
}

/**
 * Leaving the reference's keys (the reference itself, or REDIS_KEY_LAYOUT=reference) without a
 * reset (issue 30). With floodgate's own layout and REDIS_KEY_LAYOUT_CARRY_OVER above 0, the
 * reference's count of a window seeds floodgate's key for it (redis/reference-carry-over.ts).
 * With the shared layout and REDIS_KEY_LAYOUT_UNTIL, the pod switches to its own keys at that
 * moment, carrying over the windows in progress then (redis/layout-switch.ts).
 */
function withCarryOver(limiter: RedisLimiter, settings: LimiterSettings, client: RedisClient): Limiter {
  const carryOverMs = settings.redisKeyLayoutCarryOverMs ?? 0;
  const carried = (inner: Limiter, carryUntil: number): Limiter =>
    carryOverMs <= 0
      ? inner
      : new ReferenceCarryOver(inner, {
          client,
          keyPrefix: settings.cacheKeyPrefix,
          carryUntil,
          breakers: limiter,
        });
  // A rolling update from the shared layout: old pods may count a window begun in the next
  // REDIS_KEY_LAYOUT_CARRY_OVER in the reference's key.
  if (settings.redisKeyLayout !== 'reference') return carried(limiter, Date.now() + carryOverMs);
  const until = settings.redisKeyLayoutUntilMs;
  if (until === undefined) return limiter;
  // Every pod leaves the shared layout at T: a window begun after it (give or take the pods'
  // clock offsets) was never counted in the reference's key.
  return new LayoutSwitch(limiter, carried(new OwnKeysOnly(limiter), until + UNTIL_CLOCK_SKEW_MS), until);
}

/**
 * Builds the limiter stack the settings describe. For Redis, from the outside in: the failure
 * mode (so a fallback answer is never cached), the local over-limit cache, the Redis limiter.
 */
export function createLimiter(settings: LimiterSettings, deps: LimiterDeps): Limiter {
  const memoryLimiter = (): MemoryLimiter =>
    new MemoryLimiter({
      ...(settings.memoryMaxCounters === undefined ? {} : { maxCounters: settings.memoryMaxCounters }),
      maxBytes: settings.memoryMaxBytes,
      onEvict: (count) => deps.metrics.memoryCountersEvicted(count),
    });
  if (settings.backendType === 'memory' || settings.redis === undefined) return memoryLimiter();
  const client = createRedisClient(settings.redis);
  logConnectionErrors(client, 'redis', deps.logger);
  reportConnections(client, 'redis_pool', deps.metrics);
  let perSecondClient: RedisClient | undefined;
  if (settings.redisPerSecond !== undefined) {
    try {
      perSecondClient = createRedisClient(settings.redisPerSecond);
    } catch (err) {
      // The main client is already connecting; the caller never gets a limiter to close it.
      client.disconnect();
      throw err;
    }
    logConnectionErrors(perSecondClient, 'redis (per second)', deps.logger);
    reportConnections(perSecondClient, 'redis_per_second_pool', deps.metrics);
  }
  const operator = deps.operator;
  const redisLimiter = new RedisLimiter({
    client,
    ...(perSecondClient ? { perSecondClient } : {}),
    keyPrefix: settings.cacheKeyPrefix,
    ...(settings.redisKeyLayout === 'reference'
      ? { keyLayout: 'reference' as const, expirationJitterMaxSeconds: settings.expirationJitterMaxSeconds ?? 0 }
      : {}),
    ...(deps.wrapScript ? { wrapScript: deps.wrapScript } : {}),
    coalescing: { windowMs: settings.redis.pipelineWindowMs, maxKeys: settings.redis.pipelineLimit },
    ...(operator ? { observer: operator } : {}),
  });
  operator?.watchBreakers(() => redisLimiter.breakerStates());
  let limiter = withCarryOver(redisLimiter, settings, client);
  if (settings.localCacheSizeInBytes > 0) {
    limiter = new OverLimitCache(limiter, {
      maxBytes: settings.localCacheSizeInBytes,
      // The shared layout's STOP mode keeps the reference's rule for a counter known over (issue 30).
      ...(settings.redisKeyLayout === 'reference' ? { holdBackBesideCached: true } : {}),
      ...(operator ? { onHit: () => operator.localCacheHit() } : {}),
    });
  }
  return new FailureModeLimiter(limiter, {
    mode: settings.backendFailureMode,
    ...(settings.backendFailureMode === 'local' ? { local: memoryLimiter() } : {}),
    onFallback: (mode, err) => {
      operator?.failureModeAnswer(mode);
      deps.logger.debug(`backend failed, answering with failure mode ${mode}`, { error: err.message });
    },
  });
}
