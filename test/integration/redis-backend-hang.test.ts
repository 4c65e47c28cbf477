// A Redis that hangs (SIGSTOP: connections stay open, nothing answers) is the outage a plain
// "is the client connected?" check misses. The per-node circuit breakers must notice it: a
// hanging standalone Redis makes the instance NOT_SERVING, while one hanging cluster master
// only fails its own slots and leaves the instance SERVING.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { keySlot } from '../harness/key-slot';
import { timerLateness, within } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { oneRule, tally, timedCall } from './redis-backend-helpers';

const RULES = { 'h.yaml': oneRule('h', 'k', 1_000_000) };

describe('a hanging standalone Redis', () => {
  let redis: RedisProcess;
  let t: TestApp;
  beforeAll(async () => {
    redis = await startStandalone();
    // The breaker counts a hung call when REDIS_TIMEOUT passes (callers' deadlines are not
    // Redis failing): 150 ms instead of the default 10 s keeps the test short.
    t = await startTestApp(RULES, {
      REDIS_URL: redis.url,
      BACKEND_FAILURE_MODE: 'error',
      REDIS_TIMEOUT: '150ms',
      REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true',
    });
  });
  afterAll(async () => {
    if (redis?.pid) process.kill(redis.pid, 'SIGCONT');
    await t?.stop();
    await redis?.stop();
  });

  test('turns health NOT_SERVING once calls keep timing out, and SERVING again when it answers', async () => {
    expect((await timedCall(t.client, oneDescriptor('h', { k: 'a' }), 5000)).code).toBe('OK');
    process.kill(redis.pid!, 'SIGSTOP');
    const outcomes = [];
    // A busy machine delays this process' timers and answers alike: the bound below is the
    // deadline's plus how late a control timer fired meanwhile.
    const control = timerLateness();
    for (let i = 0; i < 5; i++) outcomes.push(await timedCall(t.client, oneDescriptor('h', { k: 'a' }), 50));
    const lateMs = await control.stop();
    // Every call is answered with an error within its deadline, never left hanging.
    expect(outcomes.every((o) => o.code === 'DEADLINE_EXCEEDED' || o.code === 'UNAVAILABLE')).toBe(true);
    expect(Math.max(...outcomes.map((o) => o.ms)), `control timers ${lateMs.toFixed(0)} ms late`).toBeLessThan(150 + lateMs);
    await within(10_000, async () => (await t.client.healthCheck('ratelimit')) === 'NOT_SERVING', 'NOT_SERVING');
    expect((await fetch(`${t.httpUrl}/healthcheck`)).status).toBe(500);

    process.kill(redis.pid!, 'SIGCONT');
    // The breaker lets a probe through after its open time; its success closes the circuit.
    await within(15_000, async () => (await timedCall(t.client, oneDescriptor('h', { k: 'a' }), 2000)).code === 'OK', 'calls succeed again');
    await within(10_000, async () => (await t.client.healthCheck('ratelimit')) === 'SERVING', 'SERVING');
  });
});

describe('one hanging cluster master', () => {
  let cluster: RedisClusterHarness;
  let t: TestApp;
  let stoppedPid: number | undefined;
  beforeAll(async () => {
    // No failover while the victim hangs, however long the test takes on a busy machine: the
    // test is about the other masters answering, not about a replica taking over.
    cluster = await startCluster({ extraArgs: ['--cluster-node-timeout', '120000'] });
    t = await startTestApp(RULES, { REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds, BACKEND_FAILURE_MODE: 'allow' });
  });
  afterAll(async () => {
    if (stoppedPid) process.kill(stoppedPid, 'SIGCONT');
    await t?.stop();
    await cluster?.stop();
  });

  test('fails only its own slots; the other masters answer and the instance stays SERVING', async () => {
    // Find values whose keys live on the victim and on another master.
    const masters = cluster.masters();
    const victim = masters[0]!;
    const slotsOf = async (node: typeof victim): Promise<[number, number][]> => {
      const shards = (await node.command('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
      return shards.filter((s) => Number(s[2][1]) === node.port).map((s) => [Number(s[0]), Number(s[1])]);
    };
    const victimRanges = await slotsOf(victim);
    const onVictim = (v: string) => {
      const slot = keySlot(`rl:{h:k=${v}}:fixed_window:3600`);
      return victimRanges.some(([a, b]) => slot >= a && slot <= b);
    };
    const values = Array.from({ length: 200 }, (_, i) => `v${i}`);
    const victimValue = values.find(onVictim)!;
    const otherValues = values.filter((v) => !onVictim(v)).slice(0, 20);
    expect(victimValue).toBeDefined();
    expect(otherValues.length).toBe(20);
    for (const v of [victimValue, ...otherValues]) expect((await timedCall(t.client, oneDescriptor('h', { k: v }), 5000)).code).toBe('OK');

    stoppedPid = victim.server.pid;
    process.kill(stoppedPid!, 'SIGSTOP');
    // The victim's calls fall back to `allow` within their deadline. (Its breaker stays closed
    // here: a caller's deadline is not a Redis failure, and REDIS_TIMEOUT is the default 10 s.)
    // The deadline leaves a busy machine room to deliver the fallback answer.
    for (let i = 0; i < 4; i++) {
      const o = await timedCall(t.client, oneDescriptor('h', { k: victimValue }), 1000);
      expect(o.code).toBe('OK');
      expect(o.remaining).toBe(1_000_000);
    }
    // The other masters answer for real (their counters move), while the victim hangs (the
    // cluster's node timeout is 120 s here: no replica is promoted meanwhile).
    const others = await Promise.all(otherValues.map((v) => timedCall(t.client, oneDescriptor('h', { k: v }), 5000)));
    expect(tally(others)).toEqual({ OK: 20 });
    expect(others.every((o) => o.remaining === 1_000_000 - 2)).toBe(true);
    expect(await t.client.healthCheck('ratelimit')).toBe('SERVING');
  });
});
