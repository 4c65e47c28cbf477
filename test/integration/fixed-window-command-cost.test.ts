// The Redis work of lua/fixed_window.lua per key (issue 20: Redis CPU per decision). Redis'
// own command statistics count what the script calls; the counts are exact, unlike CPU time
// on a shared machine. What the script answers and stores is pinned by lua-fixed-window.test.ts
// and the algorithm traces; this suite pins only how many commands it takes.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LimitCheck } from '../../src/limiter/limiter';
import { readLuaScript } from '../../src/limiter/redis/lua-script';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { fixedWindowKey } from '../helpers/fixed-window-value';
import { standaloneTarget, type ScriptTarget } from '../helpers/script-targets';

const WINDOW_S = 60;
const WINDOW_MS = WINDOW_S * 1000;

/** Calls of each command since the last CONFIG RESETSTAT, from INFO commandstats. */
async function commandCalls(t: ScriptTarget): Promise<Record<string, number>> {
  const info = String(await t.client.info('commandstats'));
  const calls: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) calls[m[1]!] = Number(m[2]);
  return calls;
}

let t: ScriptTarget;

beforeAll(async () => {
  t = await standaloneTarget({ fixed_window: readLuaScript('fixed_window'), limit_list: readLuaScript('limit_list') });
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

/** The commands that `run` makes the scripts call (EVALSHA itself left out). */
async function commandsOf(run: () => Promise<unknown>): Promise<Record<string, number>> {
  await t.client.config('RESETSTAT');
  await run();
  const calls = await commandCalls(t);
  delete calls.evalsha;
  delete calls['config|resetstat'];
  return calls;
}

describe('fixed_window.lua: Redis commands per key', () => {
  const sha = (): string => t.sha.fixed_window!;

  /** One count-mode call of `keys`, one hit each, at the pinned time `now`. */
  const count = (keys: readonly string[], now: number) =>
    t.client.evalsha(
      sha(),
      keys.length,
      ...keys.map((k) => fixedWindowKey(k, WINDOW_S, now)),
      'count',
      ...keys.flatMap(() => [1, 1_000_000, WINDOW_S]),
      now,
    );

  it("a hit in a window already counted is one INCRBY, the window's expiry kept as it is", async () => {
    const edge = (Math.floor(Date.now() / WINDOW_MS) + 10) * WINDOW_MS;
    const keys = Array.from({ length: 5 }, (_, i) => `cost:{${randomUUID()}}:${i}`);
    for (const key of keys) await count([key], edge + 1);
    const windowKeys = keys.map((k) => fixedWindowKey(k, WINDOW_S, edge));
    const expiries = await Promise.all(windowKeys.map((k) => t.client.call('PEXPIRETIME', k)));
    const calls = await commandsOf(async () => {
      for (let n = 0; n < 4; n++) await count(keys, edge + 100 + n);
    });
    // 4 calls × 5 keys: the reference's INCRBY without its EXPIRE.
    expect(calls).toEqual({ incrby: 20 });
    expect(await Promise.all(windowKeys.map((k) => t.client.call('PEXPIRETIME', k)))).toEqual(expiries);
    expect(expiries.every((e) => e === edge + 2 * WINDOW_MS)).toBe(true);
  });

  it("the first hit of a window is the reference's INCRBY and expiry; a window longer than a minute also reads an older floodgate's key once", async () => {
    const edge = (Math.floor(Date.now() / WINDOW_MS) + 20) * WINDOW_MS;
    const fresh = `cost:{${randomUUID()}}:fresh`;
    const rolled = `cost:{${randomUUID()}}:rolled`;
    const hourly = `cost:{${randomUUID()}}:hourly`;
    await count([rolled], edge - 1);
    const calls = await commandsOf(async () => {
      await count([fresh], edge + 5);
      await count([rolled], edge + 5);
    });
    expect(calls).toEqual({ incrby: 2, pexpireat: 2 });
    expect(await t.client.call('PEXPIRETIME', fixedWindowKey(fresh, WINDOW_S, edge))).toBe(edge + 2 * WINDOW_MS);
    expect(await t.client.call('PEXPIRETIME', fixedWindowKey(rolled, WINDOW_S, edge))).toBe(edge + 2 * WINDOW_MS);
    // The window before keeps its own key and expiry.
    expect(await t.client.call('PEXPIRETIME', fixedWindowKey(rolled, WINDOW_S, edge - 1))).toBe(edge + WINDOW_MS);

    const hour = 3_600_000;
    const hourEdge = (Math.floor(Date.now() / hour) + 1) * hour;
    const hourCalls = await commandsOf(async () => {
      await t.client.evalsha(sha(), 1, fixedWindowKey(hourly, 3600, hourEdge), 'count', 1, 1_000_000, 3600, hourEdge + 5);
      await t.client.evalsha(sha(), 1, fixedWindowKey(hourly, 3600, hourEdge), 'count', 1, 1_000_000, 3600, hourEdge + 6);
    });
    expect(hourCalls).toEqual({ incrby: 2, get: 1, pexpireat: 1 });
  });

  it('a look is one GET a key', async () => {
    const edge = (Math.floor(Date.now() / WINDOW_MS) + 30) * WINDOW_MS;
    const [counted, fresh] = [`cost:{${randomUUID()}}:counted`, `cost:{${randomUUID()}}:fresh`];
    await count([counted], edge + 1);
    const calls = await commandsOf(() =>
      Promise.all([
        t.client.evalsha(sha(), 1, fixedWindowKey(counted, WINDOW_S, edge), 'look', 1, 1_000_000, WINDOW_S, edge + 2),
        t.client.evalsha(sha(), 1, fixedWindowKey(fresh, WINDOW_S, edge), 'look', 1, 1_000_000, WINDOW_S, edge + 2),
      ]),
    );
    expect(calls).toEqual({ get: 2 });
    expect(await t.client.exists(fixedWindowKey(fresh, WINDOW_S, edge))).toBe(0);
  });
});

describe('limit_list.lua: Redis commands per fixed-window key of a list', () => {
  /** One count-mode call of one list of fixed windows of 60 s and 3600 s with `limits`, `hits` each. */
  const list = (keys: readonly [string, string], limits: readonly [number, number], hits: number, now: number) =>
    t.client.evalsha(
      t.sha.limit_list!,
      2,
      fixedWindowKey(keys[0], 60, now),
      fixedWindowKey(keys[1], 3600, now),
      'count',
      2,
      1,
      hits,
      limits[0],
      60,
      0,
      1,
      hits,
      limits[1],
      3600,
      0,
      now,
    );

  it('an admitted list is one INCRBY a key; a refused one takes its charges back, leaving no count and no new key', async () => {
    const edge = (Math.floor(Date.now() / 3_600_000) + 1) * 3_600_000;
    const tag = randomUUID();
    const keys = [`list:{${tag}}:burst`, `list:{${tag}}:daily`] as const;
    await list(keys, [100, 100], 1, edge + 1);
    expect(await commandsOf(() => list(keys, [100, 100], 1, edge + 2))).toEqual({ incrby: 2 });
    // Refused by the daily limit (2 + 5 > 5): both charges taken back.
    expect(await commandsOf(() => list(keys, [100, 5], 5, edge + 3))).toEqual({ incrby: 2, decrby: 2 });
    const windowKeys = [fixedWindowKey(keys[0], 60, edge), fixedWindowKey(keys[1], 3600, edge)];
    expect(await t.client.mget(...windowKeys)).toEqual(['2', '2']);
    // A refused list in a window not counted yet leaves no key behind.
    const fresh = [`list:{${tag}}:burst2`, `list:{${tag}}:daily2`] as const;
    // Each first hit's key is removed whole: no expiry set, nothing taken back (the hour's key
    // reads an older floodgate's value once, as any first hit of a window over a minute).
    expect(await commandsOf(() => list(fresh, [100, 0], 1, edge + 4))).toEqual({ incrby: 2, get: 1, del: 2 });
    expect(await t.client.exists(fixedWindowKey(fresh[0], 60, edge), fixedWindowKey(fresh[1], 3600, edge))).toBe(0);
  });
});

describe('a rate_limits list of fixed windows through RedisLimiter: Redis commands per list', () => {
  const HOUR_MS = 3_600_000;

  /** One request's list of a per-minute limit of `perMinute` and a per-hour limit of `perHour`, one hit, on counter `id`. */
  const listChecks = (id: string, perMinute: number, perHour = 100): LimitCheck[] => [
    {
      counter: { domain: 'cost', entries: [{ key: 'id', value: id }] },
      spec: { algorithm: 'fixed_window', limit: perMinute, windowSeconds: 60, burst: perMinute },
      hits: 1,
      listSize: 2,
    },
    {
      counter: { domain: 'cost', entries: [{ key: 'id', value: id }] },
      spec: { algorithm: 'fixed_window', limit: perHour, windowSeconds: 3600, burst: perHour },
      hits: 1,
    },
  ];

  it('an admitted list is one INCRBY a counter; once a limit refuses, the counters after it are only read', async () => {
    const edge = (Math.floor(Date.now() / HOUR_MS) + 2) * HOUR_MS;
    let now = edge + 1;
    const limiter = new RedisLimiter({ client: t.client, keyPrefix: `cost_${randomUUID()}_`, pinnedNow: () => now });
    const id = randomUUID();
    const check = (perMinute: number) =>
      limiter.check(listChecks(id, perMinute), { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false });
    // The limiter is not closed: it shares the suite's client.
    await check(2);
    now += 1;
    const admitted = await commandsOf(() => check(2));
    expect(admitted).toEqual({ incrby: 2 });
    // The minute's 2 are spent: the first limit refuses, its charge is taken back, and the
    // hour's counter is read, not charged and taken back.
    now += 1;
    let results: Awaited<ReturnType<typeof check>> = [];
    const refused = await commandsOf(async () => {
      results = await check(2);
    });
    expect(results.map((r) => [r.allowed, r.used])).toEqual([
      [false, 2],
      [true, 2],
    ]);
    expect(refused).toEqual({ incrby: 1, decrby: 1, get: 1 });
  });

  it("a list refused after charging a window's first hit removes that key: no expiry set, nothing taken back", async () => {
    const edge = (Math.floor(Date.now() / HOUR_MS) + 3) * HOUR_MS;
    let now = edge + 1;
    const prefix = `cost_${randomUUID()}_`;
    const limiter = new RedisLimiter({ client: t.client, keyPrefix: prefix, pinnedNow: () => now });
    const id = randomUUID();
    const check = () => limiter.check(listChecks(id, 100, 2), { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false });
    // An admitted first hit of both windows: each INCRBY and its expiry, one window past its end.
    expect(await commandsOf(check)).toEqual({ incrby: 2, pexpireat: 2, get: 1 });
    const base = `${prefix}rl:{cost:id=${id}}:fixed_window`;
    expect(await t.client.call('PEXPIRETIME', fixedWindowKey(`${base}:60`, 60, edge))).toBe(edge + 120_000);
    expect(await t.client.call('PEXPIRETIME', fixedWindowKey(`${base}:3600`, 3600, edge))).toBe(edge + 2 * HOUR_MS);
    await check();
    // The next minute: its first hit is charged, then the hour's 2 refuse the list.
    now += 60_000;
    let results: Awaited<ReturnType<typeof check>> = [];
    const refused = await commandsOf(async () => {
      results = await check();
    });
    expect(results.map((r) => [r.allowed, r.used])).toEqual([
      [true, 0],
      [false, 2],
    ]);
    expect(refused).toEqual({ incrby: 2, decrby: 1, del: 1 });
    // The minute's key of the refused list is gone; the hour's and the first minute's remain.
    expect((await t.client.keys(`${prefix}*`)).sort()).toEqual(
      [fixedWindowKey(`${base}:3600`, 3600, edge), fixedWindowKey(`${base}:60`, 60, edge)].sort(),
    );
  });
});
