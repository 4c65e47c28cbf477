// Review of issue 30 (REDIS_KEY_LAYOUT=reference): with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT and
// LOCAL_CACHE_SIZE_IN_BYTES, a reference pod whose local cache knows one counter of a request over
// increments every other key of the request by 0 (src/redis/fixed_cache_impl.go: getHitsAddend),
// so a near-limit counter beside it is neither charged nor denied. A mixed fleet must answer as the
// reference alone does (the same requests to a reference on a Redis of its own), the fleet on one
// Redis and on a 3-master cluster. (Failed before the fix: floodgate sent the whole request to
// Redis' STOP rule, which charged the near-limit counter too.)
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { startReference, type ReferenceServer } from '../harness/reference-server';
import { rlsClient, type RlsTestClient, type TestDescriptor, type TestRequest } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge } from '../helpers/windows';
import type { WireResponse } from '../../src/rls/wire-types';

const RULES = `
domain: a
descriptors:
  - key: one
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
`;

const one = (hits: number): TestDescriptor => ({ entries: [{ key: 'one', value: 'a' }], hits_addend: { value: hits } });
const shadow = (hits: number): TestDescriptor => ({ entries: [{ key: 'shadow', value: 'a' }], hits_addend: { value: hits } });
const user = (hits: number, value = 'b'): TestDescriptor => ({ entries: [{ key: 'user', value }], hits_addend: { value: hits } });
const summary = (r: WireResponse): unknown[] => [r.overall_code, ...r.statuses.map((s) => [s.code, s.limit_remaining ?? 0])];

/** The shared Redis of the fleet: its env for the reference and for floodgate, and how to stop it. */
interface Shared {
  readonly reference: Record<string, string>;
  readonly floodgate: Record<string, string>;
  stop(): Promise<void>;
}

const ONE_REDIS = async (): Promise<Shared> => {
  const redis: RedisProcess = await startStandalone();
  const env = { REDIS_URL: `127.0.0.1:${redis.port}` };
  return { reference: env, floodgate: env, stop: () => redis.stop() };
};

// The reference's keys carry no hash tag: `one` and `user` may lie on different masters, where
// floodgate looks at the held-back counters node by node.
const CLUSTER = async (): Promise<Shared> => {
  const cluster: RedisClusterHarness = await startCluster({ masters: 3, replicasPerMaster: 0 });
  return {
    reference: { REDIS_TYPE: 'cluster', REDIS_URL: cluster.seeds },
    floodgate: { REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds },
    stop: () => cluster.stop(),
  };
};

describe.each([
  { where: 'one Redis', start: ONE_REDIS },
  { where: 'a 3-master cluster', start: CLUSTER },
])('REDIS_KEY_LAYOUT=reference, STOP mode and the local cache on $where: a cached counter holds the others back (issue 30)', ({ start }) => {
  let shared: Shared | undefined;
  const redises: RedisProcess[] = [];
  const servers: ReferenceServer[] = [];
  let app: TestApp;
  let fleetReference: RlsTestClient;
  let alone: RlsTestClient;
  beforeAll(async () => {
    let own: RedisProcess;
    [shared, own] = await Promise.all([start(), startStandalone()]);
    redises.push(own);
    const env = { STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true', LOCAL_CACHE_SIZE_IN_BYTES: '1048576' };
    servers.push(await startReference({ 'a.yaml': RULES }, { ...env, ...shared.reference }));
    servers.push(await startReference({ 'a.yaml': RULES }, { ...env, REDIS_URL: `127.0.0.1:${own.port}` }));
    app = await startTestApp({ 'a.yaml': RULES }, { ...env, ...shared.floodgate, BACKEND_TYPE: 'redis', REDIS_KEY_LAYOUT: 'reference' });
    fleetReference = rlsClient(`127.0.0.1:${servers[0]!.grpcPort}`);
    alone = rlsClient(`127.0.0.1:${servers[1]!.grpcPort}`);
  }, 900_000);
  afterAll(async () => {
    fleetReference?.close();
    alone?.close();
    await app?.stop();
    for (const s of servers) await s.stop();
    await Promise.all([shared?.stop(), ...redises.map((r) => r.stop())]);
  });

  test('the fleet answers as the reference alone', async () => {
    await awayFromWindowEdge(3600, 60_000);
    const sequence: TestRequest[] = [
      { domain: 'a', descriptors: [one(2)] }, // reference: over, cached
      { domain: 'a', descriptors: [one(2)] }, // floodgate: over, cached
      { domain: 'a', descriptors: [user(8)] }, // user at 8 of 10
      { domain: 'a', descriptors: [one(2), user(5)] }, // floodgate: `one` cached; the reference leaves user at 8
      { domain: 'a', descriptors: [user(1)] },
      { domain: 'a', descriptors: [user(1)] },
    ];
    const mixed: unknown[] = [];
    const single: unknown[] = [];
    for (const [n, request] of sequence.entries()) {
      single.push(summary(await alone.shouldRateLimit(request)));
      mixed.push(summary(await (n % 2 === 0 ? fleetReference : app.client).shouldRateLimit(request)));
    }
    expect(mixed).toEqual(single);
  }, 120_000);

  // A shadow_mode counter cached over: the reference admits the request (user at 8 stays 8), the fleet denies it.
  test('with a shadow_mode counter cached over, the fleet admits what the reference alone admits', async () => {
    await awayFromWindowEdge(3600, 60_000);
    const sequence: TestRequest[] = [
      { domain: 'a', descriptors: [shadow(2)] },
      { domain: 'a', descriptors: [shadow(2)] },
      { domain: 'a', descriptors: [user(8, 'c')] },
      { domain: 'a', descriptors: [shadow(2), user(5, 'c')] },
      { domain: 'a', descriptors: [user(1, 'c')] },
    ];
    const mixed: unknown[] = [];
    const single: unknown[] = [];
    for (const [n, request] of sequence.entries()) {
      single.push(summary(await alone.shouldRateLimit(request)));
      mixed.push(summary(await (n % 2 === 0 ? fleetReference : app.client).shouldRateLimit(request)));
    }
    expect(mixed).toEqual(single);
  }, 120_000);
});
