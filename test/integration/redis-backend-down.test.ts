// Done when: with Redis stopped entirely, every call is answered per BACKEND_FAILURE_MODE within
// 50 ms (client-side, 20 ms deadline as Envoy sends), gRPC health and /healthcheck turn
// NOT_SERVING/500 within about a second (with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION=true; without
// it health stays up, see redis-health-active-connection.test.ts), and come back on their own once Redis is back.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { sleep, timerLateness, within } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { StallMonitor, oneRule, tally, timedCall, uniquePrefix, type CallOutcome } from './redis-backend-helpers';

const RULES = { 'down.yaml': oneRule('down', 'k', 2, 'hour') };
const MODES = ['allow', 'deny', 'local', 'error'] as const;
type Mode = (typeof MODES)[number];
const ENVOY_DEADLINE_MS = 20;
const MAX_LATENCY_MS = 50;

let redis: RedisProcess;
const apps = new Map<Mode, TestApp>();

beforeAll(async () => {
  redis = await startStandalone();
  for (const mode of MODES) {
    apps.set(
      mode,
      await startTestApp(RULES, {
        REDIS_URL: redis.url,
        BACKEND_FAILURE_MODE: mode,
        CACHE_KEY_PREFIX: uniquePrefix(mode),
        REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true',
      }),
    );
  }
});
afterAll(async () => {
  await Promise.all([...apps.values()].map((t) => t.stop()));
  await redis?.stop();
});

async function health(t: TestApp): Promise<{ grpc: string; http: number }> {
  const [grpc, http] = await Promise.all([t.client.healthCheck('ratelimit'), fetch(`${t.httpUrl}/healthcheck`).then((r) => r.status)]);
  return { grpc, http };
}

/** Polls every app's health until all match `want`; returns the time it took (bounded). */
async function waitForHealth(want: { grpc: string; http: number }, timeoutMs: number): Promise<number> {
  return within(
    timeoutMs,
    async () => (await Promise.all([...apps.values()].map(health))).every((h) => h.grpc === want.grpc && h.http === want.http),
    `health to become ${JSON.stringify(want)}`,
  );
}

describe('Redis stopped entirely', () => {
  test('every call is answered per failure mode within 50 ms; health follows Redis down and back up', async () => {
    const app = (m: Mode): TestApp => apps.get(m)!;
    for (const mode of MODES) {
      expect(await health(app(mode))).toEqual({ grpc: 'SERVING', http: 200 });
      const res = await timedCall(app(mode).client, oneDescriptor('down', { k: 'before' }), 1000);
      expect(res).toMatchObject({ code: 'OK', remaining: 1 });
    }

    const stalls = new StallMonitor(10);
    await redis.kill('SIGKILL');
    const stoppedAt = Date.now();
    // Health is watched from the kill on, beside the calls, so that the time it took is the
    // server's, not the calls'. A busy machine delays this process' timers as much as the
    // server's (one process): the bound is the target plus twice a control timer's lateness.
    const lateness = timerLateness();
    const notServing = waitForHealth({ grpc: 'NOT_SERVING', http: 500 }, 30_000).then(() => Date.now() - stoppedAt);
    const outcomes = new Map<Mode, CallOutcome[]>(MODES.map((m) => [m, []]));
    const round = async (r: number): Promise<void> => {
      for (const mode of MODES) {
        outcomes.get(mode)!.push(await timedCall(app(mode).client, oneDescriptor('down', { k: `r${r}` }), ENVOY_DEADLINE_MS));
      }
    };
    // Calls straight after the crash and while health notices it: each mode answers its way.
    for (let r = 0; r < 10; r++) await round(r);
    const notServingMs = await notServing;
    const lateMs = await lateness.stop();
    expect(notServingMs, `control timers up to ${lateMs.toFixed(0)} ms late`).toBeLessThanOrEqual(1500 + 2 * lateMs);
    // A stall of this (test) process longer than the 20 ms deadline makes the client give up
    // whatever the server does; such calls are told apart and may only have that outcome.
    const measured = (list: CallOutcome[]): CallOutcome[] => list.filter((o) => !stalls.overlaps(o.startedPerf, o.endedPerf));
    // And again once the breaker is open and health says NOT_SERVING: at least 10 rounds, and
    // until every mode has 15 calls that no stall of the test process overlapped (a fixed
    // amount of measured work, however busy the machine; bounded).
    const enough = (): boolean => MODES.every((m) => measured(outcomes.get(m)!).length >= 15);
    for (let r = 10; r < 20 || (!enough() && r < 400); r++) {
      await round(r);
      // A stall is seen when the monitor's timer fires after it: let it fire before counting.
      await sleep(20);
    }
    // local: a fresh counter in memory, limit 2 → the third call is OVER_LIMIT. (A longer
    // deadline here, so that a stall of the test process cannot hide the count.)
    const local = [];
    for (let i = 0; i < 3; i++) local.push(await timedCall(app('local').client, oneDescriptor('down', { k: 'local-only' }), 250));

    await sleep(20);
    stalls.stop();
    const expected: Record<Mode, string> = { allow: 'OK', deny: 'OVER_LIMIT', local: 'OK', error: 'UNAVAILABLE' };
    for (const mode of MODES) {
      const all = outcomes.get(mode)!;
      const mine = measured(all);
      expect(mine.length, `${mode}: too many calls overlapped a stall of the test process`).toBeGreaterThanOrEqual(15);
      expect(tally(mine), mode).toEqual({ [expected[mode]]: mine.length });
      for (const o of all) expect([expected[mode], 'DEADLINE_EXCEEDED'], mode).toContain(o.code);
    }
    expect(local.map((o) => o.code)).toEqual(['OK', 'OK', 'OVER_LIMIT']);
    expect(local.map((o) => o.remaining)).toEqual([1, 0, 0]);
    const latencies = measured([...[...outcomes.values()].flat(), ...local]).map((o) => o.ms);
    const worst = Math.max(...latencies);
    expect(worst, `latencies: ${latencies.map((l) => l.toFixed(1)).join(' ')}`).toBeLessThanOrEqual(MAX_LATENCY_MS);

    await redis.restart();
    const servingMs = await waitForHealth({ grpc: 'SERVING', http: 200 }, 30_000);
    // Back on Redis (empty after the restart): real answers with fresh counts, in every mode.
    for (const mode of MODES) {
      let res: CallOutcome | undefined;
      // The breaker may still hold one probe back; give it a bounded moment.
      for (let i = 0; i < 40; i++) {
        res = await timedCall(app(mode).client, oneDescriptor('down', { k: 'before' }), 1000);
        if (res.code === 'OK' && res.remaining === 1) break;
        await sleep(50);
      }
      expect(res, mode).toMatchObject({ code: 'OK', remaining: 1 });
    }
    console.info(
      `redis down: NOT_SERVING seen ${notServingMs} ms after the kill (calls made meanwhile), SERVING ${servingMs} ms after restart; ` +
        `${latencies.length} of ${[...outcomes.values()].flat().length + 3} calls measured (others overlapped a stall of the test process, worst ${stalls.worstMs.toFixed(0)} ms); ` +
        `worst call latency ${worst.toFixed(1)} ms, median ${latencies.sort((a, b) => a - b)[Math.floor(latencies.length / 2)]!.toFixed(1)} ms`,
    );
  });
});
