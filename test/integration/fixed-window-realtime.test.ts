import Redis, { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LimitCheck, Limiter } from '../../src/limiter/limiter';
import { MemoryLimiter } from '../../src/limiter/memory/memory-limiter';
import { OverLimitCache } from '../../src/limiter/over-limit-cache';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';

// Issue 7, finding 1, on the real clock: limit 1 per second, a tight loop of calls across three
// window edges admits exactly one call per second, on memory, a standalone Redis and a cluster,
// with the local over-limit cache off and on (a false OVER_LIMIT in the first millisecond of a
// window, once cached, would empty the whole window). Windows are read from the local clock,
// which redis TIME shares on this machine; a call that straddles an edge counts for either side.

const EDGES = 3;
const LOOPS = 4;

let standalone: RedisProcess;
let cluster: RedisClusterHarness;
beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 0 })]);
}, 90_000);
afterAll(async () => {
  await Promise.all([standalone?.stop(), cluster?.stop()]);
}, 30_000);

type Backend = readonly [name: string, make: () => Promise<Limiter>];

const BACKENDS: readonly Backend[] = [
  ['memory', () => Promise.resolve(new MemoryLimiter())],
  [
    'standalone',
    async () => {
      const client = new Redis({ host: standalone.host, port: standalone.port, maxRetriesPerRequest: 1 });
      await client.ping();
      return new RedisLimiter({ client, keyPrefix: `rt_${Date.now()}_` });
    },
  ],
  [
    'cluster',
    async () => {
      const client = new Cluster([...cluster.startupNodes], { redisOptions: { maxRetriesPerRequest: 1 } });
      await client.ping();
      return new RedisLimiter({ client, keyPrefix: `rt_${Date.now()}_` });
    },
  ],
];

interface Call {
  readonly t0: number;
  readonly t1: number;
  readonly allowed: boolean;
}

/** Calls `limiter` back to back until EDGES second edges have passed; bounded in count and time. */
async function tightLoop(limiter: Limiter, value: string): Promise<Call[]> {
  const check: LimitCheck = {
    counter: { domain: 'rt', entries: [{ key: 'k', value }] },
    spec: { algorithm: 'fixed_window', limit: 1, windowSeconds: 1, burst: 1 },
    hits: 1,
  };
  const until = (Math.floor(Date.now() / 1000) + EDGES) * 1000 + 300;
  const calls: Call[] = [];
  for (let i = 0; i < 2_000_000 && Date.now() < until; i++) {
    const t0 = Date.now();
    const [result] = await limiter.check([check], { deadline: t0 + 5000, stopIncrementWhenOverLimit: false });
    calls.push({ t0, t1: Date.now(), allowed: result!.allowed });
    // Requests arrive as I/O: a loop answered from the cache must not starve the others' replies.
    await new Promise((resolve) => setImmediate(resolve));
  }
  return calls;
}

const second = (t: number): number => Math.floor(t / 1000);

/** Exactly one admitted call per second of the loop. */
function expectOnePerSecond(calls: readonly Call[], what: string): void {
  const admitted = calls.filter((c) => c.allowed);
  const first = calls[0]!;
  const last = calls.at(-1)!;
  console.info(`realtime ${what}: ${calls.length} calls, ${admitted.length} admitted over seconds ${second(first.t0)}..${second(last.t1)}`);
  expect(calls.length).toBeGreaterThan(100 * EDGES);
  // At most one admitted call per second: no two admitted calls that certainly ran in the same one.
  const certain = admitted.filter((c) => second(c.t0) === second(c.t1)).map((c) => second(c.t0));
  expect(new Set(certain).size).toBe(certain.length);
  // At least one in every second the loop covered from start to end.
  for (let s = second(first.t1) + 1; s < second(last.t0); s++) {
    expect(
      admitted.some((c) => second(c.t0) <= s && second(c.t1) >= s),
      `second ${s} admitted none`,
    ).toBe(true);
  }
  // In all: one per second the loop ran in (a call that straddles an edge counts for either side).
  expect(admitted.length).toBeGreaterThanOrEqual(second(last.t0) - second(first.t1) + 1);
  expect(admitted.length).toBeLessThanOrEqual(second(last.t1) - second(first.t0) + 1);
}

describe.each(BACKENDS)('fixed_window at limit 1/s in real time on %s', (name, make) => {
  const limiters: Limiter[] = [];
  afterAll(async () => {
    await Promise.all(limiters.map((l) => l.close()));
  });

  it.each([
    ['off', false],
    ['on', true],
  ] as const)(
    'local cache %s: a tight loop across 3 window edges admits exactly one call per second',
    async (_label, cached) => {
      const backend = await make();
      const limiter = cached ? new OverLimitCache(backend, { maxBytes: 1_000_000 }) : backend;
      limiters.push(limiter);
      // Several counters at once: more calls land in the first millisecond of each window.
      const loops = await Promise.all(Array.from({ length: LOOPS }, (_, i) => tightLoop(limiter, `${name}-${cached}-${Date.now()}-${i}`)));
      for (const calls of loops) expectOnePerSecond(calls, `${name}, cache ${cached ? 'on' : 'off'}`);
    },
    30_000,
  );
});
