// Issue 8, finding 7: with REDIS_TYPE=SENTINEL and REDIS_TLS=true, floodgate speaks TLS to the
// sentinels and to the master they name, and authenticates to the sentinels with
// REDIS_SENTINEL_AUTH (the master with REDIS_AUTH). Real redis-server processes whose TLS ports
// require a client certificate: a plaintext connection (and a cleartext AUTH) cannot succeed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTlsSentinel, type TlsSentinelHarness } from '../harness/redis-servers';
import { makeCertificates } from '../helpers/certificates';
import { fixedWindowCount } from '../helpers/fixed-window-value';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { oneRule, scanKeys, timedCall } from './redis-backend-helpers';

const RULES = { 'st.yaml': oneRule('st', 'k', 3) };
const MASTER_PW = 'master-secret';
const SENTINEL_PW = 'sentinel-secret';

describe('REDIS_TYPE=SENTINEL with REDIS_TLS', () => {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-sentinel-tls-'));
  let harness: TlsSentinelHarness;
  const apps: TestApp[] = [];
  beforeAll(async () => {
    makeCertificates(dir);
    harness = await startTlsSentinel({ certDir: dir, masterPassword: MASTER_PW, sentinelPassword: SENTINEL_PW });
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    await harness?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const env = (extra: Record<string, string> = {}) => ({
    REDIS_TYPE: 'SENTINEL',
    REDIS_URL: `${harness.masterName},127.0.0.1:${harness.sentinelTlsPort}`,
    REDIS_TLS: 'true',
    REDIS_TLS_CACERT: join(dir, 'ca.crt'),
    REDIS_TLS_CLIENT_CERT: join(dir, 'client.crt'),
    REDIS_TLS_CLIENT_KEY: join(dir, 'client.key'),
    REDIS_AUTH: MASTER_PW,
    REDIS_SENTINEL_AUTH: SENTINEL_PW,
    CACHE_KEY_PREFIX: 'stls_',
    ...extra,
  });

  test('counts exactly through TLS sentinels and a TLS master, each with its own password', async () => {
    const t = await startTestApp(RULES, env());
    apps.push(t);
    expect(t.app.limiter.isHealthy()).toBe(true);
    const remaining = [];
    for (let i = 0; i < 3; i++) remaining.push((await timedCall(t.client, oneDescriptor('st', { k: 'a' }), 2000)).remaining);
    expect(remaining).toEqual([2, 1, 0]);
    const [key] = await scanKeys(harness.master, 'stls_');
    expect(await fixedWindowCount(harness.master, key!)).toBe(3);
  });

  test('with a wrong sentinel password the backend stays unhealthy (the sentinel checks REDIS_SENTINEL_AUTH)', async () => {
    // Serving without Redis is an explicit choice since issue 28 (start-up otherwise waits for it).
    const t = await startTestApp(
      RULES,
      env({
        REDIS_SENTINEL_AUTH: 'wrong',
        BACKEND_FAILURE_MODE: 'error',
        REDIS_STARTUP_MAX_ELAPSED_TIME: '500ms',
        REDIS_STARTUP_SERVE_ANYWAY: 'true',
      }),
    );
    apps.push(t);
    expect(t.app.limiter.isHealthy()).toBe(false);
    expect((await timedCall(t.client, oneDescriptor('st', { k: 'b' }), 5000)).code).toBe('UNAVAILABLE');
  });
});
