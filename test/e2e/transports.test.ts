import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { makeCertificates } from '../helpers/certificates';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadProtos } from '../../src/grpc/protos';
import type { WireResponse } from '../../src/rls/wire-types';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = `
domain: t
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 10 }
`;

function call(client: grpc.Client, timeoutMs = 3000): Promise<WireResponse> {
  return new Promise((resolve, reject) => {
    (client as unknown as { ShouldRateLimit: (r: unknown, o: unknown, cb: (e: Error | null, r: WireResponse) => void) => void }).ShouldRateLimit(
      oneDescriptor('t', { k: 'v' }),
      { deadline: Date.now() + timeoutMs },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
  });
}

describe('gRPC on a unix socket (GRPC_UDS)', () => {
  let t: TestApp;
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-uds-'));
  const socket = join(dir, 'rls.sock');
  beforeAll(async () => {
    t = await startTestApp({ 't.yaml': RULES }, { GRPC_UDS: socket });
  });
  afterAll(async () => {
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('answers ShouldRateLimit and health over the socket', async () => {
    const client = rlsClient(`unix:${socket}`);
    const res = await client.shouldRateLimit(oneDescriptor('t', { k: 'uds' }));
    expect(res.statuses[0]!.limit_remaining).toBe(9);
    expect(await client.healthCheck('ratelimit')).toBe('SERVING');
    client.close();
  });
});

describe('gRPC with mutual TLS (GRPC_SERVER_USE_TLS + GRPC_CLIENT_TLS_CACERT)', () => {
  let t: TestApp;
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-tls-'));
  beforeAll(async () => {
    makeCertificates(dir);
    t = await startTestApp(
      { 't.yaml': RULES },
      {
        GRPC_SERVER_USE_TLS: 'true',
        GRPC_SERVER_TLS_CERT: join(dir, 'server.crt'),
        GRPC_SERVER_TLS_KEY: join(dir, 'server.key'),
        GRPC_CLIENT_TLS_CACERT: join(dir, 'ca.crt'),
      },
    );
  });
  afterAll(async () => {
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const client = (withCert: boolean, from = dir): grpc.Client => {
    const read = (f: string) => readFileSync(join(from, f));
    const creds = withCert
      ? grpc.credentials.createSsl(read('ca.crt'), read('client.key'), read('client.crt'))
      : grpc.credentials.createSsl(read('ca.crt'));
    return new (loadProtos().rlsClient)(`127.0.0.1:${t.app.grpcPort}`, creds);
  };

  test('a client with a certificate from the CA is answered', async () => {
    const c = client(true);
    expect((await call(c)).overall_code).toBe('OK');
    c.close();
  });

  test('a client without a certificate is refused', async () => {
    const c = client(false);
    await expect(call(c)).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    c.close();
  });

  test('rotated certificate files are served without a restart', async () => {
    const next = mkdtempSync(join(tmpdir(), 'floodgate-tls-next-'));
    try {
      makeCertificates(next);
      const fresh = client(true, next);
      // Before the rotation the server's certificate is not signed by the new CA.
      await expect(call(fresh, 1000)).rejects.toBeDefined();
      fresh.close();
      for (const f of ['server.crt', 'server.key', 'ca.crt']) writeFileSync(join(dir, f), readFileSync(join(next, f)));
      const start = Date.now();
      let answered = false;
      // Waited for, up to 30 s: a busy machine may notice the new files late.
      while (!answered && Date.now() - start < 30_000) {
        const c = client(true, next);
        answered = await call(c, 2000).then(
          () => true,
          () => false,
        );
        c.close();
        if (!answered) await new Promise((r) => setTimeout(r, 200));
      }
      expect(answered).toBe(true);
    } finally {
      rmSync(next, { recursive: true, force: true });
    }
  });

  test('a plaintext client is refused', async () => {
    const c = new (loadProtos().rlsClient)(`127.0.0.1:${t.app.grpcPort}`, grpc.credentials.createInsecure());
    await expect(call(c, 1000)).rejects.toBeDefined();
    c.close();
  });
});

describe('GRPC_CLIENT_TLS_SAN', () => {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-san-'));
  const apps: TestApp[] = [];
  beforeAll(() => makeCertificates(dir));
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (san: string): Promise<grpc.Client> => {
    const t = await startTestApp(
      { 't.yaml': RULES },
      {
        GRPC_SERVER_USE_TLS: 'true',
        GRPC_SERVER_TLS_CERT: join(dir, 'server.crt'),
        GRPC_SERVER_TLS_KEY: join(dir, 'server.key'),
        GRPC_CLIENT_TLS_CACERT: join(dir, 'ca.crt'),
        GRPC_CLIENT_TLS_SAN: san,
      },
    );
    apps.push(t);
    const read = (f: string) => readFileSync(join(dir, f));
    return new (loadProtos().rlsClient)(
      `127.0.0.1:${t.app.grpcPort}`,
      grpc.credentials.createSsl(read('ca.crt'), read('client.key'), read('client.crt')),
    );
  };

  test('a client certificate carrying the SAN is answered', async () => {
    const c = await start('spiffe://cluster/ns/gw/sa/envoy');
    expect((await call(c)).overall_code).toBe('OK');
    c.close();
  });

  test('a client certificate without it is UNAUTHENTICATED', async () => {
    const c = await start('spiffe://cluster/ns/other/sa/intruder');
    await expect(call(c)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    c.close();
  });
});

describe('Prometheus endpoint', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ 't.yaml': RULES }, { USE_PROMETHEUS: 'true', PROMETHEUS_ADDR: '127.0.0.1:0', PROMETHEUS_PATH: '/custom-metrics' });
  });
  afterAll(async () => {
    await t.stop();
  });

  test('serves the reference metric names on PROMETHEUS_PATH', async () => {
    await t.client.shouldRateLimit(oneDescriptor('t', { k: 'prom' }));
    const text = await (await fetch(`http://127.0.0.1:${t.app.metricsPort}/custom-metrics`)).text();
    expect(text).toMatch(/ratelimit_service_rate_limit_total_hits\{domain="t",key1="k",key2=""\} 1/);
    expect(text).toMatch(/ratelimit_service_rate_limit_within_limit\{domain="t",key1="k",key2=""\} 1/);
    expect(text).toMatch(/ratelimit_service_total_requests\{grpc_method="ShouldRateLimit"\} 1/);
    expect(text).toMatch(/ratelimit_service_response_time_seconds_bucket\{le="0.005",grpc_method="ShouldRateLimit"\}/);
    expect(text).toMatch(/ratelimit_service_config_load_success 1/);
    expect((await fetch(`http://127.0.0.1:${t.app.metricsPort}/metrics`)).status).toBe(404);
  });
});
