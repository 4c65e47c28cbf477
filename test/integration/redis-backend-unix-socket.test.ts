// REDIS_SOCKET_TYPE unix: REDIS_URL is a socket path (inferred from the path form).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { within } from '../harness/wait';
import { awayFromWindowEdge, oneRule, timedCall } from './redis-backend-helpers';
import { fixedWindowCount } from '../helpers/fixed-window-value';

describe('Redis on a unix socket', () => {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-redis-sock-'));
  const socket = join(dir, 'redis.sock');
  let redis: RedisProcess;
  let t: TestApp;
  beforeAll(async () => {
    redis = await startStandalone({ extraArgs: ['--unixsocket', socket, '--unixsocketperm', '700'] });
    t = await startTestApp({ 'u.yaml': oneRule('u', 'k', 2) }, { REDIS_URL: socket, CACHE_KEY_PREFIX: 'sock_' });
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('counts in Redis through the socket', async () => {
    // Connected first (waited for), away from an hour edge, and deadlines a busy machine meets:
    // the test is about the socket, not the speed.
    await within(30_000, () => t.app.limiter.isHealthy(), 'the backend connected');
    await awayFromWindowEdge(3600, 30_000);
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push((await timedCall(t.client, oneDescriptor('u', { k: 'v' }), 10_000)).code);
    expect(codes).toEqual(['OK', 'OK', 'OVER_LIMIT']);
    expect(await fixedWindowCount(redis, 'sock_rl:{u:k=v}:fixed_window:3600')).toBe(3);
  });
});
