// Done when: after load, and after SIGKILL of the service process in the middle of load, every
// key under the prefix (on every master) has a TTL: no PTTL -1, ever. The built server runs as
// a real process (`npm run build` first) and is killed with -9 while calls are in flight.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { waitUntil } from '../harness/wait';
import { rlsClient } from '../helpers/rls-client';
import { spawnServer } from '../helpers/server-process';
import { pttls, tally, timedCall, uniquePrefix, type CallOutcome, type RedisNode } from './redis-backend-helpers';

// Three windows, so keys of several lifetimes are created under load.
const RULES = {
  'orphans.yaml': `
domain: orphans
descriptors:
  - key: h
    rate_limit: { unit: hour, requests_per_unit: 1000000 }
  - key: m
    rate_limit: { unit: minute, requests_per_unit: 1000000 }
  - key: d
    rate_limit: { unit: day, requests_per_unit: 1000000 }
`,
};
const WINDOW_MS: Record<string, number> = { h: 3_600_000, m: 60_000, d: 86_400_000 };

let standalone: RedisProcess;
let cluster: RedisClusterHarness;
beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 1 })]);
});
afterAll(async () => {
  await Promise.all([standalone?.stop(), cluster?.stop()]);
});

/** Every key under `prefix` on `masters` with its PTTL. */
async function allTtls(masters: readonly RedisNode[], prefix: string): Promise<Map<string, number>> {
  const all = new Map<string, number>();
  for (const m of masters) for (const [k, v] of await pttls(m, prefix)) all.set(k, v);
  return all;
}

function expectAllExpire(ttls: Map<string, number>): void {
  const orphans = [...ttls].filter(([, ttl]) => ttl < 0);
  expect(orphans, 'keys without a TTL (PTTL -1) or gone between SCAN and PTTL (-2)').toEqual([]);
  for (const [key, ttl] of ttls) {
    // Never longer than two of the key's windows (a fixed window is kept until the window after
    // it ends): `...rl:{orphans:h=...}:fixed_window:3600:<window start>`.
    const unit = /\{orphans:(\w)=/.exec(key)![1]!;
    expect(ttl, key).toBeLessThanOrEqual(2 * WINDOW_MS[unit]!);
  }
}

describe.each([
  { name: 'standalone', env: () => ({ REDIS_URL: standalone.url }), masters: (): RedisNode[] => [standalone] },
  { name: 'cluster', env: () => ({ REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds }), masters: (): RedisNode[] => cluster.masters() },
])('no key without a TTL ($name)', (d) => {
  test('after load, and after SIGKILL of the server while calls are in flight', async () => {
    const prefix = uniquePrefix(`orph_${d.name}`);
    const server = await spawnServer(RULES, { ...d.env(), CACHE_KEY_PREFIX: prefix, BACKEND_FAILURE_MODE: 'error' });
    const client = rlsClient(`127.0.0.1:${server.grpcPort}`);
    try {
      // Eight concurrent streams of calls; most create a new key (a fresh value each time).
      let n = 0;
      let running = true;
      const outcomes: CallOutcome[] = [];
      const stream = async (): Promise<void> => {
        for (let i = 0; running && i < 5000; i++) {
          const id = n++;
          const unit = ['h', 'm', 'd'][id % 3]!;
          // Two descriptors per call: one script call per slot, several keys per call.
          const request = { domain: 'orphans', descriptors: [0, 1].map((j) => ({ entries: [{ key: unit, value: `u${id}-${j}` }] })) };
          outcomes.push(await timedCall(client, request, 10_000));
        }
      };
      const streams = Array.from({ length: 8 }, stream);
      // A fixed amount of work before the kill, however fast this machine is: 150 answered calls
      // (300 new keys), not whatever 400 ms allowed.
      await waitUntil('150 answered calls', () => (tally(outcomes).OK ?? 0) >= 150, { timeoutMs: 90_000, intervalMs: 20 });
      const beforeKill = await allTtls(d.masters(), prefix);
      expect(beforeKill.size).toBeGreaterThan(50);
      expectAllExpire(beforeKill);

      server.proc.kill('SIGKILL');
      await server.exited;
      running = false;
      await Promise.all(streams);
      const codes = tally(outcomes);
      // The load was real and the kill cut calls that were in flight.
      expect(codes.OK).toBeGreaterThan(100);
      expect(outcomes.some((o) => o.code === 'UNAVAILABLE' || o.code === 'CANCELLED' || o.code === 'INTERNAL')).toBe(true);

      const afterKill = await allTtls(d.masters(), prefix);
      expect(afterKill.size).toBeGreaterThanOrEqual(beforeKill.size);
      expectAllExpire(afterKill);
      console.info(
        `orphans (${d.name}): ${codes.OK} calls answered, ${afterKill.size} keys after SIGKILL, every one with a TTL; outcomes ${JSON.stringify(codes)}`,
      );
    } finally {
      client.close();
      server.cleanup();
    }
  });
});
