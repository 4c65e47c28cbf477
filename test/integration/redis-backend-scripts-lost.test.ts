// Done when: the Lua script vanishing from Redis in the middle of a run (SCRIPT FLUSH on every
// master; a Redis restart on the same port) does not stop the service: after a flush every call
// goes on succeeding with exact counts, and after a restart (BACKEND_FAILURE_MODE=error) calls
// may fail with UNAVAILABLE only while Redis is away, then all succeed with counts starting fresh.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { sleep } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge, oneRule, timedCall, type CallOutcome, type RedisNode } from './redis-backend-helpers';

const LIMIT = 100_000;
const RULES = { 'scripts.yaml': oneRule('scripts', 'k', LIMIT, 'hour') };
const VALUES = Array.from({ length: 12 }, (_, i) => `v${i}`);

let standalone: RedisProcess;
let cluster: RedisClusterHarness;
beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 1 })]);
});
afterAll(async () => {
  await Promise.all([standalone?.stop(), cluster?.stop()]);
});

/** One round: a call for every value at once (several script calls per pipeline). */
function round(t: TestApp, deadlineMs = 2000): Promise<CallOutcome[]> {
  return Promise.all(VALUES.map((k) => timedCall(t.client, oneDescriptor('scripts', { k }), deadlineMs)));
}

describe.each([
  { name: 'standalone', env: () => ({ REDIS_URL: standalone.url }), masters: (): RedisNode[] => [standalone] },
  { name: 'cluster', env: () => ({ REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds }), masters: (): RedisNode[] => cluster.masters() },
])('SCRIPT FLUSH in the middle of a run ($name)', (d) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(RULES, { ...d.env(), BACKEND_FAILURE_MODE: 'error', CACHE_KEY_PREFIX: `flush_${d.name}_` });
  });
  afterAll(async () => {
    await t?.stop();
  });

  test('every call succeeds and the counts go on exactly', async () => {
    await awayFromWindowEdge(3600, 30_000);
    let expectedRemaining = LIMIT;
    for (let r = 0; r < 10; r++) {
      if (r === 3 || r === 6) {
        // The script cache of every master is emptied: the next EVALSHA gets NOSCRIPT.
        for (const m of d.masters()) expect(await m.command('SCRIPT', 'FLUSH')).toBe('OK');
      }
      const outcomes = await round(t);
      expectedRemaining--;
      expect(
        outcomes.map((o) => `${o.code} ${o.remaining}`),
        `round ${r}`,
      ).toEqual(VALUES.map(() => `OK ${expectedRemaining}`));
    }
  });
});

describe('Redis restarted in the middle of a run (standalone, BACKEND_FAILURE_MODE=error)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(RULES, { REDIS_URL: standalone.url, BACKEND_FAILURE_MODE: 'error', CACHE_KEY_PREFIX: 'restart_' });
  });
  afterAll(async () => {
    await t?.stop();
  });

  test('calls fail only as UNAVAILABLE while Redis is away, then all succeed with fresh counts', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const before: CallOutcome[][] = [];
    for (let r = 0; r < 3; r++) before.push(await round(t));
    expect(before.map((rnd) => rnd.map((o) => o.remaining))).toEqual([0, 1, 2].map((r) => VALUES.map(() => LIMIT - 1 - r)));

    // Calls keep flowing (one round every 20 ms) while Redis restarts.
    const during: CallOutcome[][] = [];
    let restarting = true;
    const flow = (async () => {
      for (let i = 0; restarting && i < 500; i++) {
        during.push(await round(t, 200));
        await sleep(20);
      }
    })();
    const restartStarted = Date.now();
    await standalone.restart();
    const backAt = Date.now();
    // Bounded: within 3 s of Redis being back, a whole round succeeds.
    let recoveredAt: number | undefined;
    while (recoveredAt === undefined && Date.now() - backAt < 3000) {
      const last = during[during.length - 1];
      if (last && during.length > 0 && last.every((o) => o.code === 'OK')) recoveredAt = Date.now();
      else await sleep(20);
    }
    restarting = false;
    await flow;
    expect(recoveredAt, 'no successful round within 3 s of Redis being back').toBeDefined();

    const failures = during.flat().filter((o) => o.code !== 'OK');
    expect([...new Set(failures.map((o) => o.code))].filter((c) => c !== 'UNAVAILABLE')).toEqual([]);
    // Once back, everything succeeds, every time, and the counts started fresh: each value's
    // successful calls after the restart count down from LIMIT - 1 without a gap.
    const after: CallOutcome[][] = [];
    for (let r = 0; r < 5; r++) after.push(await round(t));
    expect(after.flat().filter((o) => o.code !== 'OK')).toEqual([]);
    for (let i = 0; i < VALUES.length; i++) {
      const seen = [...before, ...during, ...after]
        .map((rnd) => rnd[i]!)
        .filter((o) => o.code === 'OK')
        .map((o) => o.remaining!);
      // Counting down, one reset to LIMIT - 1 (the restart), counting down again by one per call.
      const reset = seen.findIndex((r, j) => j > 0 && r > seen[j - 1]!);
      expect(reset, `${VALUES[i]}: ${seen.join(' ')}`).toBeGreaterThanOrEqual(3);
      expect(seen.slice(reset), VALUES[i]).toEqual(seen.slice(reset).map((_, j) => LIMIT - 1 - j));
      expect(seen.slice(0, reset), VALUES[i]).toEqual(seen.slice(0, reset).map((_, j) => LIMIT - 1 - j));
    }
    console.info(
      `restart: Redis away ${backAt - restartStarted} ms; ${failures.length} UNAVAILABLE of ${during.flat().length} calls during it; ` +
        `a full round succeeded ${recoveredAt! - backAt} ms after Redis was back`,
    );
  });
});
