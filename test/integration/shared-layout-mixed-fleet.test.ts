// Issue 30, "Done when": a mixed fleet during a rolling update. The reference binary (built from
// source) and floodgate with REDIS_KEY_LAYOUT=reference count against one Redis, then against a
// 3-master Redis Cluster, the calls alternating between the two servers request by request. For
// every client and window the admitted requests equal the limit exactly, and the fleet answers
// each request as one service would: the same sequence, sent to the reference alone (the same
// rules under another domain, so its keys are its own), gets the same codes and limit_remaining,
// and every duration_until_reset, either server's, is the window's end by the test's clock around
// the call (±1 s of rounding).
//
// Covered: a per-second limit with REDIS_PERSECOND=true and REDIS_PERSECOND_URL (a second Redis,
// where both put it), CACHE_KEY_PREFIX, a share_threshold wildcard, a per-request limit override,
// the local over-limit cache (LOCAL_CACHE_SIZE_IN_BYTES), STOP mode
// (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT) and both together, each fleet on one Redis and on a
// cluster (the two-descriptor scenario is where STOP mode holds a counter back).
//
// Time: every sequence runs inside one window; before each scenario the test waits (bounded)
// until the minute has enough left. A per-second batch is sent at the start of a second,
// concurrently, and sent again with fresh clients (bounded) when the test's clock shows it
// straddled a second.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { keySlot, startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { startReference, type ReferenceServer } from '../harness/reference-server';
import { rlsClient, type RlsTestClient, type TestDescriptor, type TestRequest } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge } from '../helpers/windows';
import { scanKeys, type RedisNode } from './redis-backend-helpers';
import type { WireResponse } from '../../src/rls/wire-types';
import { referenceWindowKey } from '../../src/limiter/reference-key';

/** Each fleet's CACHE_KEY_PREFIX: its own keys (a share_threshold counter is one key for every value). */
const prefixOf = (i: number): string => `fleet${i}_`;

/** The same rules for the mixed fleet (domain `a`) and for the reference alone (domain `b`). */
function rules(domain: string): string {
  return `
domain: ${domain}
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: sec
    rate_limit: { unit: second, requests_per_unit: 3 }
  - key: path
    value: "/api/*"
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 4 }
`;
}
const RULE_FILES = { 'a.yaml': rules('a'), 'b.yaml': rules('b') };

const user = (value: string): TestDescriptor => ({ entries: [{ key: 'user', value }] });
const path = (value: string): TestDescriptor => ({ entries: [{ key: 'path', value }] });
const override = (value: string, limit: number, unit: string): TestDescriptor => ({
  entries: [{ key: 'client', value }],
  limit: { requests_per_unit: limit, unit },
});

interface Scenario {
  readonly name: string;
  /** The limit admitted requests must reach exactly (single-descriptor scenarios). */
  readonly limit?: number;
  /** Request n of the sequence, in `domain`. */
  readonly request: (domain: string, n: number) => TestRequest;
  readonly count: number;
  /** Each status's unit in seconds, in order. */
  readonly units: readonly number[];
}

function scenarios(tag: string): Scenario[] {
  return [
    { name: 'an hour limit', limit: 5, count: 8, units: [3600], request: (domain) => ({ domain, descriptors: [user(`u-${tag}`)] }) },
    {
      name: 'an hour limit, hits_addend 2',
      limit: 2,
      count: 4,
      units: [3600],
      request: (domain) => ({ domain, descriptors: [user(`h-${tag}`)], hits_addend: 2 }),
    },
    {
      name: 'a share_threshold wildcard (every /api/* value one counter)',
      limit: 4,
      count: 7,
      units: [60],
      request: (domain, n) => ({ domain, descriptors: [path(`/api/${tag}/${n}`)] }),
    },
    {
      name: 'a per-request override',
      limit: 6,
      count: 9,
      units: [3600],
      request: (domain) => ({ domain, descriptors: [override(`o-${tag}`, 6, 'HOUR')] }),
    },
    {
      name: 'two descriptors, an hour rule and a minute override',
      count: 8,
      units: [3600, 60],
      request: (domain) => ({ domain, descriptors: [user(`m-${tag}`), override(`mo-${tag}`, 3, 'MINUTE')] }),
    },
  ];
}

/** Which master (its port) serves each slot, from CLUSTER SLOTS. */
async function slotOwners(masters: readonly RedisNode[]): Promise<(slot: number) => number> {
  const ranges = (await masters[0]!.command('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
  return (slot) => Number(ranges.find(([from, to]) => slot >= from && slot <= to)?.[2][1]);
}

/** What one answer says, as the fleet must agree on it. */
function summary(res: WireResponse): { overall: string; statuses: { code: string; remaining: number; reset: number }[] } {
  return {
    overall: String(res.overall_code),
    statuses: res.statuses.map((s) => ({
      code: String(s.code),
      remaining: s.limit_remaining ?? 0,
      reset: Number(s.duration_until_reset?.seconds ?? 0),
    })),
  };
}

interface Fleet {
  readonly prefix: string;
  readonly reference: ReferenceServer;
  readonly floodgate: TestApp;
  readonly referenceClient: RlsTestClient;
  stop(): Promise<void>;
}

async function startFleet(
  redisEnv: { reference: Record<string, string>; floodgate: Record<string, string> },
  env: Record<string, string>,
): Promise<Fleet> {
  const reference = await startReference(RULE_FILES, { ...redisEnv.reference, ...env, REDIS_PERSECOND_SOCKET_TYPE: 'tcp' });
  const floodgate = await startTestApp(RULE_FILES, { ...redisEnv.floodgate, ...env, BACKEND_TYPE: 'redis', REDIS_KEY_LAYOUT: 'reference' });
  const referenceClient = rlsClient(`127.0.0.1:${reference.grpcPort}`);
  return {
    prefix: env.CACHE_KEY_PREFIX as string,
    reference,
    floodgate,
    referenceClient,
    async stop() {
      referenceClient.close();
      await floodgate.stop();
      await reference.stop();
    },
  };
}

/** The time one scenario may take at most (its sequence on the reference alone, then on the fleet). */
const SCENARIO_MS = 20_000;

/** Runs every scenario on the reference alone (domain b) and on the fleet alternating (domain a), and compares. */
async function runScenarios(fleet: Fleet, tag: string): Promise<void> {
  for (const s of scenarios(tag)) {
    // Each scenario inside one minute (the shortest unit but the per-second one's, and an hour's
    // edge is a minute's): waited for before each one, so that however slowly the scenarios
    // before it ran, no edge falls inside its 2 × count sequential calls (18 at most).
    await awayFromWindowEdge(60, SCENARIO_MS);
    const alone: ReturnType<typeof summary>[] = [];
    const mixed: ReturnType<typeof summary>[] = [];
    // Each answer's resets, checked against the test's clock around the call (the window's end
    // as any server sees it then): the same for both servers, whatever the machine's speed.
    const ask = async (client: RlsTestClient, request: TestRequest, what: string): Promise<ReturnType<typeof summary>> => {
      const before = Math.floor(Date.now() / 1000);
      const answer = summary(await client.shouldRateLimit(request));
      const after = Math.floor(Date.now() / 1000);
      answer.statuses.forEach((x, i) => {
        const unit = s.units[i] ?? 0;
        expect(x.reset, `${s.name}: ${what} reset`).toBeGreaterThanOrEqual(unit - (after % unit) - 1);
        expect(x.reset, `${s.name}: ${what} reset`).toBeLessThanOrEqual(unit - (before % unit) + 1);
      });
      return answer;
    };
    for (let n = 0; n < s.count; n++) alone.push(await ask(fleet.referenceClient, s.request('b', n), `alone ${n}`));
    for (let n = 0; n < s.count; n++) {
      const server = n % 2 === 0 ? fleet.referenceClient : fleet.floodgate.client;
      mixed.push(await ask(server, s.request('a', n), `mixed ${n}`));
    }
    if (s.limit !== undefined) expect(mixed.filter((a) => a.overall === 'OK').length, `${s.name}: admitted`).toBe(s.limit);
    expect(
      mixed.map((a) => a.overall),
      `${s.name}: codes`,
    ).toEqual(alone.map((a) => a.overall));
    for (let n = 0; n < s.count; n++) {
      const [m, a] = [mixed[n]!, alone[n]!];
      expect(
        m.statuses.map((x) => [x.code, x.remaining]),
        `${s.name}: request ${n}`,
      ).toEqual(a.statuses.map((x) => [x.code, x.remaining]));
    }
  }
}

/**
 * A per-second limit of 3: 8 requests at once, half to each server, all inside one second;
 * exactly 3 admitted, counted in REDIS_PERSECOND_URL's Redis (not the main one).
 */
async function runPerSecond(fleet: Fleet, tag: string, perSecond: RedisNode, main: readonly RedisNode[]): Promise<void> {
  for (let attempt = 0; attempt < 10; attempt++) {
    await awayFromWindowEdge(1, 900);
    const request: TestRequest = { domain: 'a', descriptors: [{ entries: [{ key: 'sec', value: `${tag}-${attempt}` }] }] };
    const before = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, n) => (n % 2 === 0 ? fleet.referenceClient : fleet.floodgate.client).shouldRateLimit(request)),
    );
    const after = Date.now();
    // Straddled a second: both servers name their keys by their clock, so two windows counted.
    if (Math.floor(before / 1000) !== Math.floor(after / 1000)) continue;
    expect(answers.filter((a) => a.overall_code === 'OK').length).toBe(3);
    expect(await scanKeys(perSecond, `${fleet.prefix}a_sec_${tag}-${attempt}_`)).toHaveLength(1);
    for (const node of main) expect(await scanKeys(node, `${fleet.prefix}a_sec_`)).toEqual([]);
    return;
  }
  throw new Error('no batch of 8 calls fitted in one second in 10 attempts');
}

const FLEETS = [
  { name: 'local cache', env: { LOCAL_CACHE_SIZE_IN_BYTES: '1048576' } },
  { name: 'STOP mode', env: { STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true' } },
  { name: 'STOP mode and the local cache', env: { STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true', LOCAL_CACHE_SIZE_IN_BYTES: '1048576' } },
] as const;

describe('a mixed fleet on one Redis counts as one service (issue 30)', () => {
  let main: RedisProcess;
  let perSecond: RedisProcess;
  const fleets: Fleet[] = [];
  beforeAll(async () => {
    [main, perSecond] = await Promise.all([startStandalone(), startStandalone()]);
    const common = { REDIS_PERSECOND: 'true', REDIS_PERSECOND_URL: `127.0.0.1:${perSecond.port}` };
    const redisEnv = { reference: { REDIS_URL: `127.0.0.1:${main.port}` }, floodgate: { REDIS_URL: `127.0.0.1:${main.port}` } };
    for (const [i, f] of FLEETS.entries()) fleets.push(await startFleet(redisEnv, { ...common, ...f.env, CACHE_KEY_PREFIX: prefixOf(i) }));
  }, 900_000);
  afterAll(async () => {
    for (const f of fleets) await f.stop();
    await Promise.all([main?.stop(), perSecond?.stop()]);
  });

  test.each(FLEETS.map((f, i) => ({ name: f.name, i })))(
    '$name',
    async ({ i }) => {
      await runScenarios(fleets[i]!, `s${i}`);
      await runPerSecond(fleets[i]!, `s${i}`, perSecond, [main]);
    },
    120_000,
  );
});

describe('a mixed fleet on a 3-master Redis Cluster counts as one service (issue 30)', () => {
  let cluster: RedisClusterHarness;
  let perSecond: RedisProcess;
  const fleets: Fleet[] = [];
  beforeAll(async () => {
    [cluster, perSecond] = await Promise.all([startCluster({ masters: 3, replicasPerMaster: 0 }), startStandalone()]);
    const common = { REDIS_PERSECOND: 'true', REDIS_PERSECOND_URL: `127.0.0.1:${perSecond.port}` };
    const redisEnv = {
      reference: { REDIS_TYPE: 'cluster', REDIS_URL: cluster.seeds },
      floodgate: { REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds },
    };
    for (const [i, f] of FLEETS.entries()) fleets.push(await startFleet(redisEnv, { ...common, ...f.env, CACHE_KEY_PREFIX: prefixOf(i) }));
  }, 900_000);
  afterAll(async () => {
    for (const f of fleets) await f.stop();
    await Promise.all([cluster?.stop(), perSecond?.stop()]);
  });

  test.each(FLEETS.map((f, i) => ({ name: f.name, i })))(
    '$name',
    async ({ i }) => {
      await runScenarios(fleets[i]!, `c${i}`);
      await runPerSecond(fleets[i]!, `c${i}`, perSecond, cluster.masters());
    },
    120_000,
  );

  test('one request’s counters lie on several masters, and each is the reference’s key', async () => {
    // The two-descriptor request, written by this test alone (fleet 1, STOP mode): values chosen
    // (bounded search) so that its hour key and its minute override's key are served by two
    // different masters in the current window (no hash tag: each key is routed by its whole name).
    await awayFromWindowEdge(60, SCENARIO_MS);
    const prefix = prefixOf(1);
    const now = Date.now();
    const owners = await slotOwners(cluster.masters());
    const keysOf = (n: number): [string, string] => [
      referenceWindowKey(prefix, { domain: 'a', entries: [{ key: 'user', value: `split-${n}` }] }, 3600, now),
      referenceWindowKey(prefix, { domain: 'a', entries: [{ key: 'client', value: `split-o-${n}` }] }, 60, now),
    ];
    let n = 0;
    while (owners(keySlot(keysOf(n)[0])) === owners(keySlot(keysOf(n)[1]))) if (++n >= 100) throw new Error('no split in 100 values');
    const [hourKey, minuteKey] = keysOf(n);
    const [hourOwner, minuteOwner] = [owners(keySlot(hourKey)), owners(keySlot(minuteKey))];
    expect(hourOwner).not.toBe(minuteOwner);
    const fleet = fleets[1]!;
    const request: TestRequest = { domain: 'a', descriptors: [user(`split-${n}`), override(`split-o-${n}`, 3, 'MINUTE')] };
    // One request to each kind of pod: both counted in the same two keys, on their two masters.
    for (const client of [fleet.floodgate.client, fleet.referenceClient]) {
      const answer = await client.shouldRateLimit(request);
      expect(answer.overall_code).toBe('OK');
    }
    const byPort = new Map(cluster.masters().map((m) => [m.port, m]));
    expect(await byPort.get(hourOwner)!.command('GET', hourKey)).toBe('2');
    expect(await byPort.get(minuteOwner)!.command('GET', minuteKey)).toBe('2');
    // Nothing else of the request was written: no other key of its values, none of floodgate's layout.
    const written = (await Promise.all(cluster.masters().map((m) => scanKeys(m, `${prefix}a_`)))).flat().filter((k) => k.includes('split-'));
    expect(written.sort()).toEqual([hourKey, minuteKey].sort());
    const all = (await Promise.all(cluster.masters().map((m) => scanKeys(m, '')))).flat();
    expect(all.filter((k) => k.includes('rl:{'))).toEqual([]);
  });
});
