import Redis, { Cluster } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisPolicyStore } from '../../src/policy/redis-policy-store';
import { standaloneAndCluster } from '../helpers/standalone-and-cluster';
import { expectConcurrentEqualsSerial } from '../helpers/policy-concurrency';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { POLICY_TRACES, REQUEST_TRACES, TRACE_START, requestTraceService, runPolicyTrace, runRequestTrace } from '../helpers/policy-traces';

// lua/policy.lua on real Redis with a pinned clock must answer the shared traces exactly as
// the memory store does (test/unit/policy/memory-policy-store.test.ts), on a standalone server
// and on a 3-master cluster; its keys share the client's slot and every one has a TTL.
describe.each(standaloneAndCluster())('RedisPolicyStore on %s', (name, connect) => {
  const clock = { now: TRACE_START };
  const clients: (Redis | Cluster)[] = [];
  let run = 0;
  const store = (): RedisPolicyStore => {
    const client = connect();
    clients.push(client);
    return new RedisPolicyStore({ client, keyPrefix: `pol_${name}_${run}_`, pinnedNow: () => clock.now });
  };
  afterAll(() => clients.forEach((c) => c.disconnect()));

  async function allKeys(prefix: string): Promise<string[]> {
    const c = clients[0]!;
    if (c instanceof Cluster) return (await Promise.all(c.nodes('master').map((n) => n.keys(`${prefix}*`)))).flat();
    return c.keys(`${prefix}*`);
  }

  it.each(POLICY_TRACES.map((t) => [t.name, t] as const))('trace: %s', async (_n, t) => {
    run++;
    const got = await runPolicyTrace(store(), clock, t);
    expect(got).toEqual(t.steps.map((s) => s.expected));
    const keys = await allKeys(`pol_${name}_${run}_`);
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      expect(key).toMatch(/^pol_\w+_\d+_rl:\{traces:remote_address=\w+\}:policy:(state|routes|prints)$/);
      expect(await clients[0]!.pttl(key), key).toBeGreaterThan(0);
    }
  });

  it.each(REQUEST_TRACES.map((t) => [t.name, t] as const))('request trace, with the Redis limiter: %s', async (_n, t) => {
    run++;
    const limiter = new RedisLimiter({ client: connect(), keyPrefix: `pol_${name}_${run}_`, pinnedNow: () => clock.now });
    const got = await runRequestTrace(requestTraceService(limiter, store()), clock, t);
    await limiter.close();
    expect(got).toEqual(t.steps.map((s) => s.expected));
  });

  it('200 concurrent calls of one client (4 connections) end as the same calls one at a time', async () => {
    run++;
    clock.now = TRACE_START;
    await expectConcurrentEqualsSerial([store(), store(), store(), store()], name);
    for (const key of await allKeys(`pol_${name}_${run}_`)) expect(await clients[0]!.pttl(key), key).toBeGreaterThan(0);
  });
});
