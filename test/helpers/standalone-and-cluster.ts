import Redis, { Cluster } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';

/**
 * Starts a standalone Redis and a 3-master cluster for the file (beforeAll/afterAll) and returns
 * the `describe.each` table of both: a name and a function that connects a new client.
 */
export function standaloneAndCluster(): readonly (readonly [string, () => Redis | Cluster])[] {
  let standalone: RedisProcess;
  let cluster: RedisClusterHarness;
  beforeAll(async () => {
    [standalone, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 0 })]);
  }, 90_000);
  afterAll(async () => {
    await Promise.all([standalone?.stop(), cluster?.stop()]);
  }, 30_000);
  return [
    ['standalone', () => new Redis({ host: standalone.host, port: standalone.port, maxRetriesPerRequest: 1 })],
    ['cluster', () => new Cluster([...cluster.startupNodes], { redisOptions: { maxRetriesPerRequest: 1 } })],
  ];
}
