// Done when: the core end-to-end contract holds on the Redis backend too. The very suite that
// the memory backend passes (test/helpers/contract-suite.ts), on standalone and on cluster.
import { afterAll, beforeAll } from 'vitest';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { serviceContractSuite } from '../helpers/contract-suite';

let standalone: RedisProcess;
let cluster: RedisClusterHarness;
beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 1 })]);
});
afterAll(async () => {
  await Promise.all([standalone?.stop(), cluster?.stop()]);
});

serviceContractSuite('redis standalone', () => ({ REDIS_URL: standalone.url, CACHE_KEY_PREFIX: 'contract_standalone_' }));
serviceContractSuite('redis cluster', () => ({ REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds, CACHE_KEY_PREFIX: 'contract_cluster_' }));
