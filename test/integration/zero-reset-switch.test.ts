// Issue 30, "Done when": a limit of 10 an hour; the reference binary (built from source) counts 7
// hits; then floodgate in the shared layout (REDIS_KEY_LAYOUT=reference), then floodgate in its
// own layout (REDIS_KEY_LAYOUT=floodgate, the default, which carries the reference's count over),
// all within the same hour window: exactly 3 more are admitted in all, the rest OVER_LIMIT. Also
// the direct step, the reference then floodgate's own layout (the carry-over alone), and the exact
// leave, one pod of the shared layout switching to its own keys at REDIS_KEY_LAYOUT_UNTIL. On one Redis
// and on a 3-master Redis Cluster (where the reference's key and floodgate's own lie in
// different slots). Every server runs before the counting starts, which waits (bounded) until
// the hour has minutes left.
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { counterKey, fixedWindowKey } from '../../src/limiter/counter-key';
import { referenceWindowKey } from '../../src/limiter/reference-key';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { startReference, type ReferenceServer } from '../harness/reference-server';
import { sleep } from '../harness/wait';
import { oneDescriptor, rlsClient, type RlsTestClient } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge } from '../helpers/windows';
import { uniquePrefix } from './redis-backend-helpers';

const RULES = {
  'd.yaml': `
domain: d
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
`,
};

interface Step {
  readonly shouldRateLimit: RlsTestClient['shouldRateLimit'];
}

/** The codes of `n` calls for `user` through `server`, one after another. */
async function codes(server: Step, user: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push((await server.shouldRateLimit(oneDescriptor('d', { user }))).overall_code);
  return out;
}

const ok = (n: number) => Array<string>(n).fill('OK');
const over = (n: number) => Array<string>(n).fill('OVER_LIMIT');

/** The reference, floodgate in the shared layout and floodgate in its own, on one Redis (or cluster) and one prefix. */
interface Fleet {
  readonly reference: ReferenceServer;
  readonly referenceClient: RlsTestClient;
  readonly shared: TestApp;
  readonly own: TestApp;
  readonly prefix: string;
  /** floodgate's environment for one more pod on the same Redis and prefix. */
  readonly env: Record<string, string>;
  stop(): Promise<void>;
}

async function startFleet(redis: { reference: Record<string, string>; floodgate: Record<string, string> }): Promise<Fleet> {
  const prefix = uniquePrefix('zero');
  const reference = await startReference(RULES, { ...redis.reference, CACHE_KEY_PREFIX: prefix });
  const common = { ...redis.floodgate, BACKEND_TYPE: 'redis', CACHE_KEY_PREFIX: prefix };
  const shared = await startTestApp(RULES, { ...common, REDIS_KEY_LAYOUT: 'reference' });
  const own = await startTestApp(RULES, common);
  const referenceClient = rlsClient(`127.0.0.1:${reference.grpcPort}`);
  return {
    reference,
    referenceClient,
    shared,
    own,
    prefix,
    env: common,
    async stop() {
      referenceClient.close();
      await Promise.all([shared.stop(), own.stop()]);
      await reference.stop();
    },
  };
}

/** The count a key holds, read on the Redis (or cluster) of the test. */
type ReadKey = (key: string) => Promise<string | null>;

async function switches(fleet: Fleet, read: ReadKey): Promise<void> {
  // Both sequences inside one hour window: two minutes are more than they take.
  await awayFromWindowEdge(3600, 120_000);
  // reference -> shared layout -> own layout.
  expect(await codes(fleet.referenceClient, 'alice', 7)).toEqual(ok(7));
  expect(await codes(fleet.shared.client, 'alice', 2)).toEqual(ok(2));
  expect(await codes(fleet.own.client, 'alice', 4)).toEqual([...ok(1), ...over(3)]);
  // reference -> own layout directly: the carry-over alone.
  expect(await codes(fleet.referenceClient, 'bob', 7)).toEqual(ok(7));
  expect(await codes(fleet.own.client, 'bob', 5)).toEqual([...ok(3), ...over(2)]);
  // reference -> shared layout until T -> floodgate's own keys from T (REDIS_KEY_LAYOUT_UNTIL):
  // the pod's one call before T counts in the reference's key, its calls after T in its own key,
  // which starts from the reference's count. Whichever side of T the first call falls, exactly 3
  // are admitted after the reference's 7.
  const at = Date.now() + 8000;
  const leaving = await startTestApp(RULES, { ...fleet.env, REDIS_KEY_LAYOUT: 'reference', REDIS_KEY_LAYOUT_UNTIL: new Date(at).toISOString() });
  try {
    expect(await codes(fleet.referenceClient, 'carol', 7)).toEqual(ok(7));
    expect(await codes(leaving.client, 'carol', 1)).toEqual(ok(1));
    await sleep(Math.max(0, at - Date.now() + 100));
    expect(await codes(leaving.client, 'carol', 4)).toEqual([...ok(2), ...over(2)]);
    const carol = { domain: 'd', entries: [{ key: 'user', value: 'carol' }] };
    const spec = { algorithm: 'fixed_window' as const, limit: 10, windowSeconds: 3600, burst: 0 };
    const now = Date.now();
    expect(Number(await read(referenceWindowKey(fleet.prefix, carol, 3600, now)))).toBeGreaterThanOrEqual(7);
    expect(await read(fixedWindowKey(counterKey(fleet.prefix, carol, spec), 3600, now))).toBe('12');
  } finally {
    await leaving.stop();
  }
}

describe('the zero-reset switch, one Redis (issue 30)', () => {
  let redis: RedisProcess;
  let fleet: Fleet;
  beforeAll(async () => {
    redis = await startStandalone();
    const url = `127.0.0.1:${redis.port}`;
    fleet = await startFleet({ reference: { REDIS_URL: url }, floodgate: { REDIS_URL: url } });
  }, 900_000);
  afterAll(async () => {
    await fleet?.stop();
    await redis?.stop();
  });

  test('7 in the reference, then the shared layout, then the own layout, in one hour: exactly 3 more admitted', async () => {
    await switches(fleet, async (key) => (await redis.command('GET', key)) as string | null);
  }, 200_000);
});

describe('the zero-reset switch, a 3-master Redis Cluster (issue 30)', () => {
  let cluster: RedisClusterHarness;
  let fleet: Fleet;
  beforeAll(async () => {
    cluster = await startCluster({ masters: 3, replicasPerMaster: 0 });
    fleet = await startFleet({
      reference: { REDIS_TYPE: 'cluster', REDIS_URL: cluster.seeds },
      floodgate: { REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds },
    });
  }, 900_000);
  afterAll(async () => {
    await fleet?.stop();
    await cluster?.stop();
  });

  test('7 in the reference, then the shared layout, then the own layout, in one hour: exactly 3 more admitted', async () => {
    const admin = new Cluster([...cluster.startupNodes], { lazyConnect: true });
    await admin.connect();
    try {
      await switches(fleet, (key) => admin.get(key));
    } finally {
      await admin.quit();
    }
  }, 200_000);
});
