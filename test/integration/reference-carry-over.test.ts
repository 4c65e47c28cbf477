// Issue 30, part 2: leaving the reference's key layout without a reset. With floodgate's own
// layout (REDIS_KEY_LAYOUT=floodgate, the default), a fixed window of a rule the reference can
// express starts, in floodgate's own key, from the count the reference's key
// (referenceWindowKey) holds for that same window. The whole server in this process, real gRPC,
// real Redis (one server, a per-second one, and a 3-master cluster, where the two keys lie in
// different slots). Counts are set by the test in the reference's key, as the reference (or
// floodgate in the shared layout) leaves them.
import Redis, { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { referenceWindowKey } from '../../src/limiter/reference-key';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { sleep } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { scanKeys, uniquePrefix, type RedisNode } from './redis-backend-helpers';

const RULES = {
  'd.yaml': `
domain: d
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: sec
    rate_limit: { unit: second, requests_per_unit: 10 }
`,
};
const user = (value: string) => ({ domain: 'd', entries: [{ key: 'user', value }] });

/** Returns once the window of `windowSeconds` that holds now has at least `marginMs` left (bounded by one window). */
async function awayFromEdge(windowSeconds: number, marginMs: number): Promise<void> {
  const w = windowSeconds * 1000;
  const left = w - (Date.now() % w);
  if (left < marginMs) await sleep(left + 50);
}

/** The codes of `n` calls for `value`, one after another. */
async function codes(app: TestApp, value: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push((await app.client.shouldRateLimit(oneDescriptor('d', { user: value }))).overall_code);
  return out;
}

const admitted = (list: readonly string[]) => list.filter((c) => c === 'OK').length;

/** GET calls `node` has served so far (INFO commandstats). */
async function gets(node: RedisNode): Promise<number> {
  const info = String(await node.command('INFO', 'commandstats'));
  return Number(/cmdstat_get:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

describe('carry-over from the reference key layout, one Redis (issue 30)', () => {
  let redis: RedisProcess;
  let perSecond: RedisProcess;
  let admin: Redis;
  beforeAll(async () => {
    [redis, perSecond] = await Promise.all([startStandalone(), startStandalone()]);
    admin = new Redis({ port: redis.port, lazyConnect: true });
    await admin.connect();
  }, 60_000);
  afterAll(async () => {
    await admin?.quit();
    await Promise.all([redis?.stop(), perSecond?.stop()]);
  });

  test('7 counted in the reference key of the hour: 3 more admitted, then OVER_LIMIT; the own key holds every hit', async () => {
    const prefix = uniquePrefix('carry');
    const app = await startTestApp(RULES, { BACKEND_TYPE: 'redis', REDIS_URL: `127.0.0.1:${redis.port}`, CACHE_KEY_PREFIX: prefix });
    try {
      await awayFromEdge(3600, 60_000);
      await admin.set(referenceWindowKey(prefix, user('alice'), 3600, Date.now()), '7', 'EX', 3600);
      expect(await codes(app, 'alice', 5)).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);
      const own = (await scanKeys(redis, prefix)).filter((k) => k.startsWith(prefix + 'rl:'));
      expect(own).toHaveLength(1);
      expect(await admin.get(own[0]!)).toBe('12');
      // The reference's key is left as it was: read, never written.
      expect(await admin.get(referenceWindowKey(prefix, user('alice'), 3600, Date.now()))).toBe('7');
    } finally {
      await app.stop();
    }
  });

  test('a window floodgate already counts in keeps its own count: the reference key is not added twice', async () => {
    const prefix = uniquePrefix('own');
    const app = await startTestApp(RULES, { BACKEND_TYPE: 'redis', REDIS_URL: `127.0.0.1:${redis.port}`, CACHE_KEY_PREFIX: prefix });
    const other = await startTestApp(RULES, { BACKEND_TYPE: 'redis', REDIS_URL: `127.0.0.1:${redis.port}`, CACHE_KEY_PREFIX: prefix });
    try {
      await awayFromEdge(3600, 60_000);
      await admin.set(referenceWindowKey(prefix, user('bob'), 3600, Date.now()), '7', 'EX', 3600);
      // One pod carries 7 and counts 2; the other, seeing the reference key later, must not add 7 again.
      expect(await codes(app, 'bob', 2)).toEqual(['OK', 'OK']);
      expect(await codes(other, 'bob', 3)).toEqual(['OK', 'OVER_LIMIT', 'OVER_LIMIT']);
    } finally {
      await Promise.all([app.stop(), other.stop()]);
    }
  });

  test('two pods whose first hits of the window race: exactly 3 admitted of 24', async () => {
    const prefix = uniquePrefix('race');
    const pods = await Promise.all(
      [1, 2].map(() => startTestApp(RULES, { BACKEND_TYPE: 'redis', REDIS_URL: `127.0.0.1:${redis.port}`, CACHE_KEY_PREFIX: prefix })),
    );
    try {
      await awayFromEdge(3600, 60_000);
      await admin.set(referenceWindowKey(prefix, user('carol'), 3600, Date.now()), '7', 'EX', 3600);
      const calls = Array.from({ length: 24 }, (_, i) => (pods[i % 2] as TestApp).client.shouldRateLimit(oneDescriptor('d', { user: 'carol' })));
      const answers = await Promise.all(calls);
      expect(admitted(answers.map((a) => a.overall_code))).toBe(3);
    } finally {
      await Promise.all(pods.map((p) => p.stop()));
    }
  });

  test('REDIS_KEY_LAYOUT_CARRY_OVER=0 opts out: counters start at zero', async () => {
    const prefix = uniquePrefix('off');
    const app = await startTestApp(RULES, {
      BACKEND_TYPE: 'redis',
      REDIS_URL: `127.0.0.1:${redis.port}`,
      CACHE_KEY_PREFIX: prefix,
      REDIS_KEY_LAYOUT_CARRY_OVER: '0',
    });
    try {
      await awayFromEdge(3600, 60_000);
      await admin.set(referenceWindowKey(prefix, user('dave'), 3600, Date.now()), '7', 'EX', 3600);
      expect(admitted(await codes(app, 'dave', 12))).toBe(10);
    } finally {
      await app.stop();
    }
  });

  test('cost: one GET more per window and process than with carry-over off, not one per hit', async () => {
    // The script itself GETs once on a long window's first hit (an older floodgate's key,
    // lua/lib/fixed_window_step.lua): the control, opted out, runs the same traffic.
    const delta = async (env: Record<string, string>): Promise<number> => {
      const prefix = uniquePrefix('cost');
      const app = await startTestApp(RULES, { BACKEND_TYPE: 'redis', REDIS_URL: `127.0.0.1:${redis.port}`, CACHE_KEY_PREFIX: prefix, ...env });
      try {
        await awayFromEdge(3600, 60_000);
        const before = await gets(redis);
        for (const value of ['e1', 'e2', 'e3']) await codes(app, value, 8);
        return (await gets(redis)) - before;
      } finally {
        await app.stop();
      }
    };
    const off = await delta({ REDIS_KEY_LAYOUT_CARRY_OVER: '0' });
    const on = await delta({});
    expect(on - off).toBe(3);
  });

  test('a window that begins after REDIS_KEY_LAYOUT_CARRY_OVER has passed since start carries nothing and costs no GET', async () => {
    const prefix = uniquePrefix('late');
    const app = await startTestApp(RULES, {
      BACKEND_TYPE: 'redis',
      REDIS_URL: `127.0.0.1:${redis.port}`,
      CACHE_KEY_PREFIX: prefix,
      REDIS_KEY_LAYOUT_CARRY_OVER: '1ms',
    });
    try {
      // Two seconds on: every second's window begins after start + 1 ms.
      await sleep(2000);
      const now = Date.now();
      const sec = { domain: 'd', entries: [{ key: 'sec', value: 's' }] };
      for (let s = 0; s < 5; s++) await admin.set(referenceWindowKey(prefix, sec, 1, now + s * 1000), '7', 'EX', 60);
      const before = await gets(redis);
      const answer = await app.client.shouldRateLimit(oneDescriptor('d', { sec: 's' }, { hits_addend: { value: 4 } }));
      expect(answer.overall_code).toBe('OK');
      expect(await gets(redis)).toBe(before);
    } finally {
      await app.stop();
    }
  });

  // Windows of a minute or less carry nothing (as lua/lib/fixed_window_step.lua's older-layout
  // carry): no GET before every first hit of a second's window; the reference's count is not read.
  test('a per-second limit carries nothing: its window counts apart, no GET sent', async () => {
    const prefix = uniquePrefix('ps');
    const app = await startTestApp(RULES, {
      BACKEND_TYPE: 'redis',
      REDIS_URL: `127.0.0.1:${redis.port}`,
      REDIS_PERSECOND: 'true',
      REDIS_PERSECOND_URL: `127.0.0.1:${perSecond.port}`,
      CACHE_KEY_PREFIX: prefix,
    });
    try {
      // 7 in the reference's key of every second the call may fall in: 7 + 4 > 10 if carried.
      const now = Date.now();
      const sec = { domain: 'd', entries: [{ key: 'sec', value: 's' }] };
      for (let s = 0; s < 10; s++) await perSecond.command('SET', referenceWindowKey(prefix, sec, 1, now + s * 1000), '7', 'EX', 60);
      const getsBefore = [await getCalls(redis), await getCalls(perSecond)];
      const answer = await app.client.shouldRateLimit(oneDescriptor('d', { sec: 's' }, { hits_addend: { value: 4 } }));
      expect(answer.overall_code).toBe('OK');
      expect([await getCalls(redis), await getCalls(perSecond)]).toEqual(getsBefore);
    } finally {
      await app.stop();
    }
  });
});

describe('carry-over from the reference key layout, a 3-master Redis Cluster (issue 30)', () => {
  let cluster: RedisClusterHarness;
  let admin: Cluster;
  beforeAll(async () => {
    cluster = await startCluster({ replicasPerMaster: 0 });
    admin = new Cluster([...cluster.startupNodes], { lazyConnect: true });
    await admin.connect();
  }, 120_000);
  afterAll(async () => {
    await admin?.quit();
    await cluster?.stop();
  });

  test('30 clients, their reference keys and own keys in other slots: 3 more admitted for each', async () => {
    const prefix = uniquePrefix('cl');
    const app = await startTestApp(RULES, { BACKEND_TYPE: 'redis', REDIS_TYPE: 'cluster', REDIS_URL: cluster.seeds, CACHE_KEY_PREFIX: prefix });
    try {
      await awayFromEdge(3600, 120_000);
      const values = Array.from({ length: 30 }, (_, i) => `u${i}`);
      for (const v of values) await admin.set(referenceWindowKey(prefix, user(v), 3600, Date.now()), '7', 'EX', 3600);
      const results = await Promise.all(values.map((v) => codes(app, v, 5)));
      for (const r of results) expect(r).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);
      // Every own key on its own master, holding 7 + 5.
      let own = 0;
      for (const node of cluster.masters()) {
        for (const key of await scanKeys(node, prefix + 'rl:')) {
          own++;
          expect(await node.command('GET', key)).toBe('12');
        }
      }
      expect(own).toBe(30);
    } finally {
      await app.stop();
    }
  });

  test('STOP mode, one request of two counters in different slots: judged on the carried counts', async () => {
    const prefix = uniquePrefix('stop');
    const app = await startTestApp(RULES, {
      BACKEND_TYPE: 'redis',
      REDIS_TYPE: 'cluster',
      REDIS_URL: cluster.seeds,
      CACHE_KEY_PREFIX: prefix,
      STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true',
    });
    try {
      await awayFromEdge(3600, 120_000);
      await admin.set(referenceWindowKey(prefix, user('sa'), 3600, Date.now()), '7', 'EX', 3600);
      await admin.set(referenceWindowKey(prefix, user('sb'), 3600, Date.now()), '9', 'EX', 3600);
      const request = { domain: 'd', descriptors: [{ entries: [{ key: 'user', value: 'sa' }] }, { entries: [{ key: 'user', value: 'sb' }] }] };
      // 7 + 1 and 9 + 1: both within 10; then sb would be 11: over, and only sb is charged.
      expect((await app.client.shouldRateLimit(request)).overall_code).toBe('OK');
      expect((await app.client.shouldRateLimit(request)).overall_code).toBe('OVER_LIMIT');
      const counts: Record<string, string> = {};
      for (const node of cluster.masters()) {
        for (const key of await scanKeys(node, prefix + 'rl:')) counts[/user=(\w+)/.exec(key)![1]!] = String(await node.command('GET', key));
      }
      expect(counts).toEqual({ sa: '8', sb: '11' });
    } finally {
      await app.stop();
    }
  });
});

async function getCalls(server: RedisProcess): Promise<number> {
  const info = String(await server.command('INFO', 'commandstats'));
  return Number(/cmdstat_get:calls=(\d+)/.exec(info)?.[1] ?? 0);
}
