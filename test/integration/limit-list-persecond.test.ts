// Issue 27, "not yet audited": `rate_limits` lists with REDIS_PERSECOND. README.md ("Several
// limits on one descriptor"): "With REDIS_PERSECOND a list stays on the main Redis (one call
// cannot span two servers)". Through RedisLimiter with a main and a per-second standalone Redis,
// on a pinned clock (in 2030: no key expires during the test): a list's per-second limit is
// counted on the main Redis, decided all or nothing with its other limits; a per-second limit
// outside a list goes to the per-second Redis. The consequence README states with it: the same
// counter counted outside the list (a limit override of the same unit) is counted there, apart.
import Redis from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { LimitSpec } from '../../src/domain/limit-spec';
import { counterKey, fixedWindowKey } from '../../src/limiter/counter-key';
import type { LimitCheck } from '../../src/limiter/limiter';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { scanKeys } from './redis-backend-helpers';

const NOW = Date.UTC(2030, 0, 1, 5, 10);
const PREFIX = 'lps_';

let main: RedisProcess;
let perSecond: RedisProcess;
let limiter: RedisLimiter;
beforeAll(async () => {
  [main, perSecond] = await Promise.all([startStandalone(), startStandalone()]);
  limiter = new RedisLimiter({
    client: new Redis({ host: main.host, port: main.port, maxRetriesPerRequest: 1 }),
    perSecondClient: new Redis({ host: perSecond.host, port: perSecond.port, maxRetriesPerRequest: 1 }),
    keyPrefix: PREFIX,
    pinnedNow: () => NOW,
  });
});
afterAll(async () => {
  await limiter?.close();
  await Promise.all([main?.stop(), perSecond?.stop()]);
});

const fixed = (limit: number, windowSeconds: number): LimitSpec => ({ algorithm: 'fixed_window', limit, windowSeconds, burst: limit });
const BURST = fixed(2, 1);
const HOURLY: LimitSpec = { algorithm: 'token_bucket', limit: 3, windowSeconds: 3600, burst: 3 };
const k = { domain: 'ps', entries: [{ key: 'k', value: 'x' }] };
const s = { domain: 'ps', entries: [{ key: 's', value: 'x' }] };
const list = (specs: LimitSpec[], hits = 1): LimitCheck[] =>
  specs.map((spec, j) => ({ counter: k, spec, hits, ...(j === 0 && { listSize: specs.length }) }));
const check = (checks: LimitCheck[]) => limiter.check(checks, { deadline: Date.now() + 10_000, stopIncrementWhenOverLimit: false });
const burstKey = (prefix = PREFIX) => fixedWindowKey(counterKey(prefix, k, BURST), 1, NOW);

describe.each([
  ['fixed windows only (lua/fixed_window_list.lua)', [BURST, fixed(3, 3600)]],
  ['mixed algorithms (lua/limit_list.lua)', [BURST, HOURLY]],
])('a list with a per-second limit under REDIS_PERSECOND: %s', (_name, specs) => {
  test('is counted whole on the main Redis, all or nothing; a per-second limit alone goes to the per-second Redis', async () => {
    await Promise.all([main.command('FLUSHALL'), perSecond.command('FLUSHALL')]);
    // Two 1-hit lists and a single per-second limit, in one request each time.
    for (let i = 0; i < 2; i++) {
      const results = await check([...list(specs), { counter: s, spec: fixed(5, 1), hits: 1 }]);
      expect(results.map((r) => r.allowed)).toEqual([true, true, true]);
    }
    // The third: the per-second limit denies, so the hour's is not charged either.
    const third = await check(list(specs));
    expect(third.map((r) => r.allowed)).toEqual([false, true]);
    const onMain = (await scanKeys(main, PREFIX)).sort();
    const onPerSecond = await scanKeys(perSecond, PREFIX);
    expect(onMain).toContain(burstKey());
    expect(onMain.every((key) => key.includes('{ps:k=x}'))).toBe(true);
    expect(onPerSecond).toEqual([fixedWindowKey(counterKey(PREFIX, s, fixed(5, 1)), 1, NOW)]);
    expect(Number(await main.command('GET', burstKey()))).toBe(2);
    // The hour's limit (peeked): the two admitted hits, not the refused list's.
    const [hour] = await check([{ counter: k, spec: specs[1]!, hits: 0 }]);
    expect(hour?.used).toBe(2);
  });
});

test('the same per-second counter counted outside a list (a limit override of the same unit) is counted on the per-second Redis, apart', async () => {
  await Promise.all([main.command('FLUSHALL'), perSecond.command('FLUSHALL')]);
  await check(list([BURST, fixed(3, 3600)]));
  // A limit override 2/SECOND on k=x counts the fixed window of 1 s of k=x: the list's burst counter.
  const alone = await check([{ counter: k, spec: BURST, hits: 1 }]);
  expect(alone[0]).toMatchObject({ allowed: true, used: 1 });
  expect(Number(await main.command('GET', burstKey()))).toBe(1);
  expect(Number(await perSecond.command('GET', burstKey()))).toBe(1);
});
