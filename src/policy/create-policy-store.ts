import type { LimiterSettings } from '../limiter/create-limiter';
import { createRedisClient } from '../limiter/redis/redis-client';
import type { Logger } from '../log';
import { MemoryPolicyStore } from './memory-policy-store';
import type { PolicyStore } from './policy-store';
import { RedisPolicyStore } from './redis-policy-store';

/**
 * The policy store beside the limiter's backend: in memory for the memory backend, else in the
 * same Redis over its own connection (a policy call never waits behind counter calls).
 */
export function createPolicyStore(settings: LimiterSettings, logger: Logger): PolicyStore {
  if (settings.backendType === 'memory' || settings.redis === undefined) return new MemoryPolicyStore();
  const client = createRedisClient(settings.redis);
  // Without a listener an 'error' event would crash the process; failures answer as normal tier.
  let last = '';
  client.on('error', (err: Error) => {
    if (err.message !== last) logger.debug(`redis (policy): ${err.message}`);
    last = err.message;
  });
  client.on('ready', () => (last = ''));
  return new RedisPolicyStore({ client, keyPrefix: settings.cacheKeyPrefix });
}
