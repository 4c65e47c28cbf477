// Issue 18: a caller's own deadline is no Redis failure. Calls that give up before Redis could
// answer (a deadline of 1 ms or less leaves the policy no time at all) must not open the
// policy's circuit breaker: an open breaker gives every client the normal tier, so an
// attacker with tiny deadlines let a boxed abuser out (29 OK of 100, normal 67 times).
import Redis from 'ioredis';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { PrometheusPolicyMetrics } from '../../src/metrics/policy-metrics';
import { PolicyEngine } from '../../src/policy/policy-engine';
import { RedisPolicyStore } from '../../src/policy/redis-policy-store';
import type { RateLimitRequest } from '../../src/service/types';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { TRACE_POLICY } from '../helpers/policy-traces';

let redis: RedisProcess;
let client: Redis;
beforeAll(async () => {
  redis = await startStandalone();
  client = new Redis({ host: redis.host, port: redis.port, enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 1000 });
  await new Promise((resolve) => client.once('ready', resolve));
}, 60_000);
afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
});

const request = (c: string): RateLimitRequest => ({
  domain: 'traces',
  descriptors: [{ entries: [{ key: 'remote_address', value: c }] }],
  hitsAddend: 1,
});

test('calls with 1 ms deadlines do not open the breaker: a boxed client stays boxed', async () => {
  const engine = new PolicyEngine({
    store: new RedisPolicyStore({ client, keyPrefix: `bd${Date.now()}_` }),
    metrics: new PrometheusPolicyMetrics(new Registry()),
  });
  // The abuser hammers while denied until it is in the box (TRACE_POLICY: blocked at 40).
  for (let i = 0; i < 20; i++) {
    const d = await engine.decide(TRACE_POLICY, 'abuser', request('abuser'), Date.now() + 1000);
    if (d.tier === 'blocked') break;
    engine.noteDenial(d);
  }
  const tiers: Record<string, number> = {};
  for (let round = 0; round < 20; round++) {
    // The attacker: three calls that give up at once.
    for (let i = 0; i < 3; i++) await engine.decide(TRACE_POLICY, `attacker${i}`, request(`attacker${i}`), Date.now() + 1);
    const d = await engine.decide(TRACE_POLICY, 'abuser', request('abuser'), Date.now() + 1000);
    tiers[d.tier] = (tiers[d.tier] ?? 0) + 1;
  }
  console.log(`boxed abuser, after each 3 calls with 1 ms deadlines (20 rounds): ${JSON.stringify(tiers)}`);
  expect(tiers).toEqual({ blocked: 20 });
}, 30_000);

test('calls that give up before a slow (but answering) Redis replies do not open the breaker either', async () => {
  const engine = new PolicyEngine({
    store: new RedisPolicyStore({ client, keyPrefix: `bs${Date.now()}_` }),
    metrics: new PrometheusPolicyMetrics(new Registry()),
  });
  for (let i = 0; i < 20; i++) {
    const d = await engine.decide(TRACE_POLICY, 'abuser', request('abuser'), Date.now() + 1000);
    if (d.tier === 'blocked') break;
    engine.noteDenial(d);
  }
  const busy = client.duplicate();
  await new Promise((resolve) => busy.once('ready', resolve));
  const tiers: Record<string, number> = {};
  for (let round = 0; round < 5; round++) {
    // Redis busy for 60 ms (a script on another connection): the attacker's 20 ms calls (10 ms
    // of it the policy's) give up before the replies come; the replies then come, well within
    // the client's command timeout.
    const spin = busy.eval(
      "local t = redis.call('TIME'); local s = t[1] * 1e6 + t[2]; repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - s >= 60000; return 1",
      0,
    );
    await new Promise((r) => setTimeout(r, 5));
    await Promise.all([0, 1, 2].map((i) => engine.decide(TRACE_POLICY, `slow${i}`, request(`slow${i}`), Date.now() + 20)));
    await spin;
    const d = await engine.decide(TRACE_POLICY, 'abuser', request('abuser'), Date.now() + 1000);
    tiers[d.tier] = (tiers[d.tier] ?? 0) + 1;
  }
  busy.disconnect();
  console.log(`boxed abuser, after each 3 calls that gave up on a busy Redis (5 rounds): ${JSON.stringify(tiers)}`);
  expect(tiers).toEqual({ blocked: 5 });
}, 30_000);
