// A Redis that hangs (SIGSTOP): every policy decision still ends in time with the normal tier,
// counted; after three calls unanswered within REDIS_TIMEOUT (the client's command timeout,
// 150 ms here) the policy's circuit opens and decisions stop waiting at all; once Redis answers
// again, decisions read the state again.
import Redis from 'ioredis';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { PrometheusPolicyMetrics } from '../../src/metrics/policy-metrics';
import { PolicyEngine } from '../../src/policy/policy-engine';
import { RedisPolicyStore } from '../../src/policy/redis-policy-store';
import type { RateLimitRequest } from '../../src/service/types';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { timerLateness } from '../harness/wait';
import { TRACE_POLICY } from '../helpers/policy-traces';

let redis: RedisProcess;
let client: Redis;
beforeAll(async () => {
  redis = await startStandalone();
  client = new Redis({ host: redis.host, port: redis.port, enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 150 });
  await new Promise((resolve) => client.once('ready', resolve));
}, 60_000);
afterAll(async () => {
  if (redis?.pid) process.kill(redis.pid, 'SIGCONT');
  client?.disconnect();
  await redis?.stop();
});

const request: RateLimitRequest = { domain: 'traces', descriptors: [{ entries: [{ key: 'remote_address', value: 'h1' }] }], hitsAddend: 1 };

test('a hanging Redis gives the normal tier in time, then fails fast, then recovers', async () => {
  const registry = new Registry();
  const engine = new PolicyEngine({
    store: new RedisPolicyStore({ client, keyPrefix: 'hang_' }),
    metrics: new PrometheusPolicyMetrics(registry),
  });
  const decide = async (budgetMs: number) => {
    const started = performance.now();
    const d = await engine.decide(TRACE_POLICY, 'h1', request, Date.now() + budgetMs);
    return { tier: d.tier, ms: performance.now() - started };
  };
  // Drive the client to elevated first, so "normal" below is the fallback, not its state.
  for (let i = 0; i < 10; i++) await decide(1000);
  expect((await decide(1000)).tier).toBe('elevated');

  // The control, measured in the same run: how late a 10 ms timer of this process fires while
  // the calls below run. A busy machine delays the policy's timer as much; the bounds below are
  // the policy's own plus that lateness.
  const control = timerLateness();
  let lateMs: number;
  process.kill(redis.pid!, 'SIGSTOP');
  const outcomes = [];
  try {
    for (let i = 0; i < 4; i++) outcomes.push(await decide(200));
    // The calls' own command timeouts (150 ms after each was sent) have all come by now.
    await new Promise((r) => setTimeout(r, 200));
    for (let i = 0; i < 3; i++) outcomes.push(await decide(200));
  } finally {
    lateMs = await control.stop();
  }
  expect(outcomes.map((o) => o.tier)).toEqual(Array(7).fill('normal'));
  const late = `timers ${lateMs.toFixed(0)} ms late; calls took ${outcomes.map((o) => o.ms.toFixed(0)).join(' ')} ms`;
  // Half of the 200 ms is the policy's: never more (with room for a loaded machine).
  expect(Math.max(...outcomes.map((o) => o.ms)), late).toBeLessThan(180 + lateMs);
  // The first calls waited their budget: a caller giving up is no Redis failure.
  expect(Math.min(...outcomes.slice(0, 3).map((o) => o.ms)), late).toBeGreaterThanOrEqual(90);
  // After three calls unanswered within the command timeout the circuit is open: no more waiting.
  expect(Math.max(...outcomes.slice(4).map((o) => o.ms)), late).toBeLessThan(20 + lateMs);
  const text = await registry.getSingleMetricAsString('floodgate_policy_unavailable_total');
  expect(text).toContain('floodgate_policy_unavailable_total{domain="traces"} 7');

  process.kill(redis.pid!, 'SIGCONT');
  const start = Date.now();
  let tier = 'normal';
  while (tier !== 'elevated' && Date.now() - start < 20_000) {
    await new Promise((r) => setTimeout(r, 100));
    tier = (await decide(500)).tier;
  }
  expect(tier).toBe('elevated');
}, 30_000);
