// Done when: 200 concurrent gRPC calls for one descriptor limited to 50 give exactly 50 OK, and
// with hits_addend 3 exactly as many calls as fit (16 × 3 = 48); afterwards every key has a TTL.
// Real redis-server (standalone and a 3-master/3-replica cluster), real gRPC, real server.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge, oneRule, pttls, tally, timedCall, uniquePrefix, type RedisNode } from './redis-backend-helpers';

const RULES = { 'exact.yaml': oneRule('exact', 'user', 50, 'hour') };
const CALLS = 200;

interface Deployment {
  name: string;
  env: () => Record<string, string>;
  masters: () => RedisNode[];
}

let standalone: RedisProcess;
let cluster: RedisClusterHarness;

beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 1 })]);
});
afterAll(async () => {
  await Promise.all([standalone?.stop(), cluster?.stop()]);
});

const deployments: Deployment[] = [
  { name: 'standalone', env: () => ({ REDIS_URL: standalone.url }), masters: () => [standalone] },
  { name: 'cluster', env: () => ({ REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds }), masters: () => cluster.masters() },
];

describe.each(deployments)('exact counting under concurrency ($name)', (d) => {
  let t: TestApp;
  let prefix: string;
  beforeAll(async () => {
    prefix = uniquePrefix('exact');
    t = await startTestApp(RULES, { ...d.env(), CACHE_KEY_PREFIX: prefix });
  });
  afterAll(async () => {
    await t?.stop();
  });

  test('200 concurrent calls against a limit of 50: exactly 50 OK, 150 OVER_LIMIT', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const request = oneDescriptor('exact', { user: 'u1' });
    const outcomes = await Promise.all(Array.from({ length: CALLS }, () => timedCall(t.client, request)));
    expect(tally(outcomes)).toEqual({ OK: 50, OVER_LIMIT: 150 });
    // The admitted calls saw every remaining value from 49 down to 0 exactly once.
    const remaining = outcomes
      .filter((o) => o.code === 'OK')
      .map((o) => o.remaining)
      .sort((a, b) => a! - b!);
    expect(remaining).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  test('hits_addend 3: as many calls as fit are admitted (16 × 3 = 48 ≤ 50), no more', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const request = { ...oneDescriptor('exact', { user: 'u3' }), hits_addend: 3 };
    const outcomes = await Promise.all(Array.from({ length: CALLS }, () => timedCall(t.client, request)));
    const counts = tally(outcomes);
    expect(counts).toEqual({ OK: 16, OVER_LIMIT: CALLS - 16 });
    expect(counts.OK! * 3).toBeLessThanOrEqual(50);
  });

  test('requests of different sizes in one tick (script calls of 1, 2 and 3 keys) all count', async () => {
    await awayFromWindowEdge(3600, 30_000);
    // The same descriptor n times in one request: one script call with n keys.
    const requests = Array.from({ length: 30 }, (_, i) => ({
      domain: 'exact',
      descriptors: Array.from({ length: (i % 3) + 1 }, () => ({ entries: [{ key: 'user', value: `mixed-${i}` }] })),
    }));
    const answers = await Promise.all(requests.map((r) => t.client.shouldRateLimit(r)));
    for (let i = 0; i < 30; i++) {
      expect(answers[i]!.overall_code).toBe('OK');
      expect(answers[i]!.statuses.map((st) => st.limit_remaining)).toEqual(Array.from({ length: (i % 3) + 1 }, (_, j) => 49 - j));
    }
  });

  test('after the load every key under the prefix has a TTL no longer than two windows', async () => {
    const all = new Map<string, number>();
    for (const node of d.masters()) for (const [k, v] of await pttls(node, prefix)) all.set(k, v);
    // One key per counter: u1, u3 and the 30 mixed ones.
    expect(all.size).toBe(32);
    for (const [key, ttl] of all) {
      expect(ttl, key).toBeGreaterThan(0);
      // A fixed window is kept until the window after it ends (a clock stepping back still finds it).
      expect(ttl, key).toBeLessThanOrEqual(2 * 3_600_000);
    }
  });
});
