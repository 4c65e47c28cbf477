// Done when: the server with REDIS_TYPE=SENTINEL and REDIS_URL=mymaster,127.0.0.1:<sentinelPort>
// counts correctly (an exact countdown, kept on the master). Also: after a sentinel failover the
// service finds the new master by itself.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startSentinel, type SentinelHarness } from '../harness/redis-servers';
import { sleep } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge, oneRule, scanKeys, timedCall, type CallOutcome } from './redis-backend-helpers';
import { fixedWindowCount, fixedWindowKey } from '../helpers/fixed-window-value';

let sentinel: SentinelHarness;
let t: TestApp;
beforeAll(async () => {
  sentinel = await startSentinel({ masterName: 'mymaster' });
  t = await startTestApp(
    { 'sent.yaml': oneRule('sent', 'user', 5, 'hour') },
    { REDIS_TYPE: 'SENTINEL', REDIS_URL: `mymaster,${sentinel.sentinels}`, CACHE_KEY_PREFIX: 'sent_' },
  );
});
afterAll(async () => {
  await t?.stop();
  await sentinel?.stop();
});

describe('REDIS_TYPE=SENTINEL', () => {
  test('exact countdown through the master the sentinel names, then OVER_LIMIT', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const request = oneDescriptor('sent', { user: 'alice' });
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await t.client.shouldRateLimit(request);
      expect(res.overall_code).toBe('OK');
      remaining.push(res.statuses[0]!.limit_remaining);
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);
    const over = await t.client.shouldRateLimit(request);
    expect(over.overall_code).toBe('OVER_LIMIT');
    expect(over.statuses[0]!.limit_remaining).toBe(0);
    // The counter lives on the master (and was replicated), with its TTL.
    const [key] = await scanKeys(sentinel.master(), 'sent_');
    // Its window's key (issue 20): at least 30 s from the window's end, still the window of now.
    expect(key).toBe(fixedWindowKey('sent_rl:{sent:user=alice}:fixed_window:3600', 3600, Date.now()));
    expect(await fixedWindowCount(sentinel.master(), key!)).toBe(6);
    expect(Number(await sentinel.master().command('PTTL', key!))).toBeGreaterThan(0);
  });

  test('after the master is killed and the sentinel promotes the replica, calls succeed again', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const request = oneDescriptor('sent', { user: 'bob' });
    expect((await t.client.shouldRateLimit(request)).statuses[0]!.limit_remaining).toBe(4);
    // Replication is asynchronous: wait (bounded) until the replica has the hit.
    for (let i = 0; i < 100; i++) {
      const keys = await scanKeys(sentinel.replica(), 'sent_rl:{sent:user=bob}');
      if (keys.length === 1 && (await fixedWindowCount(sentinel.replica(), keys[0]!)) === 1) break;
      await sleep(20);
    }
    const killedAt = Date.now();
    const promoted = await sentinel.killMasterAndWaitForFailover();
    const failedOverAt = Date.now();
    let ok: CallOutcome | undefined;
    for (let i = 0; i < 200 && Date.now() - failedOverAt < 30_000; i++) {
      const res = await timedCall(t.client, request, 2000);
      if (res.code === 'OK') {
        ok = res;
        break;
      }
      await sleep(50);
    }
    expect(ok, 'no successful call within 30 s of the failover').toBeDefined();
    // The count survived on the promoted replica (1 before + this call), and goes on exactly.
    expect(ok!.remaining).toBe(3);
    expect((await t.client.shouldRateLimit(request)).statuses[0]!.limit_remaining).toBe(2);
    expect(promoted.port).toBe(sentinel.master().port);
    console.info(`sentinel: failover took ${failedOverAt - killedAt} ms; first OK ${Date.now() - failedOverAt} ms after it`);
  });
});
