// Issue 20: in a Redis Cluster, concurrent fixed-window calls to one node are merged across the
// node's slots into one script call (the counters named in ARGV: a ':named' mode, lua/lib/read_mode.lua).
// A slot that moves to another master while the limiter's slot map still names the old one
// must cost nothing but a second call: its counters are answered "not served here" by the node
// and sent again through their slot, which ioredis routes (MOVED, ASK). Real processes, a real
// resharding of live slots (CLUSTER SETSLOT ... MIGRATING / IMPORTING, MIGRATE, SETSLOT NODE).
import Redis from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { checkKey } from '../../src/limiter/counter-key';
import type { LimitCheck } from '../../src/limiter/limiter';
import { readLuaScript } from '../../src/limiter/redis/lua-script';
import { createRedisClient } from '../../src/limiter/redis/redis-client';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { loadSettings } from '../../src/settings/settings';
import { keySlot, startCluster, type ClusterNode, type RedisClusterHarness } from '../harness/redis-servers';
import { within } from '../harness/wait';
import { fixedWindowCount } from '../helpers/fixed-window-value';
import { scriptCalls } from './redis-backend-helpers';

const PREFIX = 'mv_';
const spec = { algorithm: 'fixed_window' as const, limit: 1000, windowSeconds: 3600, burst: 1000 };
const check = (value: string, hits: number): LimitCheck => ({ counter: { domain: 'mv', entries: [{ key: 'k', value }] }, spec, hits });
const keyOf = (value: string) => checkKey(PREFIX, check(value, 1));
/** A `rate_limits` list on one counter's descriptor: the same hour window and a day's token bucket (lua/limit_list.lua). */
const list = (value: string, hits: number): LimitCheck[] => [
  { ...check(value, hits), listSize: 2 },
  { ...check(value, hits), spec: { algorithm: 'token_bucket', limit: 1000, windowSeconds: 86_400, burst: 1000 } },
];
/** A list of fixed windows only, the hour and a day (lua/fixed_window_list.lua). */
const fixedWindowList = (value: string, hits: number): LimitCheck[] => [
  { ...check(value, hits), listSize: 2 },
  { ...check(value, hits), spec: { algorithm: 'fixed_window', limit: 1000, windowSeconds: 86_400, burst: 1000 } },
];

/** The master that serves `slot`, from CLUSTER SLOTS as `node` reports it. */
async function ownerOf(node: ClusterNode, masters: ClusterNode[], slot: number): Promise<ClusterNode> {
  const ranges = (await node.command('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  const port = Number(range?.[2][1]);
  const owner = masters.find((m) => m.port === port);
  if (owner === undefined) throw new Error(`no master serves slot ${slot}`);
  return owner;
}

/** Moves `slot` (and its keys) from `source` to `target` as redis-cli --cluster reshard does. */
async function moveSlot(slot: number, source: ClusterNode, target: ClusterNode, masters: ClusterNode[]): Promise<void> {
  await target.command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
  await source.command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target.id);
  const keys = (await source.command('CLUSTER', 'GETKEYSINSLOT', slot, 1000)) as string[];
  if (keys.length > 0) await source.command('MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...keys);
  for (const m of masters) await m.command('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
}

let cluster: RedisClusterHarness;
beforeAll(async () => {
  cluster = await startCluster();
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
});

/**
 * A limiter of its own (a test that moves slots pauses its merging per node), on the cluster
 * client the service builds from REDIS_TYPE=cluster.
 */
async function newLimiter(): Promise<RedisLimiter> {
  const seeds = cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',');
  const client = createRedisClient(loadSettings({ BACKEND_TYPE: 'redis', REDIS_TYPE: 'cluster', REDIS_URL: seeds }).redis!);
  const limiter = new RedisLimiter({ client, keyPrefix: PREFIX });
  await within(5000, () => limiter.isHealthy(), 'the limiter connected');
  return limiter;
}

describe.each([
  ['one limit', (value: string, hits: number) => [check(value, hits)], false],
  ['one limit in STOP mode', (value: string, hits: number) => [check(value, hits)], true],
  ['a rate_limits list', list, false],
  ['a rate_limits list of fixed windows', fixedWindowList, false],
] as const)('merged calls per cluster node, %s per request', (shape, request, stop) => {
  test('slots that move to another master mid-run: every count exact, the moved counters found on the new master', async () => {
    const masters = cluster.masters();
    const [source, target] = masters as [ClusterNode, ClusterNode];
    // 20 counters of distinct slots on `source`; the first 5 slots will move to `target`.
    const values: string[] = [];
    const slots = new Set<number>();
    for (let i = 0; values.length < 20 && i < 100_000; i++) {
      const value = `${{ 'one limit': 'v', 'one limit in STOP mode': 's', 'a rate_limits list': 'l' }[shape as string] ?? 'f'}${i}`;
      const slot = keySlot(keyOf(value));
      if (slots.has(slot) || (await ownerOf(source, masters, slot)) !== source) continue;
      slots.add(slot);
      values.push(value);
    }
    expect(values).toHaveLength(20);
    const moving = values.slice(0, 5);
    const options = () => ({ deadline: Date.now() + 5000, stopIncrementWhenOverLimit: stop });

    const limiter = await newLimiter();
    const calls0 = await scriptCalls(masters);
    const first = await Promise.all(values.map((v) => limiter.check(request(v, 1), options())));
    // One merged call for all 20 requests on `source` (the slots are distinct); a NOSCRIPT retry may add one.
    expect((await scriptCalls(masters)) - calls0).toBeLessThanOrEqual(2);
    expect(first.map((r) => r[0]!.used)).toEqual(values.map(() => 1));

    // Behind the limiter's back: its slot map still sends these slots to `source`.
    for (const v of moving) await moveSlot(keySlot(keyOf(v)), source, target, masters);

    const second = await Promise.all(values.map((v) => limiter.check(request(v, 2), options())));
    expect(second.map((r) => r[0]!.used)).toEqual(values.map(() => 3));
    // A counter came back not served: for NODE_MERGE_PAUSE_MS calls go per slot (20 slots here).
    const calls2 = await scriptCalls(masters);
    const third = await Promise.all(values.map((v) => limiter.check(request(v, 1), options())));
    expect(third.map((r) => r[0]!.used)).toEqual(values.map(() => 4));
    expect((await scriptCalls(masters)) - calls2).toBeGreaterThanOrEqual(values.length);
    await limiter.close();

    for (const v of values) {
      const slot = keySlot(keyOf(v));
      const home = moving.includes(v) ? target : source;
      // The counter's window key (lib/fixed_window_step.lua) is in its slot.
      const windowKeys = ((await home.command('CLUSTER', 'GETKEYSINSLOT', slot, 10)) as string[]).filter((k) => k.startsWith(`${keyOf(v)}:`));
      expect(windowKeys, `${v} on its slot's master`).toHaveLength(1);
    }
  }, 60_000);
});

describe('a slot being migrated (redis-cli --cluster reshard), its keys not moved yet', () => {
  const tight = { algorithm: 'fixed_window' as const, limit: 3, windowSeconds: 3600, burst: 0 };
  const day = { algorithm: 'fixed_window' as const, limit: 100, windowSeconds: 86_400, burst: 0 };
  const one = (value: string): LimitCheck[] => [{ ...check(value, 1), spec: tight }];
  const hourAndDay = (value: string): LimitCheck[] => [
    { ...check(value, 1), spec: tight, listSize: 2 },
    { ...check(value, 1), spec: day },
  ];

  test.each([
    ['one limit', one],
    ['a rate_limits list of an hour and a day', hourAndDay],
  ] as const)(
    '%s: a counter over its limit stays over, and the keys migrate',
    async (_shape, request) => {
      const masters = cluster.masters();
      const value = `mig-${request === one ? 'one' : 'list'}`;
      const slot = keySlot(keyOf(value));
      const source = await ownerOf(masters[0]!, masters, slot);
      const target = masters.find((m) => m !== source)!;
      const limiter = await newLimiter();
      const allowed = async () =>
        (await limiter.check(request(value), { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false })).every((r) => r.allowed);
      try {
        expect([await allowed(), await allowed(), await allowed(), await allowed()]).toEqual([true, true, true, false]);
        await target.command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
        await source.command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target.id);
        // The counts are on `source` still: its calls must run there, not start afresh on `target`.
        expect([await allowed(), await allowed(), await allowed()]).toEqual([false, false, false]);
        const keys = (await source.command('CLUSTER', 'GETKEYSINSLOT', slot, 1000)) as string[];
        expect(keys.length).toBeGreaterThan(0);
        // Nothing of the slot was written on `target` meanwhile, so the keys move (no BUSYKEY).
        expect(await source.command('MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...keys)).toBe('OK');
        for (const m of masters) await m.command('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
        expect(await allowed()).toBe(false);
      } finally {
        await limiter.close();
      }
    },
    60_000,
  );
});

describe("a merged call that finds part of a request's counters moved", () => {
  test('only the counters not served go again: those counted on the node are not counted twice', async () => {
    const masters = cluster.masters();
    // Two counters of one descriptor (an hour and a day), so one slot and one script call: a
    // request's group, merged per node.
    const hour = { algorithm: 'fixed_window' as const, limit: 100, windowSeconds: 3600, burst: 0 };
    const day = { algorithm: 'fixed_window' as const, limit: 100, windowSeconds: 86_400, burst: 0 };
    const value = `part-${Date.now()}`;
    const request = (): LimitCheck[] => [
      { ...check(value, 1), spec: hour },
      { ...check(value, 1), spec: day },
    ];
    const slot = keySlot(keyOf(value));
    const source = await ownerOf(masters[0]!, masters, slot);
    const target = masters.find((m) => m !== source)!;
    const limiter = await newLimiter();
    const options = () => ({ deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false });
    try {
      expect((await limiter.check(request(), options())).map((r) => r.used)).toEqual([1, 1]);
      // Mid-resharding: the day's key has moved to `target`, the hour's (the call's first key,
      // which routes it) is still on `source`.
      await target.command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
      await source.command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target.id);
      const keys = (await source.command('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
      const hourKey = keys.find((k) => k.includes(':fixed_window:3600:'))!;
      const dayKey = keys.find((k) => k.includes(':fixed_window:86400:'))!;
      expect(await source.command('MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', dayKey)).toBe('OK');
      const answer = limiter.check(request(), options());
      // The resharding ends a little later (a call that needs both keys at once waits for it).
      await new Promise((r) => setTimeout(r, 300));
      expect(await source.command('MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', hourKey)).toBe('OK');
      // As a resharding does: every other key of the slot moves too (other tests' keys can share
      // it), or the source refuses to give the slot up. Without REPLACE: a key of this request
      // written again on the source would fail here (BUSYKEY), not be merged away.
      for (let round = 0; round < 20; round++) {
        const rest = (await source.command('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
        if (rest.length === 0) break;
        expect(rest.filter((k) => k.includes(value))).toEqual([]);
        expect(await source.command('MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...rest)).toBe('OK');
      }
      for (const m of masters) await m.command('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
      expect((await answer).map((r) => r.used)).toEqual([2, 2]);
      expect(await target.command('GET', dayKey)).toBe('2');
      expect(await target.command('GET', hourKey)).toBe('2');
    } finally {
      await limiter.close();
    }
  }, 60_000);
});

describe("a node's named call", () => {
  test("a node's count:named call counts the named counters of its slots, and answers one of another master's slot as not served, writing nothing", async () => {
    const masters = cluster.masters();
    const [here, there] = masters as [ClusterNode, ClusterNode];
    const named: string[] = [];
    let foreign = '';
    for (let i = 0; (named.length < 2 || foreign === '') && i < 100_000; i++) {
      const key = `direct:{n${i}}`;
      const owner = await ownerOf(here, masters, keySlot(key));
      if (owner === here && named.length < 2 && !named.some((k) => keySlot(k) === keySlot(key))) named.push(key);
      else if (owner === there && foreign === '') foreign = key;
    }
    const client = new Redis({ host: here.host, port: here.port, maxRetriesPerRequest: 1 });
    try {
      const source = readLuaScript('fixed_window');
      const argv = ['count:named', named[0]!, 2, 10, 60, foreign, 1, 10, 60, named[1]!, 1, 10, 60];
      const reply = (await client.eval(source, 1, named[0]!, ...argv)) as number[];
      // count, reset per counter; count -1: not served here.
      expect([0, 1, 2].map((j) => reply[2 * j])).toEqual([2, -1, 1]);
      expect(await here.command('CLUSTER', 'COUNTKEYSINSLOT', keySlot(foreign))).toBe(0);
      expect(await there.command('CLUSTER', 'COUNTKEYSINSLOT', keySlot(foreign))).toBe(0);
      // look:named, a node's merged look: the same counters read, nothing written, the foreign one not served.
      const looked = (await client.eval(source, 1, named[0]!, 'look:named', ...argv.slice(1))) as number[];
      expect([0, 1, 2].map((j) => looked[2 * j])).toEqual([2, -1, 1]);
      expect(await here.command('CLUSTER', 'COUNTKEYSINSLOT', keySlot(foreign))).toBe(0);

      // A server that refuses a script keys of several slots (as Redis does for a script with
      // a shebang, and a managed Redis may for every script): the other slot's counter is not
      // served here either, nothing of it written, where it used to fail the whole call.
      const strict = (await client.eval(`#!lua\n${source}`, 1, named[0]!, ...argv)) as number[];
      expect([0, 1, 2].map((j) => strict[2 * j])).toEqual([4, -1, -1]);
      expect(await fixedWindowCount(here, named[1]!)).toBe(1);
    } finally {
      client.disconnect();
    }
  });

  test("lua/fixed_window_list.lua's count:named call decides each named list of its slots, and answers a list of another master's slot as not served, writing nothing", async () => {
    const masters = cluster.masters();
    const [here, there] = masters as [ClusterNode, ClusterNode];
    let mine = '';
    let foreign = '';
    for (let i = 0; (mine === '' || foreign === '') && i < 100_000; i++) {
      const tag = `fwl{n${i}}`;
      const owner = await ownerOf(here, masters, keySlot(tag));
      if (owner === here && mine === '') mine = tag;
      else if (owner === there && foreign === '') foreign = tag;
    }
    const now = (Math.floor(Date.now() / 3_600_000) + 1) * 3_600_000 + 5;
    const windowKey = (tag: string, w: number) => `${tag}:w${w}:${(now - (now % (w * 1000))) / 1000}`;
    // Three lists, each of a minute and an hour: mine (admitted), the foreign one, mine again
    // (refused by its minute limit of 3: 2 + 2 > 3).
    const list = (tag: string, hits: number, minuteLimit: number) => [
      2,
      windowKey(tag, 60),
      hits,
      minuteLimit,
      60,
      windowKey(tag, 3600),
      hits,
      100,
      3600,
    ];
    const argv = ['count:named', ...list(mine, 2, 10), ...list(foreign, 1, 10), ...list(mine, 2, 3), now];
    const client = new Redis({ host: here.host, port: here.port, maxRetriesPerRequest: 1 });
    try {
      const reply = (await client.eval(readLuaScript('fixed_window_list'), 1, windowKey(mine, 60), ...argv)) as number[];
      // count, reset per key; reset < 0: the list charged nothing; count -1: not served here.
      expect(reply).toEqual([2, 60_000 - 5, 2, 3_600_000 - 5, -1, 0, -1, 0, 2, -(60_000 - 5), 2, -(3_600_000 - 5)]);
      expect(await there.command('CLUSTER', 'COUNTKEYSINSLOT', keySlot(foreign))).toBe(0);
      expect(await here.command('CLUSTER', 'COUNTKEYSINSLOT', keySlot(foreign))).toBe(0);
      expect(await client.mget(windowKey(mine, 60), windowKey(mine, 3600))).toEqual(['2', '2']);
    } finally {
      client.disconnect();
    }
  });
});
