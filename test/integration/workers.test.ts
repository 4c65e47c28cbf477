// WORKERS > 1: several processes serve one set of ports (Node cluster), counting in one Redis.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../harness/free-port';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { within } from '../harness/wait';
import { oneDescriptor, rlsClient, type RlsTestClient } from '../helpers/rls-client';
import { spawnServer, type ServerProcess } from '../helpers/server-process';
import { oneRule, tally, timedCall } from './redis-backend-helpers';

const RULES = { 'w.yaml': oneRule('w', 'k', 50) };

/** CPU ticks (user + system) a process has used. */
function cpuTicks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

function childPids(pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

describe('WORKERS=2 on the redis backend', () => {
  let redis: RedisProcess;
  let server: ServerProcess;
  let metricsPort: number;
  const clients: RlsTestClient[] = [];
  beforeAll(async () => {
    redis = await startStandalone();
    metricsPort = await freePort();
    server = await spawnServer(RULES, {
      WORKERS: '2',
      REDIS_URL: redis.url,
      USE_PROMETHEUS: 'true',
      PROMETHEUS_ADDR: `127.0.0.1:${metricsPort}`,
      SHUTDOWN_GRACE_MS: '2000',
    });
    // Several connections (grpc-js would share one between clients without a local pool), so
    // that the primary hands them to both workers.
    for (let i = 0; i < 8; i++) clients.push(rlsClient(`127.0.0.1:${server.grpcPort}`, { 'grpc.use_local_subchannel_pool': 1 }));
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    server?.cleanup();
    await redis?.stop();
  });

  test('two worker processes answer, exactly as one would, and the primary sums their metrics', async () => {
    // Both workers come up (the first one's line started the test; give the second a moment).
    await within(10_000, () => childPids(server.proc.pid!).length >= 2, 'two worker processes');
    const workers = childPids(server.proc.pid!);
    expect(workers).toHaveLength(2);
    const ticksBefore = workers.map(cpuTicks);

    const outcomes = await Promise.all(
      Array.from({ length: 200 }, (_, i) => timedCall(clients[i % clients.length]!, oneDescriptor('w', { k: 'shared' }), 5000)),
    );
    expect(tally(outcomes)).toEqual({ OK: 50, OVER_LIMIT: 150 });
    // Both workers did some of the work.
    workers.forEach((pid, i) => expect(cpuTicks(pid)).toBeGreaterThan(ticksBefore[i]!));

    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(text).toMatch(/ratelimit_service_total_requests\{grpc_method="ShouldRateLimit"\} 200\b/);
    expect(text).toMatch(/ratelimit_service_rate_limit_over_limit\{domain="w",key1="k",key2=""\} 150\b/);
  });

  test('SIGTERM stops every worker and the primary exits 0', async () => {
    const workers = childPids(server.proc.pid!);
    server.proc.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
  });
});

describe('WORKERS on the memory backend', () => {
  test('is refused at start with a message naming the variable', async () => {
    await expect(spawnServer(RULES, { WORKERS: '2' })).rejects.toThrow(
      "invalid value for WORKERS: '2' (more than one worker needs BACKEND_TYPE=redis; memory counters are per process)",
    );
  });
});
