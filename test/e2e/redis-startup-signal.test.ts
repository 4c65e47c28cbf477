// Issue 28 review: while start-up waits for Redis (REDIS_STARTUP_MAX_ELAPSED_TIME 0: for ever),
// the built server must still stop on SIGTERM, exit 0, well within Kubernetes' default
// terminationGracePeriodSeconds (30 s). In the image Node is PID 1, and PID 1 without a JS
// handler ignores SIGTERM: the handlers must be in place before the wait, so it is run as the
// PID 1 of its own PID namespace too (unshare, when this machine allows it).
// With WORKERS > 1: a bounded start that fails ends the deployment (exit 1, no fork loop), and
// the primary's Prometheus port stays closed until a worker is ready.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { trackChild } from '../harness/cleanup-registry';
import { freePort } from '../harness/free-port';
import { REDIS_SERVER_BIN, requireRedisServer } from '../harness/redis-binary';
import { waitUntil } from '../harness/wait';
import { SERVER_NODE_FLAGS } from '../helpers/server-process';

const root = mkdtempSync(join(tmpdir(), 'floodgate-startup-signal-'));
mkdirSync(join(root, 'config'));
writeFileSync(join(root, 'config', 'd.yaml'), 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5 }\n');
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Below Kubernetes' default terminationGracePeriodSeconds: a stop within it is not a hang. */
const STOP_BOUND_MS = 20_000;

interface Started {
  readonly proc: ChildProcess;
  readonly exited: Promise<number | null>;
  output(): string;
}

async function serverEnv(redisPort: number, extra: Record<string, string>): Promise<Record<string, string>> {
  return {
    PATH: process.env.PATH ?? '',
    BACKEND_TYPE: 'redis',
    REDIS_URL: `127.0.0.1:${redisPort}`,
    RUNTIME_ROOT: root,
    RUNTIME_WATCH_ROOT: 'false',
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(await freePort()),
    DEBUG_HOST: '127.0.0.1',
    DEBUG_PORT: String(await freePort()),
    USE_PROMETHEUS: 'false',
    USE_STATSD: 'false',
    LOG_LEVEL: 'INFO',
    ...extra,
  };
}

function start(command: readonly string[], env: Record<string, string>): Started {
  const proc = spawn(command[0] as string, command.slice(1), { env, stdio: ['ignore', 'ignore', 'pipe'] });
  trackChild(proc);
  let err = '';
  proc.stderr?.on('data', (chunk: Buffer) => {
    err = (err + chunk.toString()).slice(-50_000);
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null))));
  return { proc, exited, output: () => err };
}

const serverCommand = (): string[] => [process.execPath, ...SERVER_NODE_FLAGS, join(projectRoot, 'dist/src/main.js')];

/** Resolves with the exit code, or 'running' once `ms` have passed. */
function exitWithin(server: Started, ms: number): Promise<number | null | 'running'> {
  return Promise.race([server.exited, new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), ms).unref())]);
}

/** Waits until the server's Redis client has been refused: it is inside the start-up wait. */
async function waitingForRedis(server: Started): Promise<void> {
  await waitUntil('the server to be refused by the dead Redis port', () => server.output().includes('ECONNREFUSED'), {
    timeoutMs: 60_000,
    intervalMs: 50,
    diagnostics: () => server.output(),
  });
  expect(server.proc.exitCode, server.output()).toBeNull();
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The host PID of the one child of `pid` (unshare --fork's child: PID 1 of its namespace). */
function childOf(pid: number): number | undefined {
  const file = `/proc/${pid}/task/${pid}/children`;
  if (!existsSync(file)) return undefined;
  const first = readFileSync(file, 'utf8').trim().split(/\s+/)[0];
  return first ? Number(first) : undefined;
}

const unshareWorks =
  process.platform === 'linux' && spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' }).status === 0;

describe('SIGTERM while start-up waits for Redis', () => {
  test('the built server exits 0 soon after the signal', { timeout: 120_000 }, async () => {
    const server = start(serverCommand(), await serverEnv(await freePort(), {}));
    try {
      await waitingForRedis(server);
      const signalled = Date.now();
      server.proc.kill('SIGTERM');
      const code = await exitWithin(server, STOP_BOUND_MS);
      expect(code, server.output()).toBe(0);
      expect(Date.now() - signalled).toBeLessThan(STOP_BOUND_MS);
      console.log(`SIGTERM during the wait for Redis: exit ${code} after ${Date.now() - signalled} ms`);
      expect(server.output()).toContain('received SIGTERM');
    } finally {
      server.proc.kill('SIGKILL');
    }
  });

  test.runIf(unshareWorks)(
    'as PID 1 of its own PID namespace (as in the image) it exits 0 soon after the signal',
    { timeout: 120_000 },
    async () => {
      const server = start(['unshare', '--pid', '--fork', '--mount-proc', ...serverCommand()], await serverEnv(await freePort(), {}));
      let node: number | undefined;
      try {
        await waitingForRedis(server);
        node = await waitUntil('the namespace PID 1', () => childOf(server.proc.pid as number), { timeoutMs: 10_000 });
        // Sent from outside the namespace to its PID 1: the kernel drops it unless a handler is installed.
        const signalled = Date.now();
        process.kill(node, 'SIGTERM');
        const code = await exitWithin(server, STOP_BOUND_MS);
        expect(code, server.output()).toBe(0);
        expect(Date.now() - signalled).toBeLessThan(STOP_BOUND_MS);
        console.log(`SIGTERM to PID 1 during the wait for Redis: exit ${code} after ${Date.now() - signalled} ms`);
      } finally {
        if (node !== undefined) {
          try {
            process.kill(node, 'SIGKILL');
          } catch {
            // already gone
          }
        }
        server.proc.kill('SIGKILL');
      }
    },
  );
});

describe('WORKERS=2 while start-up waits for Redis', () => {
  test('a bounded wait that fails ends the start: exit 1, no worker forked again', { timeout: 120_000 }, async () => {
    const server = start(serverCommand(), await serverEnv(await freePort(), { WORKERS: '2', REDIS_STARTUP_MAX_ELAPSED_TIME: '1s' }));
    try {
      const code = await exitWithin(server, 90_000);
      expect(code, server.output()).toBe(1);
      expect(server.output()).not.toContain('starting a new one');
      expect(server.output()).toContain('Redis not reachable within REDIS_STARTUP_MAX_ELAPSED_TIME');
    } finally {
      server.proc.kill('SIGKILL');
    }
  });

  test('SIGTERM during the wait exits 0; the metrics port stays closed meanwhile', { timeout: 120_000 }, async () => {
    const metricsPort = await freePort();
    const env = await serverEnv(await freePort(), { WORKERS: '2', USE_PROMETHEUS: 'true', PROMETHEUS_ADDR: `127.0.0.1:${metricsPort}` });
    const server = start(serverCommand(), env);
    try {
      await waitingForRedis(server);
      expect(await portOpen(metricsPort), server.output()).toBe(false);
      const signalled = Date.now();
      server.proc.kill('SIGTERM');
      expect(await exitWithin(server, STOP_BOUND_MS), server.output()).toBe(0);
      expect(Date.now() - signalled).toBeLessThan(STOP_BOUND_MS);
    } finally {
      server.proc.kill('SIGKILL');
    }
  });

  test('the metrics port opens once Redis answers', { timeout: 120_000 }, async () => {
    requireRedisServer();
    const redisPort = await freePort();
    const metricsPort = await freePort();
    const server = start(
      serverCommand(),
      await serverEnv(redisPort, { WORKERS: '2', USE_PROMETHEUS: 'true', PROMETHEUS_ADDR: `127.0.0.1:${metricsPort}` }),
    );
    let redis: ChildProcess | undefined;
    try {
      await waitingForRedis(server);
      expect(await portOpen(metricsPort), server.output()).toBe(false);
      redis = spawn(REDIS_SERVER_BIN, ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
        stdio: 'ignore',
      });
      trackChild(redis);
      await waitUntil('the metrics port to open', () => portOpen(metricsPort), {
        timeoutMs: 60_000,
        intervalMs: 100,
        diagnostics: () => server.output(),
      });
      expect(server.output()).toContain(`metrics of all workers on 127.0.0.1:${metricsPort}`);
    } finally {
      server.proc.kill('SIGKILL');
      redis?.kill('SIGKILL');
    }
  });
});
