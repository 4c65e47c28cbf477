import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { trackDir } from '../harness/cleanup-registry';
import { freePort } from '../harness/free-port';
import { sleep, timerLateness, waitUntil } from '../harness/wait';
import { makeCertificates, makeClientCertificate } from '../helpers/certificates';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { startXdsServer, xdsServerBinary, type RateLimitConfigJson, type SeenRequest, type XdsServer } from '../helpers/xds-server';

// Rules from a real go-control-plane management server (test/xds-server), over ADS.

const limitConfig = (name: string, domain: string, requestsPerUnit: number, unit = 'HOUR'): RateLimitConfigJson => ({
  name,
  domain,
  descriptors: [{ key: 'k', rate_limit: { unit, requests_per_unit: requestsPerUnit } }],
});

const FAST_RETRY = {
  CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '100ms',
  XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '100ms',
  XDS_CLIENT_BACKOFF_MAX_INTERVAL: '500ms',
};

async function rlconfig(t: TestApp): Promise<string> {
  return (await fetch(`${t.debugUrl}/rlconfig`)).text();
}

/**
 * Milliseconds until /rlconfig contains `text`, checked against `withinMs` plus twice how late a
 * control timer of this process (the app runs in it) fired meanwhile: a busy machine delays the
 * load as much. The wait itself is bounded at 30 s, so a slow machine fails on the bound with
 * the figures, not on the wait.
 */
async function inForceWithin(t: TestApp, text: string, withinMs: number): Promise<number> {
  const start = Date.now();
  const control = timerLateness();
  let lateMs: number;
  try {
    await waitUntil(`/rlconfig to show "${text}"`, async () => (await rlconfig(t)).includes(text), {
      timeoutMs: Math.max(withinMs, 30_000),
      intervalMs: 10,
      diagnostics: () => `elapsed ${Date.now() - start} ms`,
    });
  } finally {
    lateMs = await control.stop();
  }
  const took = Date.now() - start;
  expect(took, `in force after ${took} ms; control timers up to ${lateMs.toFixed(0)} ms late`).toBeLessThan(withinMs + 2 * lateMs);
  return took;
}

async function loadErrors(t: TestApp): Promise<number> {
  const text = await t.app.metrics.registry.getSingleMetricAsString('ratelimit_service_config_load_error');
  return Number(/ratelimit_service_config_load_error (\d+)/.exec(text)?.[1] ?? 'NaN');
}

async function codes(t: TestApp, domain: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push((await t.client.shouldRateLimit(oneDescriptor(domain, { k: 'v' }))).overall_code);
  return out;
}

describe('CONFIG_TYPE=GRPC_XDS_SOTW against a go-control-plane server', () => {
  let dir: string;
  let server: XdsServer;
  let t: TestApp;
  const logLines: string[] = [];

  beforeAll(async () => {
    xdsServerBinary(); // a build failure fails here, loudly
    dir = mkdtempSync(join(tmpdir(), 'floodgate-xds-'));
    trackDir(dir);
    server = await startXdsServer({ statePath: join(dir, 'state.json') });
    await server.push('v1', [limitConfig('first', 'xds', 3)]);
    t = await startTestApp(
      {},
      {
        CONFIG_TYPE: 'GRPC_XDS_SOTW',
        CONFIG_GRPC_XDS_SERVER_URL: server.address,
        CONFIG_GRPC_XDS_NODE_ID: 'default',
        CONFIG_GRPC_XDS_NODE_METADATA: 'zone=test-a,role=rls',
        CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: 'x-tenant:acme,Authorization:Bearer t0ken',
        ...FAST_RETRY,
      },
      {
        logger: { debug: () => {}, info: () => {}, warn: (m) => logLines.push(m), error: (m) => logLines.push(m) },
      },
    );
  }, 660_000);
  afterAll(async () => {
    await t?.stop();
    await server?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('the snapshot becomes the rules, as a file with the same rules would', async () => {
    await inForceWithin(t, 'xds.k: unit=HOUR requests_per_unit=3', 5000);
    expect(await rlconfig(t)).toBe('xds.k: unit=HOUR requests_per_unit=3, shadow_mode: false, quota_mode: false\n');
    expect(await codes(t, 'xds', 4)).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT']);
  });

  test('the subscription carries the node, its metadata, the additional headers and ACKs the version', async () => {
    const requests = await server.requests();
    const first = requests[0] as SeenRequest;
    expect(first.node_id).toBe('default');
    expect(first.node_metadata).toEqual({ zone: 'test-a', role: 'rls' });
    expect(first.type_url).toBe('type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig');
    expect(first.headers).toMatchObject({ 'x-tenant': 'acme', authorization: 'Bearer t0ken' });
    expect(requests.some((r) => r.version_info === 'v1' && r.response_nonce !== '' && !r.error_detail)).toBe(true);
  });

  test('a pushed update is in force within 1 s', async () => {
    await server.push('v2', [limitConfig('first', 'xds', 5), limitConfig('second', 'other', 7, 'MINUTE')]);
    await inForceWithin(t, 'xds.k: unit=HOUR requests_per_unit=5', 1000);
    expect(await rlconfig(t)).toContain('other.k: unit=MINUTE requests_per_unit=7');
  });

  test('an invalid snapshot is NACKed with the error text and the old rules stay', async () => {
    const before = await rlconfig(t);
    // Unit left unset (UNKNOWN): the same error a rule file without a valid unit gets.
    await server.push('v3-bad', [
      limitConfig('first', 'xds', 9),
      { name: 'broken', domain: 'broken', descriptors: [{ key: 'k', rate_limit: { requests_per_unit: 1 } }] },
    ]);
    const nack = await waitUntil('a NACK', async () => (await server.requests()).find((r) => r.error_detail), { timeoutMs: 20_000 });
    expect(nack.error_detail).toBe("broken: invalid rate limit unit 'UNKNOWN'");
    expect(nack.version_info).toBe('v2');
    await sleep(200);
    expect(await rlconfig(t)).toBe(before);
    expect(logLines.some((l) => l.includes("error loading new configuration from xDS: broken: invalid rate limit unit 'UNKNOWN'"))).toBe(true);
    expect(await loadErrors(t)).toBe(1);
    // The server answers each NACK with the same snapshot again; the client must not spin on it.
    const nacksBefore = (await server.requests()).filter((r) => r.error_detail).length;
    await sleep(1000);
    const nacksInASecond = (await server.requests()).filter((r) => r.error_detail).length - nacksBefore;
    expect(nacksInASecond).toBeGreaterThan(0);
    expect(nacksInASecond).toBeLessThanOrEqual(6);
    expect(await loadErrors(t)).toBe(1);

    // A duplicate domain across two resources is refused as across two files.
    await server.push('v4-bad', [limitConfig('a', 'xds', 1), limitConfig('b', 'xds', 2)]);
    await waitUntil(
      'the second NACK',
      async () => (await server.requests()).some((r) => r.error_detail === "b: duplicate domain 'xds' in config file"),
      { timeoutMs: 20_000 },
    );
    expect(await rlconfig(t)).toBe(before);
  });

  test('the server going away and coming back changes nothing; the client re-subscribes', async () => {
    const before = await rlconfig(t);
    await server.push('v5', [limitConfig('first', 'xds', 11)]);
    await inForceWithin(t, 'xds.k: unit=HOUR requests_per_unit=11', 1000);
    const address = server.address;
    await server.kill();
    await sleep(800); // several retry periods with the server gone
    expect(await rlconfig(t)).toContain('xds.k: unit=HOUR requests_per_unit=11');
    expect((await t.client.shouldRateLimit(oneDescriptor('xds', { k: 'outage' }))).overall_code).toBe('OK');

    server = await startXdsServer({ listen: address, statePath: join(dir, 'state.json') });
    const resubscribed = await waitUntil('a new subscription', async () => (await server.requests()).find((r) => r.response_nonce === ''), {
      timeoutMs: 20_000,
    });
    // It tells the new server the version it holds, so the same snapshot is not sent again.
    expect(resubscribed.version_info).toBe('v5');
    expect(await rlconfig(t)).not.toBe(before);
    expect(await rlconfig(t)).toContain('xds.k: unit=HOUR requests_per_unit=11');

    await server.push('v6', [limitConfig('first', 'xds', 13)]);
    await inForceWithin(t, 'xds.k: unit=HOUR requests_per_unit=13', 1000);
  });
});

describe('xDS over TLS and mTLS', () => {
  let dir: string;
  const apps: TestApp[] = [];
  const servers: XdsServer[] = [];

  beforeAll(() => {
    xdsServerBinary();
    dir = mkdtempSync(join(tmpdir(), 'floodgate-xds-tls-'));
    trackDir(dir);
    makeCertificates(dir);
    makeClientCertificate(dir, 'rls', 'DNS:ratelimit.internal');
  }, 660_000);
  afterAll(async () => {
    for (const t of apps) await t.stop();
    for (const s of servers) await s.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function serve(clientCa: boolean): Promise<XdsServer> {
    const server = await startXdsServer({
      statePath: join(dir, `state-${servers.length}.json`),
      tls: { cert: join(dir, 'server.crt'), key: join(dir, 'server.key'), ...(clientCa ? { clientCa: join(dir, 'ca.crt') } : {}) },
    });
    servers.push(server);
    await server.push('v1', [limitConfig('tls', 'secure', 2)]);
    return server;
  }

  async function app(env: Record<string, string>): Promise<TestApp> {
    const t = await startTestApp(
      {},
      {
        CONFIG_TYPE: 'GRPC_XDS_SOTW',
        CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
        CONFIG_GRPC_XDS_SERVER_TLS_CACERT: join(dir, 'ca.crt'),
        ...FAST_RETRY,
        ...env,
      },
    );
    apps.push(t);
    return t;
  }

  test('TLS: the server is verified against the CA, by the SAN when one is given', async () => {
    const server = await serve(false);
    const port = server.address.split(':')[1] as string;
    const t = await app({ CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${port}`, CONFIG_GRPC_XDS_SERVER_TLS_SAN: 'localhost' });
    await inForceWithin(t, 'secure.k: unit=HOUR requests_per_unit=2', 5000);
  });

  test('TLS: a server whose certificate does not carry the SAN gets no subscription', async () => {
    const server = await serve(false);
    const t = await app({ CONFIG_GRPC_XDS_SERVER_URL: server.address, CONFIG_GRPC_XDS_SERVER_TLS_SAN: 'not-the-server.example' });
    await sleep(1500);
    expect(await rlconfig(t)).toBe('');
    expect(await server.requests()).toEqual([]);
  });

  test('a TLS file that cannot be read stops the start, naming the variable', async () => {
    await expect(app({ CONFIG_GRPC_XDS_SERVER_TLS_CACERT: join(dir, 'missing-ca.crt') })).rejects.toThrow(
      `invalid value for CONFIG_GRPC_XDS_SERVER_TLS_CACERT: '${join(dir, 'missing-ca.crt')}'`,
    );
  });

  test('mTLS: with the client certificate the rules arrive; without it the server refuses', async () => {
    const server = await serve(true);
    const withCert = await app({
      CONFIG_GRPC_XDS_SERVER_URL: server.address,
      CONFIG_GRPC_XDS_CLIENT_TLS_CERT: join(dir, 'rls.crt'),
      CONFIG_GRPC_XDS_CLIENT_TLS_KEY: join(dir, 'rls.key'),
    });
    await inForceWithin(withCert, 'secure.k: unit=HOUR requests_per_unit=2', 5000);
    const withoutCert = await app({ CONFIG_GRPC_XDS_SERVER_URL: server.address });
    await sleep(1500);
    expect(await rlconfig(withoutCert)).toBe('');
  });
});

describe('re-subscribing waits the configured backoff', () => {
  let dir: string;
  let server: XdsServer | undefined;
  let t: TestApp | undefined;

  beforeAll(() => {
    xdsServerBinary();
    dir = mkdtempSync(join(tmpdir(), 'floodgate-xds-backoff-'));
    trackDir(dir);
  }, 660_000);
  afterAll(async () => {
    await t?.stop();
    await server?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('XDS_CLIENT_BACKOFF_INITIAL_INTERVAL=2s without jitter: no new stream before 2 s, one soon after', async () => {
    server = await startXdsServer({ statePath: join(dir, 'state.json') });
    await server.push('v1', [limitConfig('first', 'slow', 4)]);
    t = await startTestApp(
      {},
      {
        CONFIG_TYPE: 'GRPC_XDS_SOTW',
        CONFIG_GRPC_XDS_SERVER_URL: server.address,
        CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '100ms',
        XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '2s',
        XDS_CLIENT_BACKOFF_MAX_INTERVAL: '10s',
        XDS_CLIENT_BACKOFF_JITTER: 'false',
      },
    );
    await inForceWithin(t, 'slow.k: unit=HOUR requests_per_unit=4', 5000);
    const address = server.address;
    await server.kill();
    const killedAt = Date.now();
    server = await startXdsServer({ listen: address, statePath: join(dir, 'state.json') });
    // On a busy machine the new server may be up only after the first retry (2 s); the next
    // ones come 4 s and 8 s later (no jitter). "Soon after" is soon after the first retry that
    // could find it.
    const upAt = Date.now() - killedAt;
    const retryThatFindsIt = [2000, 6000, 14_000].find((at) => at >= upAt) ?? 24_000;
    await waitUntil('the re-subscription', async () => (await server!.requests()).length > 0, { timeoutMs: 30_000, intervalMs: 20 });
    const waited = Date.now() - killedAt;
    expect(waited).toBeGreaterThanOrEqual(1900);
    expect(waited, `the new server was up after ${upAt} ms`).toBeLessThan(retryThatFindsIt + 2500);
    expect(await rlconfig(t)).toContain('slow.k: unit=HOUR requests_per_unit=4');
  });
});

describe('before the first snapshot, and a server that is not there yet', () => {
  let dir: string;
  const servers: XdsServer[] = [];
  const apps: TestApp[] = [];

  beforeAll(() => {
    xdsServerBinary();
    dir = mkdtempSync(join(tmpdir(), 'floodgate-xds-late-'));
    trackDir(dir);
  }, 660_000);
  afterAll(async () => {
    for (const t of apps) await t.stop();
    for (const s of servers) await s.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function freeAddress(): Promise<string> {
    return `127.0.0.1:${await freePort()}`;
  }

  test('calls get UNAVAILABLE and health is NOT_SERVING (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED) until the first snapshot', async () => {
    const address = await freeAddress();
    const t = await startTestApp(
      {},
      { CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_URL: address, HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: 'true', ...FAST_RETRY },
    );
    apps.push(t);
    await expect(t.client.shouldRateLimit(oneDescriptor('late', { k: 'v' }))).rejects.toMatchObject({
      code: 14,
      details: 'no rate limit configuration loaded',
    });
    expect(await t.client.healthCheck()).toBe('NOT_SERVING');

    // The server appears only now; CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL=100ms finds it soon.
    const server = await startXdsServer({ listen: address, statePath: join(dir, 'late.json') });
    servers.push(server);
    await server.push('v1', [limitConfig('late', 'late', 1)]);
    await inForceWithin(t, 'late.k: unit=HOUR requests_per_unit=1', 1500);
    await waitUntil('SERVING', async () => (await t.client.healthCheck()) === 'SERVING', { timeoutMs: 15_000 });
    expect(await codes(t, 'late', 2)).toEqual(['OK', 'OVER_LIMIT']);
  });

  test('CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL paces the connection attempts', async () => {
    const address = await freeAddress();
    const t = await startTestApp(
      {},
      { CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_URL: address, CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '20s' },
    );
    apps.push(t);
    await sleep(300); // the first attempt has failed: the next one is 20 s away
    const server = await startXdsServer({ listen: address, statePath: join(dir, 'slow.json') });
    servers.push(server);
    await server.push('v1', [limitConfig('slow', 'paced', 1)]);
    await sleep(2000);
    expect(await rlconfig(t)).toBe('');
    expect(await server.requests()).toEqual([]);
  });

  test('XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: a larger snapshot is not taken', async () => {
    const server = await startXdsServer({ statePath: join(dir, 'big.json') });
    servers.push(server);
    const descriptors = Array.from({ length: 50 }, (_, i) => ({ key: `key_${i}`, rate_limit: { unit: 'HOUR', requests_per_unit: 1 } }));
    await server.push('v1', [{ name: 'big', domain: 'big', descriptors }]);
    const small = await startTestApp(
      {},
      { CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_URL: server.address, XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: '512', ...FAST_RETRY },
    );
    apps.push(small);
    const roomy = await startTestApp(
      {},
      { CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_URL: server.address, XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: '65536', ...FAST_RETRY },
    );
    apps.push(roomy);
    await inForceWithin(roomy, 'big.key_49: unit=HOUR requests_per_unit=1', 5000);
    await sleep(500);
    expect(await rlconfig(small)).toBe('');
  });
});
