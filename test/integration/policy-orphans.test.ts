// Done when: no policy key is ever left without a TTL: after load, and after SIGKILL of the
// server process in the middle of load, every key under the prefix (on every master) has a
// TTL no longer than the policy needs. The built server runs as a real process (`npm run
// build` first) and is killed with -9 while calls are in flight.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { waitUntil } from '../harness/wait';
import { rlsClient } from '../helpers/rls-client';
import { spawnServer } from '../helpers/server-process';
import { pttls, tally, timedCall, uniquePrefix, type CallOutcome, type RedisNode } from './redis-backend-helpers';

// Some clients call once (fresh state), some hammer (they climb to blocked, whose state lives longest).
const RULES = {
  'orphans.yaml': `
domain: porph
policy:
  client: ip
  route: path
  fingerprint: fp
  window_seconds: 10
  weights: { requests: 1, repeats: 2, routes: 3, denials: 5 }
  thresholds: { elevated: 10, suspicious: 20, blocked: 40 }
  blocked_seconds: 60
  quiet_seconds: 30
descriptors:
  - key: ip
    descriptors:
      - key: path
        descriptors:
          - key: fp
            rate_limit: { unit: minute, requests_per_unit: 5 }
`,
};
// State: at most the box, two quiet periods back to normal and one more in which the next
// decision still sees the steps down; sets and counters: one window.
// A fixed-window counter (60 s) lives until the window after its latest one ends: two windows.
const MAX_TTL_MS = { state: 60_000 + 3 * 30_000, routes: 10_000, prints: 10_000, counter: 2 * 60_000 };

let standalone: RedisProcess;
let cluster: RedisClusterHarness;
beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 1 })]);
}, 90_000);
afterAll(async () => {
  await Promise.all([standalone?.stop(), cluster?.stop()]);
}, 30_000);

async function allTtls(masters: readonly RedisNode[], prefix: string): Promise<Map<string, number>> {
  const all = new Map<string, number>();
  for (const m of masters) for (const [k, v] of await pttls(m, prefix)) all.set(k, v);
  return all;
}

function expectAllExpire(ttls: Map<string, number>): void {
  // -2: the key expired between SCAN and PTTL (10 s windows end during the run), which is fine.
  const orphans = [...ttls].filter(([, ttl]) => ttl === -1);
  expect(orphans, 'keys without a TTL (PTTL -1)').toEqual([]);
  const kinds = new Set<string>();
  for (const [key, ttl] of ttls) {
    const kind = /:policy:(state|routes|prints)$/.exec(key)?.[1] ?? 'counter';
    // Every kind of key was written (SCAN saw it, even if it expired before PTTL).
    kinds.add(kind);
    if (ttl === -2) continue;
    expect(ttl, key).toBeLessThanOrEqual(MAX_TTL_MS[kind as keyof typeof MAX_TTL_MS]);
  }
  expect([...kinds].sort()).toEqual(['counter', 'prints', 'routes', 'state']);
}

describe.each([
  { name: 'standalone', env: () => ({ REDIS_URL: standalone.url }), masters: (): RedisNode[] => [standalone] },
  { name: 'cluster', env: () => ({ REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds }), masters: (): RedisNode[] => cluster.masters() },
])('no policy key without a TTL ($name)', (d) => {
  test('after load, and after SIGKILL of the server while calls are in flight', async () => {
    const prefix = uniquePrefix(`porph_${d.name}`);
    const server = await spawnServer(RULES, { ...d.env(), CACHE_KEY_PREFIX: prefix, BACKEND_FAILURE_MODE: 'error' });
    const client = rlsClient(`127.0.0.1:${server.grpcPort}`);
    try {
      let n = 0;
      let running = true;
      const outcomes: CallOutcome[] = [];
      const stream = async (): Promise<void> => {
        for (let i = 0; running && i < 5000; i++) {
          const id = n++;
          // Every fourth call is one of a few hammering clients; the rest are new clients.
          const ip = id % 4 === 0 ? `h${id % 3}` : `c${id}`;
          const entries = [
            { key: 'ip', value: ip },
            { key: 'path', value: `/p${id % 7}` },
            { key: 'fp', value: `f${id % 5}` },
          ];
          outcomes.push(await timedCall(client, { domain: 'porph', descriptors: [{ entries }] }, 10_000));
        }
      };
      const streams = Array.from({ length: 8 }, stream);
      // Load first: a fixed amount of work, however fast this machine is (waited for, bounded):
      // 200 answered calls, and the hammering clients denied.
      await waitUntil(
        '200 answered calls and a denial',
        () => {
          const codes = tally(outcomes);
          return (codes.OK ?? 0) >= 200 && (codes.OVER_LIMIT ?? 0) > 0;
        },
        { timeoutMs: 90_000, intervalMs: 20, diagnostics: () => JSON.stringify(tally(outcomes)) },
      );
      const scannedAt = Date.now();
      const beforeKill = await allTtls(d.masters(), prefix);
      expect(beforeKill.size).toBeGreaterThan(100);
      expectAllExpire(beforeKill);

      server.proc.kill('SIGKILL');
      await server.exited;
      running = false;
      await Promise.all(streams);
      const codes = tally(outcomes);
      expect(codes.OK).toBeGreaterThan(100);
      // The hammering clients were denied (by their limits, then the box).
      expect(codes.OVER_LIMIT).toBeGreaterThan(0);
      expect(outcomes.some((o) => o.code === 'UNAVAILABLE' || o.code === 'CANCELLED' || o.code === 'INTERNAL')).toBe(true);

      const afterKill = await allTtls(d.masters(), prefix);
      // Keys whose window ended in between are gone (the policy's sets live 10 s); every key that
      // should still live is still there.
      const elapsed = Date.now() - scannedAt;
      const lost = [...beforeKill].filter(([key, ttl]) => ttl > elapsed + 1000 && !afterKill.has(key));
      expect(lost, 'keys gone before their TTL').toEqual([]);
      expectAllExpire(afterKill);
      console.info(
        `policy orphans (${d.name}): ${codes.OK} OK, ${codes.OVER_LIMIT} OVER_LIMIT, ${afterKill.size} keys after SIGKILL, every one with a TTL`,
      );
    } finally {
      client.close();
      server.cleanup();
    }
  }, 120_000);
});
