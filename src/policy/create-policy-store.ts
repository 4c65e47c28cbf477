import type { LimiterSettings } from '../limiter/create-limiter';
import { createRedisClient, type RedisClient } from '../limiter/redis/redis-client';
import type { Logger } from '../base/log';
import { MemoryPolicyStore } from './memory-policy-store';
import type { PolicyStore } from './policy-store';
import { RedisPolicyStore } from './redis-policy-store';

/**
 * The policy store beside the limiter's backend: in memory for the memory backend, else in the
 * same Redis over its own connection (a policy call never waits behind counter calls), opened
 * only once the rules have a policy.
 */
export function createPolicyStore(settings: LimiterSettings, logger: Logger): PolicyStore {
  if (settings.backendType === 'memory' || settings.redis === undefined) return new MemoryPolicyStore();
  const redis = settings.redis;
  const connect = (): RedisClient => {
    const client = createRedisClient(redis);
    // Without a listener an 'error' event would crash the process; failures answer as normal tier.
    let last = '';
    client.on('error', (err: Error) => {
      if (err.message !== last) logger.debug(`redis (policy): ${err.message}`);
      last = err.message;
    });
    client.on('ready', () => (last = ''));
    return client;
  };
  // Opened when the rules first have a policy: without one, no connection at all.
  return new RedisPolicyStore({ client: connect, keyPrefix: settings.cacheKeyPrefix });
}
