// Done when: with REDIS_PERSECOND=true and a second standalone Redis, SECOND-unit counters go to
// the per-second Redis and all others to the main one (keys checked on each server).
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { within } from '../harness/wait';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge, scanKeys } from './redis-backend-helpers';
import { fixedWindowKey } from '../helpers/fixed-window-value';

const RULES = `
domain: ps
descriptors:
  - key: s
    rate_limit: { unit: second, requests_per_unit: 3 }
  - key: m
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: h
    rate_limit: { unit: hour, requests_per_unit: 3 }
`;

let main: RedisProcess;
let perSecond: RedisProcess;
let t: TestApp;
beforeAll(async () => {
  [main, perSecond] = await Promise.all([startStandalone(), startStandalone()]);
  t = await startTestApp(
    { 'ps.yaml': RULES },
    {
      REDIS_URL: main.url,
      REDIS_PERSECOND: 'true',
      REDIS_PERSECOND_URL: perSecond.url,
      CACHE_KEY_PREFIX: 'ps_',
      REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true',
    },
  );
});
afterAll(async () => {
  await t?.stop();
  await Promise.all([main?.stop(), perSecond?.stop()]);
});

describe('REDIS_PERSECOND', () => {
  test('SECOND counters live on the per-second Redis, the others on the main one', async () => {
    // Both calls of the per-second counter fall into one second: checked by the clock around
    // them, and tried again with fresh counters when a busy machine let a second edge pass
    // between them (bounded), rather than hoping 600 ms are enough.
    let now = 0;
    let value = '';
    let first: Awaited<ReturnType<typeof t.client.shouldRateLimit>> | undefined;
    let second: typeof first;
    for (let attempt = 0; attempt < 20; attempt++) {
      await awayFromWindowEdge(1, 600);
      value = `x${attempt}`;
      const request = {
        domain: 'ps',
        descriptors: ['s', 'm', 'h'].map((key) => ({ entries: [{ key, value }] })),
      };
      now = Date.now();
      first = await t.client.shouldRateLimit(request);
      second = await t.client.shouldRateLimit(request);
      const end = Date.now();
      if (Math.floor(now / 1000) === Math.floor(end / 1000) && Math.floor(now / 60_000) === Math.floor(end / 60_000)) break;
      first = undefined;
    }
    expect(first, 'two calls within one second, in 20 tries').toBeDefined();
    expect(first!.statuses.map((s) => s.limit_remaining)).toEqual([2, 2, 2]);
    expect(second!.statuses.map((s) => s.limit_remaining)).toEqual([1, 1, 1]);

    const mine = (keys: string[]): string[] => keys.filter((k) => k.includes(`=${value}}`));
    const onMain = mine(await scanKeys(main, 'ps_')).sort();
    const onPerSecond = mine(await scanKeys(perSecond, 'ps_'));
    // One key per counter and window (issue 20): the windows of `now`, the calls falling in its second.
    expect(onPerSecond).toEqual([fixedWindowKey(`ps_rl:{ps:s=${value}}:fixed_window:1`, 1, now)]);
    expect(onMain).toEqual([
      fixedWindowKey(`ps_rl:{ps:h=${value}}:fixed_window:3600`, 3600, now),
      fixedWindowKey(`ps_rl:{ps:m=${value}}:fixed_window:60`, 60, now),
    ]);
    const ttl = Number(await perSecond.command('PTTL', onPerSecond[0]!));
    // Either still kept (a fixed window lives until the window after it ends), or expired in the
    // meantime: never without a TTL.
    expect(ttl === -2 || (ttl > 0 && ttl <= 2000)).toBe(true);
    for (const key of onMain) expect(Number(await main.command('PTTL', key))).toBeGreaterThan(0);
  });

  test('with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION, health needs both: the per-second Redis down means NOT_SERVING', async () => {
    expect(await t.client.healthCheck('ratelimit')).toBe('SERVING');
    await perSecond.kill('SIGKILL');
    try {
      await within(10_000, async () => (await t.client.healthCheck('ratelimit')) === 'NOT_SERVING', 'NOT_SERVING');
    } finally {
      await perSecond.restart();
    }
    await within(20_000, async () => (await t.client.healthCheck('ratelimit')) === 'SERVING', 'SERVING');
  });
});
