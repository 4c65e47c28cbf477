// The per-node circuit breakers of the Redis limiter against real Redis processes that hang
// (SIGSTOP) or vanish (SIGKILL): one breaker decision per distinct node per request, one
// outcome per Redis call (however many requests a merged call serves), and that outcome is
// Redis' own (REDIS_TIMEOUT for a hang), not the callers' deadlines.
import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CircuitBreaker } from '../../src/limiter/redis/circuit-breaker';
import type { LimitCheck, LimitResult } from '../../src/limiter/limiter';
import type { LimitSpec } from '../../src/domain/limit-spec';
import { createRedisClient, type RedisClient } from '../../src/limiter/redis/redis-client';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { loadSettings } from '../../src/settings/settings';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { sleep } from '../harness/wait';
import { CountingBreaker, uniquePrefix } from './redis-backend-helpers';

const FIXED: LimitSpec = { algorithm: 'fixed_window', limit: 1_000_000, windowSeconds: 3600, burst: 1_000_000 };
const BUCKET: LimitSpec = { algorithm: 'token_bucket', limit: 1_000_000, windowSeconds: 3600, burst: 1_000_000 };
const at = (value: string, spec: LimitSpec = FIXED): LimitCheck => ({
  counter: { domain: 'br', entries: [{ key: 'k', value }] },
  spec,
  hits: 1,
});
/** Two script calls to one node: the same counter (one hash tag, one slot) under two algorithms. */
const twoGroups = (value: string): LimitCheck[] => [at(value, FIXED), at(value, BUCKET)];

async function ready(client: RedisClient): Promise<void> {
  for (let i = 0; i < 250 && client.status !== 'ready'; i++) await sleep(20);
  expect(client.status).toBe('ready');
}

/** A call's outcome without throwing: its results, or the error's name. */
async function attempt(limiter: RedisLimiter, checks: LimitCheck[], deadlineMs: number): Promise<LimitResult[] | string> {
  try {
    return await limiter.check(checks, { deadline: Date.now() + deadlineMs, stopIncrementWhenOverLimit: false });
  } catch (err) {
    return `${(err as Error).name}: ${(err as Error).message}`;
  }
}

/** Repeats two-group requests until one gets through (bounded); returns what the tries got. */
async function untilThrough(limiter: RedisLimiter, value: string, ms: number): Promise<{ through: boolean; tries: string[] }> {
  const tries: string[] = [];
  const started = Date.now();
  while (Date.now() - started < ms && tries.length < 400) {
    const r = await attempt(limiter, twoGroups(value), 1000);
    if (typeof r !== 'string') return { through: true, tries };
    tries.push(r);
    await sleep(50);
  }
  return { through: false, tries };
}

describe('standalone Redis', () => {
  let redis: RedisProcess;
  let client: RedisClient;
  beforeAll(async () => {
    redis = await startStandalone();
    // REDIS_TIMEOUT below the hangs of these tests: the calls a hang holds fail on their own
    // (after their callers' deadlines), and that failure is what the breaker counts.
    client = createRedisClient(loadSettings({ REDIS_URL: redis.url, REDIS_TIMEOUT: '150ms' }).redis!);
    client.on('error', () => undefined);
    await ready(client);
  });
  afterAll(async () => {
    if (redis?.pid) process.kill(redis.pid, 'SIGCONT');
    client?.disconnect();
    await redis?.stop();
  });

  test('after a hang, a request with two script calls to the one node probes, gets through, and health recovers', async () => {
    const limiter = new RedisLimiter({ client, keyPrefix: uniquePrefix('probe') });
    expect(typeof (await attempt(limiter, twoGroups('a'), 5000))).not.toBe('string');
    process.kill(redis.pid!, 'SIGSTOP');
    try {
      for (let i = 0; i < 400 && limiter.isHealthy(); i++) await attempt(limiter, twoGroups('a'), 40);
      expect(limiter.isHealthy()).toBe(false);
      // Every call the hang holds times out (REDIS_TIMEOUT), and the open time passes.
      await sleep(600);
    } finally {
      process.kill(redis.pid!, 'SIGCONT');
    }
    const { through, tries } = await untilThrough(limiter, 'a', 15_000);
    console.info(`breaker: two-group requests after the hang: ${tries.length} refused before one got through (${tries.slice(0, 3).join('; ')})`);
    expect(through, tries.join('\n')).toBe(true);
    expect(limiter.isHealthy()).toBe(true);
  });

  test("a hang: one failure per Redis call, merged or not, counted at REDIS_TIMEOUT, not at the callers' deadlines", async () => {
    const breaker = new CountingBreaker(1000, 500);
    const limiter = new RedisLimiter({ client, keyPrefix: uniquePrefix('late'), newBreaker: () => breaker });
    expect(typeof (await attempt(limiter, [at('warm')], 5000))).not.toBe('string');
    const base = { successes: breaker.successes, failures: breaker.failures };
    process.kill(redis.pid!, 'SIGSTOP');
    let outcomes: (LimitResult[] | string)[];
    try {
      // 50 concurrent fixed-window requests (merged into one script call) and one token_bucket
      // request (a call of its own), all with a 60 ms deadline.
      outcomes = await Promise.all([
        ...Array.from({ length: 50 }, () => attempt(limiter, [at('hang')], 60)),
        attempt(limiter, [at('hang', BUCKET)], 60),
      ]);
      expect(outcomes.every((o) => typeof o === 'string' && o.startsWith('DeadlineExceededError'))).toBe(true);
      // The callers gave up; Redis has not failed yet.
      expect(breaker.failures - base.failures).toBe(0);
      // Both calls now fail (REDIS_TIMEOUT, 150 ms): one failure each.
      await sleep(300);
    } finally {
      process.kill(redis.pid!, 'SIGCONT');
    }
    expect(breaker.failures - base.failures).toBe(2);
    expect(breaker.successes - base.successes).toBe(0);
  });

  test('Redis gone: a merged call of 50 requests that fails counts one failure, not 50', async () => {
    const breaker = new CountingBreaker(1000, 500);
    const limiter = new RedisLimiter({ client, keyPrefix: uniquePrefix('gone'), newBreaker: () => breaker });
    expect(typeof (await attempt(limiter, [at('warm')], 5000))).not.toBe('string');
    await redis.kill('SIGKILL');
    try {
      for (let i = 0; i < 100 && client.status === 'ready'; i++) await sleep(10);
      const before = breaker.failures;
      const outcomes = await Promise.all(Array.from({ length: 50 }, () => attempt(limiter, [at('gone')], 500)));
      expect(outcomes.every((o) => typeof o === 'string')).toBe(true);
      expect(breaker.failures - before).toBe(1);
    } finally {
      await redis.restart();
      await ready(client);
    }
  });
});

describe('a cluster master that hangs', () => {
  let cluster: RedisClusterHarness;
  let client: RedisClient;
  let stoppedPid: number | undefined;
  beforeAll(async () => {
    // No failover while the master hangs, however long the test takes on a busy machine.
    cluster = await startCluster({ extraArgs: ['--cluster-node-timeout', '120000'] });
    client = createRedisClient(loadSettings({ REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds, REDIS_TIMEOUT: '150ms' }).redis!);
    client.on('error', () => undefined);
    await ready(client);
  }, 90_000);
  afterAll(async () => {
    if (stoppedPid) process.kill(stoppedPid, 'SIGCONT');
    client?.disconnect();
    await cluster?.stop();
  }, 30_000);

  test('two script calls to that master in one request: it is probed and the request gets through', async () => {
    // A short open time keeps the test short (the cluster's node timeout is 120 s here).
    const limiter = new RedisLimiter({ client, keyPrefix: uniquePrefix('cprobe'), newBreaker: () => new CircuitBreaker(3, 100) });
    expect(typeof (await attempt(limiter, twoGroups('c'), 5000))).not.toBe('string');
    // The master that serves the counter's slot.
    expect(client).toBeInstanceOf(Cluster);
    const node = (client as Cluster).slots[calculateSlot('{br:k=c}')]![0]!;
    const victim = cluster.masters().find((m) => `${m.host}:${m.port}` === node)!;
    expect(victim).toBeDefined();
    stoppedPid = victim.server.pid;
    process.kill(stoppedPid!, 'SIGSTOP');
    try {
      // The callers' 40 ms deadlines do not open the breaker; the hung calls' REDIS_TIMEOUT
      // (150 ms) does: then requests are refused at once.
      const during: (LimitResult[] | string)[] = [];
      const started = Date.now();
      // Until the circuit opens (bounded: 15 s, 400 calls; a busy machine may need more than 1 s).
      while (Date.now() - started < 15_000 && during.length < 400) {
        const o = await attempt(limiter, twoGroups('c'), 40);
        during.push(o);
        if (typeof o === 'string' && /circuit open/.test(o)) break;
      }
      expect(during.every((o) => typeof o === 'string')).toBe(true);
      expect(during.at(-1)).toEqual(expect.stringMatching(/circuit open/));
      expect(Date.now() - started).toBeGreaterThanOrEqual(150);
      // Every call the hang holds times out (REDIS_TIMEOUT), and the open time passes.
      await sleep(250);
    } finally {
      process.kill(stoppedPid!, 'SIGCONT');
      stoppedPid = undefined;
    }
    const { through, tries } = await untilThrough(limiter, 'c', 15_000);
    console.info(`breaker (cluster): two-group requests after the hang: ${tries.length} refused before one got through`);
    expect(through, tries.join('\n')).toBe(true);
  });
});
