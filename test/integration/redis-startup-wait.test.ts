// REDIS_STARTUP_MAX_ELAPSED_TIME: as the reference, start-up waits that long for Redis (retrying
// in the background) and fails without it; a Redis that comes up within the time is used.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { startApp } from '../../src/app/app';
import { createLogger } from '../../src/base/log';
import { loadSettings } from '../../src/settings/settings';
import { trackChild } from '../harness/cleanup-registry';
import { freePort } from '../harness/free-port';
import { REDIS_SERVER_BIN, requireRedisServer } from '../harness/redis-binary';

const root = mkdtempSync(join(tmpdir(), 'floodgate-startup-wait-'));
mkdirSync(join(root, 'config'));
writeFileSync(join(root, 'config', 'd.yaml'), 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5 }\n');

async function settingsFor(redisPort: number, maxElapsed: string, extra: Record<string, string> = {}) {
  return loadSettings({
    RUNTIME_ROOT: root,
    RUNTIME_WATCH_ROOT: 'false',
    HOST: '127.0.0.1',
    PORT: '0',
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(await freePort()),
    DEBUG_PORT: '0',
    USE_PROMETHEUS: 'false',
    USE_STATSD: 'false',
    REDIS_URL: `127.0.0.1:${redisPort}`,
    REDIS_STARTUP_MAX_ELAPSED_TIME: maxElapsed,
    ...extra,
  });
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('REDIS_STARTUP_MAX_ELAPSED_TIME', () => {
  test('no Redis within the time: the start fails, naming the setting, and leaves nothing listening', async () => {
    const settings = await settingsFor(await freePort(), '700ms');
    const started = Date.now();
    await expect(startApp(settings, { logger: createLogger('ERROR', 'text') })).rejects.toThrow(
      'Redis not reachable within REDIS_STARTUP_MAX_ELAPSED_TIME (700 ms)',
    );
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(650);
    expect(took).toBeLessThan(4000);
    expect(await canBind(settings.grpcPort)).toBe(true);
  });

  test('REDIS_STARTUP_SERVE_ANYWAY: after the time without Redis, it serves (the failure mode answering) instead of failing', async () => {
    const settings = await settingsFor(await freePort(), '700ms', { REDIS_STARTUP_SERVE_ANYWAY: 'true', BACKEND_FAILURE_MODE: 'allow' });
    const app = await startApp(settings, { logger: createLogger('ERROR', 'text') });
    try {
      expect(app.limiter.isHealthy()).toBe(false);
      expect(await canBind(settings.grpcPort)).toBe(false);
      expect(app.health.isServing()).toBe(true);
    } finally {
      await app.stop();
    }
  });

  // Redis comes up after the 5 s that floodgate waits without the setting, so only the setting explains a healthy start.
  test('a Redis that comes up within the time is used: the start waits for it, past the usual 5 s', { timeout: 20_000 }, async () => {
    requireRedisServer();
    const port = await freePort();
    const settings = await settingsFor(port, '10s');
    const starting = startApp(settings, { logger: createLogger('ERROR', 'text') });
    await new Promise((resolve) => setTimeout(resolve, 5500));
    const redis = spawn(REDIS_SERVER_BIN, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    trackChild(redis);
    try {
      const app = await starting;
      try {
        expect(app.limiter.isHealthy()).toBe(true);
      } finally {
        await app.stop();
      }
    } finally {
      redis.kill('SIGKILL');
    }
  });
});
