// A start that fails partway (a port already taken) must leave nothing running: every listener,
// the rules watcher, the Redis clients and the health timer that were started are closed again.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startApp } from '../../src/app/app';
import type { Limiter } from '../../src/limiter/limiter';
import { MemoryLimiter } from '../../src/limiter/memory/memory-limiter';
import { createLogger } from '../../src/base/log';
import { loadSettings, type Settings } from '../../src/settings/settings';
import { freePort } from '../harness/free-port';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { sleep, waitUntil } from '../harness/wait';

const RULE = 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5 }\n';
const PORT_SETTING = { grpc: 'GRPC_PORT', http: 'PORT', debug: 'DEBUG_PORT', prometheus: 'PROMETHEUS_ADDR' } as const;
type Listener = keyof typeof PORT_SETTING;

function occupy(): Promise<net.Server & { port: number }> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      resolve(Object.assign(server, { port: (server.address() as net.AddressInfo).port }));
    });
  });
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

describe('startApp when a listen fails partway', () => {
  const root = mkdtempSync(join(tmpdir(), 'floodgate-start-failure-'));
  let redis: RedisProcess;
  let taken: net.Server & { port: number };
  beforeAll(async () => {
    mkdirSync(join(root, 'config'));
    writeFileSync(join(root, 'config', 'd.yaml'), RULE);
    redis = await startStandalone();
    taken = await occupy();
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => (taken ? taken.close(() => resolve()) : resolve()));
    await redis?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  async function settingsWithTaken(listener: Listener, env: Record<string, string>): Promise<{ settings: Settings; ports: number[] }> {
    const ports = { grpc: await freePort(), http: await freePort(), debug: await freePort(), prometheus: await freePort() };
    ports[listener] = taken.port;
    const settings = loadSettings({
      RUNTIME_ROOT: root,
      RUNTIME_WATCH_ROOT: 'false',
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(ports.grpc),
      HOST: '127.0.0.1',
      PORT: String(ports.http),
      DEBUG_HOST: '127.0.0.1',
      DEBUG_PORT: String(ports.debug),
      USE_PROMETHEUS: 'true',
      PROMETHEUS_ADDR: `127.0.0.1:${ports.prometheus}`,
      ...env,
    });
    const others = (Object.keys(ports) as Listener[]).filter((l) => l !== listener).map((l) => ports[l]);
    return { settings, ports: others };
  }

  test.each(Object.keys(PORT_SETTING) as Listener[])('the %s port taken: the start fails and closes what it opened', async (listener) => {
    const { settings, ports } = await settingsWithTaken(listener, { REDIS_URL: redis.url });
    // Named by its variable (issue 19): `GRPC_PORT 8081 is in use`, `PROMETHEUS_ADDR 127.0.0.1:9090 is in use`.
    await expect(startApp(settings, { logger: createLogger('ERROR', 'text') })).rejects.toThrow(
      new RegExp(`^${PORT_SETTING[listener]} (127\\.0\\.0\\.1:)?${taken.port} is in use$`),
    );

    // Every port it may have bound is free again.
    for (const port of ports) expect(await canBind(port), `port ${port} still bound`).toBe(true);
    // The Redis client is gone: only the INFO connection itself remains.
    await waitUntil('the Redis client to disconnect', async () => (await redis.info('clients')).get('connected_clients') === '1', {
      timeoutMs: 20_000,
    });
  });

  test('a per-second Redis URL that cannot be used: the main Redis client is closed again', async () => {
    const { settings } = await settingsWithTaken('prometheus', {
      REDIS_URL: redis.url,
      REDIS_PERSECOND: 'true',
      REDIS_PERSECOND_URL: 'no-port-here',
    });
    await expect(startApp(settings, { logger: createLogger('ERROR', 'text') })).rejects.toThrow(/REDIS_URL.*no-port-here/);
    await waitUntil('the Redis client to disconnect', async () => (await redis.info('clients')).get('connected_clients') === '1', {
      timeoutMs: 20_000,
    });
  });

  test('the rules watcher stops: a later change to the rules is not loaded', async () => {
    const lines: string[] = [];
    const logger = createLogger('INFO', 'text', (line) => lines.push(line));
    const { settings } = await settingsWithTaken('debug', {});
    await expect(startApp(settings, { logger })).rejects.toThrow(/^DEBUG_PORT \d+ is in use$/);
    writeFileSync(join(root, 'config', 'd.yaml'), RULE.replace('requests_per_unit: 5', 'requests_per_unit: 6'));
    // A running watcher reloads within its debounce (inotify) or its 1 s poll.
    await sleep(2500);
    expect(lines.filter((line) => line.includes('rules reloaded'))).toEqual([]);
  });

  test('the health timer stops and the limiter is closed', async () => {
    let healthReads = 0;
    let closed = false;
    const memory = new MemoryLimiter();
    const limiter: Limiter = {
      check: (checks, options) => memory.check(checks, options),
      isHealthy: () => {
        healthReads++;
        return memory.isHealthy();
      },
      close: async () => {
        closed = true;
        await memory.close();
      },
    };
    const { settings } = await settingsWithTaken('http', {});
    await expect(startApp(settings, { logger: createLogger('ERROR', 'text'), limiter })).rejects.toThrow(/^PORT \d+ is in use$/);
    expect(closed).toBe(true);
    // The health state re-reads its inputs every 250 ms while it runs.
    const readsAfterFailure = healthReads;
    await sleep(800);
    expect(healthReads).toBe(readsAfterFailure);
  });
});
