// lua/reference_window.lua and lib/reference_window_step.lua (REDIS_KEY_LAYOUT=reference, issue
// 30) on a real Redis: the window the key names is the one counted in, whatever Redis TIME says
// at an edge (no key derived from TIME: in a cluster it could lie in another slot), the reset
// measured on Redis TIME within 1 ms .. one window; EXPIRE on every hit with the expiry the
// caller drew; a malformed call changes nothing; STOP mode and lua/stop_request.lua's algorithm 6
// through the limiter.
import Redis from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { readLuaScript } from '../../src/limiter/redis/lua-script';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { referenceWindowKey } from '../../src/limiter/reference-key';
import type { LimitCheck } from '../../src/limiter/limiter';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { awayFromWindowEdge } from '../helpers/windows';

const SOURCE = readLuaScript('reference_window');

/** Whole seconds since `started` (epoch ms), rounded up, plus one for TTL's own rounding. */
const secondsSince = (started: number): number => Math.ceil((Date.now() - started) / 1000) + 1;
const HOUR_MS = 3_600_000;
// A whole hour, in the future of the real clock (keys with an expiry stay).
const START_S = Math.floor(Date.now() / HOUR_MS) * 3600 + 10 * 3600;

describe('lua/reference_window.lua', () => {
  let redis: RedisProcess;
  let client: Redis;
  beforeAll(async () => {
    redis = await startStandalone();
    client = new Redis({ host: redis.host, port: redis.port });
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  const call = (keys: string[], args: (string | number)[]): Promise<number[]> =>
    client.eval(SOURCE, keys.length, ...keys, ...args) as Promise<number[]>;

  test('counts in the window the key names; the reset is that window’s end on Redis’ clock, within 1 ms .. one window', async () => {
    const key = `e_d_user_a_${START_S}`;
    // Redis' clock 200 ms into the next window (this caller's clock behind): counted in the named one, reset 1 ms.
    expect(await call([key], ['count', 2, 10, 3600, 3600, START_S * 1000 + HOUR_MS + 200])).toEqual([2, 1]);
    // Redis' clock 300 ms before the named window (this caller's clock ahead): reset at most one window.
    expect(await call([key], ['count', 1, 10, 3600, 3600, START_S * 1000 - 300])).toEqual([3, HOUR_MS]);
    // In the window: the ms left of it.
    expect(await call([key], ['count', 1, 10, 3600, 3600, START_S * 1000 + 1000])).toEqual([4, HOUR_MS - 1000]);
    expect(await client.keys('e_*')).toEqual([key]);
    expect(await client.get(key)).toBe('4');
  });

  test('EXPIRE on every hit with the expiry the caller drew; hits 0 and look write nothing', async () => {
    const key = `t_d_user_a_${START_S}`;
    const started = Date.now();
    await call([key], ['count', 1, 10, 3600, 3700]);
    // Less only by the seconds that passed since the call (however slow the machine).
    expect(await client.ttl(key)).toBeGreaterThanOrEqual(3700 - secondsSince(started));
    await call([key], ['count', 1, 10, 3600, 3600]);
    expect(await client.ttl(key)).toBeLessThanOrEqual(3600);
    expect(await call([`t_none_${START_S}`], ['count', 0, 10, 3600, 3600])).toEqual([0, expect.any(Number)]);
    expect(await call([`t_none_${START_S}`], ['look', 3, 10, 3600, 3600])).toEqual([0, expect.any(Number)]);
    expect(await client.exists(`t_none_${START_S}`)).toBe(0);
  });

  test('a malformed call is refused whole, nothing written', async () => {
    const keys = [`m_a_${START_S}`, `m_b_${START_S}`];
    await expect(call(keys, ['count', 1, 10, 3600, 3600, 1, 10, 3600, 0])).rejects.toThrow(/reference_window: key 2 needs/);
    await expect(call(keys, ['count', 1, 10, 3600, 3600, 1, 10, 3600, '1e3'])).rejects.toThrow(/reference_window: key 2 needs/);
    await expect(call(keys, ['nope', 1, 10, 3600, 3600])).rejects.toThrow(/mode/);
    expect(await client.keys('m_*')).toEqual([]);
  });

  test('stop: when a counter of the unit would go over, only it is charged (the reference’s STOP rule)', async () => {
    const [a, b] = [`s_a_${START_S}`, `s_b_${START_S}`];
    await client.set(a, 2);
    // One unit of two keys: a (limit 2) would go over, b (limit 5) would not.
    expect(await call([a, b], ['stop', 2, 1, 2, 3600, 3600, 1, 5, 3600, 3600])).toEqual([3, expect.any(Number), 0, expect.any(Number)]);
    expect(await client.get(a)).toBe('3');
    expect(await client.exists(b)).toBe(0);
  });
});

describe('REDIS_KEY_LAYOUT=reference in the limiter', () => {
  let redis: RedisProcess;
  let limiter: RedisLimiter;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startStandalone();
    admin = new Redis({ host: redis.host, port: redis.port });
    limiter = new RedisLimiter({
      client: new Redis({ host: redis.host, port: redis.port }),
      keyPrefix: 'L_',
      keyLayout: 'reference',
      expirationJitterMaxSeconds: 100,
    });
  });
  afterAll(async () => {
    await limiter?.close();
    admin?.disconnect();
    await redis?.stop();
  });

  const shared = (value: string, limit: number): LimitCheck => ({
    counter: { domain: 'd', entries: [{ key: 'user', value }] },
    spec: { algorithm: 'fixed_window', limit, windowSeconds: 3600, burst: limit, shareable: true },
    hits: 1,
  });

  test('EXPIRATION_JITTER_MAX_SECONDS: each key’s expiry is the unit plus a jitter in [0, max)', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const now = Date.now();
    const started = performance.now();
    for (let i = 0; i < 20; i++) await limiter.check([shared(`j${i}`, 10)], { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: false });
    const ttls: number[] = [];
    for (let i = 0; i < 20; i++) ttls.push(await admin.ttl(referenceWindowKey('L_', shared(`j${i}`, 10).counter, 3600, now)));
    const elapsed = Math.ceil((performance.now() - started) / 1000) + 1;
    for (const ttl of ttls) expect(ttl).toBeGreaterThanOrEqual(3600 - elapsed);
    for (const ttl of ttls) expect(ttl).toBeLessThan(3700);
    // Spread by the jitter, far more than by the time the test took.
    expect(Math.max(...ttls) - Math.min(...ttls)).toBeGreaterThan(elapsed);
  });

  test('STOP mode, a shared window beside a limit the reference cannot express: one lua/stop_request.lua call, the shared key charged as the reference charges it', async () => {
    const other: LimitCheck = {
      counter: { domain: 'd', entries: [{ key: 'app', value: 's' }] },
      spec: { algorithm: 'sliding_window', limit: 5, windowSeconds: 3600, burst: 5 },
      hits: 1,
    };
    await awayFromWindowEdge(3600, 30_000);
    const now = Date.now();
    const started = Date.now();
    const codes: boolean[][] = [];
    for (let i = 0; i < 3; i++) {
      const results = await limiter.check([shared('stop', 2), other], { deadline: Date.now() + 5000, stopIncrementWhenOverLimit: true });
      codes.push(results.map((r) => r.allowed));
    }
    expect(codes).toEqual([
      [true, true],
      [true, true],
      [false, true],
    ]);
    const key = referenceWindowKey('L_', shared('stop', 2).counter, 3600, now);
    // The third request: the shared window would go over, so it alone is charged (the reference increments it).
    expect(await admin.get(key)).toBe('3');
    // The unit plus a jitter (0 .. 99 s), less the seconds the test took.
    expect(await admin.ttl(key)).toBeGreaterThanOrEqual(3600 - secondsSince(started));
  });
});
