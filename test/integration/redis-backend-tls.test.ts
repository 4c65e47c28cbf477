// REDIS_TLS with its certificate files, and REDIS_AUTH in both forms, against a real
// redis-server that listens with TLS only for floodgate (its plain port serves the harness).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../harness/free-port';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { makeCertificates } from '../helpers/certificates';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { oneRule, timedCall } from './redis-backend-helpers';
import { fixedWindowCount } from '../helpers/fixed-window-value';

const RULES = { 'tls.yaml': oneRule('tls', 'k', 3) };

describe('Redis over mutual TLS, with an ACL user (REDIS_TLS*, REDIS_AUTH user:password)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-redis-tls-'));
  let redis: RedisProcess;
  let tlsPort: number;
  const apps: TestApp[] = [];
  beforeAll(async () => {
    makeCertificates(dir);
    tlsPort = await freePort();
    redis = await startStandalone({
      password: 'default-secret',
      extraArgs: [
        '--tls-port',
        String(tlsPort),
        '--tls-cert-file',
        join(dir, 'server.crt'),
        '--tls-key-file',
        join(dir, 'server.key'),
        '--tls-ca-cert-file',
        join(dir, 'ca.crt'),
        '--tls-auth-clients',
        'yes',
        '--user',
        'floodgate',
        'on',
        '>fg-secret',
        '~*',
        '&*',
        '+@all',
      ],
    });
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const tlsEnv = (extra: Record<string, string>) => ({
    REDIS_URL: `127.0.0.1:${tlsPort}`,
    REDIS_TLS: 'true',
    REDIS_TLS_CACERT: join(dir, 'ca.crt'),
    CACHE_KEY_PREFIX: 'tls_',
    ...extra,
  });

  test('counts exactly with a client certificate and the ACL user', async () => {
    const t = await startTestApp(
      RULES,
      tlsEnv({
        REDIS_TLS_CLIENT_CERT: join(dir, 'client.crt'),
        REDIS_TLS_CLIENT_KEY: join(dir, 'client.key'),
        REDIS_AUTH: 'floodgate:fg-secret',
      }),
    );
    apps.push(t);
    const remaining = [];
    for (let i = 0; i < 4; i++) remaining.push((await timedCall(t.client, oneDescriptor('tls', { k: 'a' }), 2000)).remaining);
    expect(remaining).toEqual([2, 1, 0, 0]);
    expect((await timedCall(t.client, oneDescriptor('tls', { k: 'a' }), 2000)).code).toBe('OVER_LIMIT');
    // The counter really is in Redis.
    expect(await fixedWindowCount(redis, 'tls_rl:{tls:k=a}:fixed_window:3600')).toBe(5);
  });

  test('with the default user password only (REDIS_AUTH password)', async () => {
    const t = await startTestApp(
      RULES,
      tlsEnv({
        REDIS_TLS_CLIENT_CERT: join(dir, 'client.crt'),
        REDIS_TLS_CLIENT_KEY: join(dir, 'client.key'),
        REDIS_AUTH: 'default-secret',
        CACHE_KEY_PREFIX: 'tls2_',
      }),
    );
    apps.push(t);
    expect((await timedCall(t.client, oneDescriptor('tls', { k: 'b' }), 2000)).remaining).toBe(2);
  });

  test('without a client certificate Redis refuses the connection: not healthy, calls UNAVAILABLE', async () => {
    const t = await startTestApp(
      RULES,
      // Serving without Redis is an explicit choice since issue 28 (start-up otherwise waits for it).
      tlsEnv({
        REDIS_AUTH: 'floodgate:fg-secret',
        BACKEND_FAILURE_MODE: 'error',
        REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true',
        REDIS_STARTUP_MAX_ELAPSED_TIME: '500ms',
        REDIS_STARTUP_SERVE_ANYWAY: 'true',
      }),
    );
    apps.push(t);
    expect(t.app.limiter.isHealthy()).toBe(false);
    expect(await t.client.healthCheck('ratelimit')).toBe('NOT_SERVING');
    expect((await timedCall(t.client, oneDescriptor('tls', { k: 'c' }), 5000)).code).toBe('UNAVAILABLE');
  });
});
