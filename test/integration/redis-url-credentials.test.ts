// Issue 8, finding 8: a password in REDIS_URL is used as the password, never as part of the host
// name, and never printed (connection warnings, start-up errors).
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../harness/free-port';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { createLogger } from '../../src/base/log';
import { loadSettings } from '../../src/settings/settings';
import { startApp } from '../../src/app/app';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { oneRule, timedCall } from './redis-backend-helpers';

const RULES = { 'u.yaml': oneRule('u', 'k', 3) };
const SECRET = 'hunter2-secret';

describe('user info in REDIS_URL', () => {
  let redis: RedisProcess;
  const apps: TestApp[] = [];
  beforeAll(async () => {
    redis = await startStandalone({ password: SECRET });
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    await redis?.stop();
  });

  test('redis://:password@host:port authenticates with the password and counts', async () => {
    const t = await startTestApp(RULES, { REDIS_URL: `redis://:${SECRET}@127.0.0.1:${redis.port}`, CACHE_KEY_PREFIX: 'url_' });
    apps.push(t);
    expect((await timedCall(t.client, oneDescriptor('u', { k: 'a' }), 2000)).remaining).toBe(2);
  });

  test('while Redis is away, the connection warnings name the host, never the password', async () => {
    const lines: string[] = [];
    const port = await freePort();
    const t = await startTestApp(
      RULES,
      // Serving without Redis is an explicit choice since issue 28 (start-up otherwise waits for it).
      {
        REDIS_URL: `redis://user:${SECRET}@127.0.0.1:${port}`,
        BACKEND_FAILURE_MODE: 'allow',
        REDIS_STARTUP_MAX_ELAPSED_TIME: '500ms',
        REDIS_STARTUP_SERVE_ANYWAY: 'true',
      },
      { logger: createLogger('DEBUG', 'text', (l) => lines.push(l)) },
    );
    apps.push(t);
    expect(lines.some((l) => /level=warn.*redis:.*127\.0\.0\.1/.test(l))).toBe(true);
    expect(lines.join('')).not.toContain(SECRET);
  });

  test('a malformed URL stops start-up without echoing the password', async () => {
    const settings = loadSettings({
      REDIS_URL: `redis://:${SECRET}@no-port-here`,
      RUNTIME_ROOT: '/nonexistent',
      FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
    });
    const err = await startApp(settings, { logger: createLogger('ERROR', 'text', () => undefined) }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/REDIS_URL/);
    expect(err?.message).not.toContain(SECRET);
  });
});
