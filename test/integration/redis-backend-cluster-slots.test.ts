// Done when: distinct descriptors land on all three masters of a real cluster, every key carries
// a `{...}` hash tag that decides its slot, and STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT with two
// descriptors on different slots charges neither when one is over.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { keySlot, startCluster, type ClusterNode, type RedisClusterHarness } from '../harness/redis-servers';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge, oneRule, scanKeys, uniquePrefix } from './redis-backend-helpers';
import { fixedWindowCount } from '../helpers/fixed-window-value';

let cluster: RedisClusterHarness;
beforeAll(async () => {
  cluster = await startCluster({ masters: 3, replicasPerMaster: 1 });
});
afterAll(async () => {
  await cluster?.stop();
});

/** Where each key under `prefix` lives: key → the master that holds it. */
async function keysByMaster(prefix: string): Promise<Map<string, ClusterNode>> {
  const where = new Map<string, ClusterNode>();
  for (const master of cluster.masters()) for (const key of await scanKeys(master, prefix)) where.set(key, master);
  return where;
}

/** The port of the master that serves `slot` (CLUSTER SLOTS). */
async function masterPortOfSlot(slot: number): Promise<number> {
  const ranges = (await cluster.masters()[0]!.command('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
  const range = ranges.find(([from, to]) => slot >= Number(from) && slot <= Number(to));
  if (!range) throw new Error(`no master serves slot ${slot}`);
  return Number(range[2][1]);
}

describe('keys spread over the cluster', () => {
  let t: TestApp;
  const prefix = uniquePrefix('spread');
  beforeAll(async () => {
    t = await startTestApp(
      { 'spread.yaml': oneRule('spread', 'user', 100) },
      { REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds, CACHE_KEY_PREFIX: prefix },
    );
  });
  afterAll(async () => {
    await t?.stop();
  });

  test('30 distinct descriptors land on all three masters, each key under its {tag} slot', async () => {
    const values = Array.from({ length: 30 }, (_, i) => `user-${i}`);
    // All at once: the calls of one tick for keys on different nodes must each reach their own node.
    const answers = await Promise.all(values.map((v) => t.client.shouldRateLimit(oneDescriptor('spread', { user: v }))));
    expect(answers.map((a) => a.overall_code)).toEqual(values.map(() => 'OK'));
    const where = await keysByMaster(prefix);
    expect(where.size).toBe(30);
    const perMaster = new Map<ClusterNode, number>();
    for (const [key, master] of where) {
      // Exactly one non-empty hash tag, right after the prefix, and it decides the slot (the
      // window's start follows it, issue 20).
      const m = /^t_spread_[0-9a-f]{8}_rl:\{([^{}]+)\}:fixed_window:3600:\d+$/.exec(key);
      expect(m, key).not.toBeNull();
      const slot = Number(await master.command('CLUSTER', 'KEYSLOT', key));
      expect(slot).toBe(keySlot(m![1]!));
      expect(slot).toBe(keySlot(key));
      // The node that holds it is the one that owns its slot (it answers for it, no MOVED).
      expect(Number(await master.command('CLUSTER', 'COUNTKEYSINSLOT', slot))).toBeGreaterThanOrEqual(1);
      perMaster.set(master, (perMaster.get(master) ?? 0) + 1);
    }
    expect(perMaster.size).toBe(3);
    for (const n of perMaster.values()) expect(n).toBeGreaterThanOrEqual(3);
    // The counts are real: each key holds exactly the one hit.
    for (const [key, master] of where) expect(await fixedWindowCount(master, key)).toBe(1);
  });
});

describe('STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT across slots', () => {
  const RULES = `
domain: stop
descriptors:
  - key: small
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: big
    rate_limit: { unit: hour, requests_per_unit: 10 }
`;
  let t: TestApp;
  const prefix = uniquePrefix('stop');
  beforeAll(async () => {
    t = await startTestApp(
      { 'stop.yaml': RULES },
      { REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds, CACHE_KEY_PREFIX: prefix, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true' },
    );
  });
  afterAll(async () => {
    await t?.stop();
  });

  test('when one descriptor is over, it is charged (the reference) and the other, on another master, is not', async () => {
    await awayFromWindowEdge(3600, 30_000);
    // A value for `big` whose counter lives on another master than small=s (tags as counter-key.ts builds them).
    const smallMaster = await masterPortOfSlot(keySlot('stop:small=s'));
    let big = '';
    for (let i = 0; i < 100 && big === ''; i++) if ((await masterPortOfSlot(keySlot(`stop:big=b${i}`))) !== smallMaster) big = `b${i}`;
    const both = {
      domain: 'stop',
      descriptors: [{ entries: [{ key: 'small', value: 's' }] }, { entries: [{ key: 'big', value: big }] }],
    };
    const first = await t.client.shouldRateLimit(both);
    expect(first.overall_code).toBe('OK');
    expect(first.statuses.map((s) => s.limit_remaining)).toEqual([0, 9]);

    const where = await keysByMaster(prefix);
    expect(where.size).toBe(2);
    const [smallKey, bigKey] = [...where.keys()].sort((a, b) => (a.includes('small') ? -1 : b.includes('small') ? 1 : 0));
    expect(keySlot(smallKey!)).not.toBe(keySlot(bigKey!));
    // The two counters sit on different masters, so no single script call can cover both.
    expect(where.get(smallKey!)).not.toBe(where.get(bigKey!));

    for (let i = 0; i < 5; i++) {
      const res = await t.client.shouldRateLimit(both);
      expect(res.overall_code).toBe('OVER_LIMIT');
      expect(res.statuses[0]!.code).toBe('OVER_LIMIT');
    }
    // Each counter that goes over is incremented, as envoyproxy/ratelimit does; the others are held back.
    expect(await fixedWindowCount(where.get(smallKey!)!, smallKey!)).toBe(6);
    expect(await fixedWindowCount(where.get(bigKey!)!, bigKey!)).toBe(1);
    // The big counter alone is charged normally: 1 + 1 = 2 of 10.
    const alone = await t.client.shouldRateLimit(oneDescriptor('stop', { big }));
    expect(alone.overall_code).toBe('OK');
    expect(alone.statuses[0]!.limit_remaining).toBe(8);
    expect(await fixedWindowCount(where.get(bigKey!)!, bigKey!)).toBe(2);
  });
});
