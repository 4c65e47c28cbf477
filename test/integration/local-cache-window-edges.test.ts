// Real time, real clocks: limit 1/s with the local over-limit cache on, a tight loop of calls
// across 3 window edges admits exactly one call per second, on memory, standalone Redis and a
// cluster. A false OVER_LIMIT at a window edge that the cache kept would leave a window with
// no admitted call; an entry that outlived its window would do the same; a counter that lost
// its count would admit two.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { LimitCheck, Limiter } from '../../src/limiter/limiter';
import { MemoryLimiter } from '../../src/limiter/memory/memory-limiter';
import { OverLimitCache } from '../../src/limiter/over-limit-cache';
import { createRedisClient, type RedisClient } from '../../src/limiter/redis/redis-client';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { loadSettings } from '../../src/settings/settings';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { sleep } from '../harness/wait';
import { msToWindowEnd, uniquePrefix } from './redis-backend-helpers';

const ONE_PER_SECOND: LimitCheck = {
  counter: { domain: 'edge', entries: [{ key: 'k', value: 'tight' }] },
  spec: { algorithm: 'fixed_window', limit: 1, windowSeconds: 1, burst: 1 },
  hits: 1,
};

let standalone: RedisProcess;
let cluster: RedisClusterHarness;
const clients: RedisClient[] = [];
beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 0 })]);
}, 90_000);
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await Promise.all([standalone?.stop(), cluster?.stop()]);
}, 30_000);

async function redisLimiter(env: Record<string, string>): Promise<Limiter> {
  const client = createRedisClient(loadSettings(env).redis!);
  client.on('error', () => undefined);
  clients.push(client);
  for (let i = 0; i < 250 && client.status !== 'ready'; i++) await sleep(20);
  return new RedisLimiter({ client, keyPrefix: uniquePrefix('edge') });
}

describe.each([
  ['memory', () => Promise.resolve<Limiter>(new MemoryLimiter())],
  ['standalone Redis', () => redisLimiter({ REDIS_URL: standalone.url })],
  ['cluster', () => redisLimiter({ REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds })],
] as const)('limit 1/s with the local cache on %s', (name, make) => {
  test('a tight loop across 3 window edges admits exactly 1 per second', { timeout: 30_000 }, async () => {
    const limiter = new OverLimitCache(await make(), { maxBytes: 100_000 });
    try {
      // Start 100 ms into a second and stop 500 ms into the fourth: 4 windows, 3 edges.
      await sleep(msToWindowEnd(1) + 100);
      const firstWindow = Math.floor(Date.now() / 1000);
      const stopAt = (firstWindow + 3) * 1000 + 500;
      // Each admitted call as [start, end]: it was decided somewhere in between.
      const admitted: [number, number][] = [];
      let calls = 0;
      let cached = 0;
      while (Date.now() < stopAt && calls < 20_000_000) {
        const started = Date.now();
        const [r] = await limiter.check([ONE_PER_SECOND], { deadline: started + 1000, stopIncrementWhenOverLimit: false });
        calls++;
        if (r!.fromLocalCache) cached++;
        if (r!.allowed) admitted.push([started, Date.now()]);
      }
      const windowOf = (t: number): number => Math.floor(t / 1000) - firstWindow;
      console.info(
        `window edges (${name}): ${calls} calls (${cached} from the cache), admitted in windows ` +
          admitted.map(([a, b]) => (windowOf(a) === windowOf(b) ? `${windowOf(a)}` : `${windowOf(a)}|${windowOf(b)}`)).join(' '),
      );
      // Exactly one per window: the k-th admitted call was decided within window k.
      expect(admitted).toHaveLength(4);
      admitted.forEach(([a, b], k) => {
        expect(windowOf(a)).toBeLessThanOrEqual(k);
        expect(windowOf(b)).toBeGreaterThanOrEqual(k);
      });
    } finally {
      await limiter.close();
    }
  });
});
