// Issue 8, findings 6, 9 and 12: the SAN check compares type and value, a bad certificate reload
// keeps the last good pair (and says so), and /json is not a way around gRPC mTLS.
import * as net from 'node:net';
import { request as httpRequest } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadProtos } from '../../src/grpc/protos';
import type { WireResponse } from '../../src/rls/wire-types';
import { createLogger } from '../../src/base/log';
import { makeCertificates, makeClientCertificate } from '../helpers/certificates';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = {
  't.yaml': `
domain: t
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 100 }
`,
};
const SAN = 'spiffe://cluster/envoy';

function call(client: grpc.Client, timeoutMs = 3000): Promise<WireResponse> {
  return new Promise((resolve, reject) => {
    (client as unknown as { ShouldRateLimit: (r: unknown, o: unknown, cb: (e: Error | null, r: WireResponse) => void) => void }).ShouldRateLimit(
      oneDescriptor('t', { k: 'v' }),
      { deadline: Date.now() + timeoutMs },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
  });
}

const dir = mkdtempSync(join(tmpdir(), 'floodgate-tls-checks-'));
const apps: TestApp[] = [];
afterAll(async () => {
  await Promise.all(apps.map((a) => a.stop()));
  rmSync(dir, { recursive: true, force: true });
});

function clientWith(t: TestApp, name: string, caDir = dir): grpc.Client {
  const read = (d: string, f: string) => readFileSync(join(d, f));
  return new (loadProtos().rlsClient)(
    `127.0.0.1:${t.app.grpcPort}`,
    grpc.credentials.createSsl(read(caDir, 'ca.crt'), read(dir, `${name}.key`), read(dir, `${name}.crt`)),
  );
}

async function startMtls(files: string, env: Record<string, string> = {}, lines?: string[]): Promise<TestApp> {
  const t = await startTestApp(
    RULES,
    {
      GRPC_SERVER_USE_TLS: 'true',
      GRPC_SERVER_TLS_CERT: join(files, 'server.crt'),
      GRPC_SERVER_TLS_KEY: join(files, 'server.key'),
      GRPC_CLIENT_TLS_CACERT: join(files, 'ca.crt'),
      ...env,
    },
    lines ? { logger: createLogger('WARN', 'text', (l) => lines.push(l)) } : {},
  );
  apps.push(t);
  return t;
}

beforeAll(() => {
  makeCertificates(dir);
  makeClientCertificate(dir, 'uri', `URI:${SAN}`);
  makeClientCertificate(dir, 'dns', `DNS:${SAN}`);
  makeClientCertificate(dir, 'email', `email:${SAN}`);
  makeClientCertificate(dir, 'ip', 'IP:10.0.0.1');
  makeClientCertificate(dir, 'other', 'DNS:other.example');
});

describe('GRPC_CLIENT_TLS_SAN compares the SAN type and value (finding 12)', () => {
  test('a URI or DNS SAN equal to the setting is answered; an email SAN with the same text is UNAUTHENTICATED', async () => {
    const t = await startMtls(dir, { GRPC_CLIENT_TLS_SAN: SAN });
    const outcome = async (name: string) => {
      const c = clientWith(t, name);
      try {
        return await call(c).then(
          (r) => r.overall_code,
          (e: grpc.ServiceError) => grpc.status[e.code],
        );
      } finally {
        c.close();
      }
    };
    expect(await outcome('uri')).toBe('OK');
    expect(await outcome('dns')).toBe('OK');
    expect(await outcome('email')).toBe('UNAUTHENTICATED');
    expect(await outcome('other')).toBe('UNAUTHENTICATED');
  });

  test('an IP SAN never matches, even with the same text', async () => {
    const t = await startMtls(dir, { GRPC_CLIENT_TLS_SAN: '10.0.0.1' });
    const c = clientWith(t, 'ip');
    await expect(call(c)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    c.close();
  });
});

describe('a bad certificate reload keeps the last good pair (finding 9)', () => {
  test('a mismatched key, then a missing key: connections still succeed, each is logged; a good pair is then served', async () => {
    const files = mkdtempSync(join(tmpdir(), 'floodgate-tls-reload-'));
    const next = mkdtempSync(join(tmpdir(), 'floodgate-tls-reload-next-'));
    try {
      for (const f of ['ca.crt', 'ca.key', 'server.crt', 'server.key']) writeFileSync(join(files, f), readFileSync(join(dir, f)));
      const lines: string[] = [];
      const t = await startMtls(files, {}, lines);
      const answered = async (caDir = dir) => {
        const c = clientWith(t, 'uri', caDir);
        try {
          return await call(c, 1500).then(
            () => true,
            () => false,
          );
        } finally {
          c.close();
        }
      };
      expect(await answered()).toBe(true);

      makeCertificates(next);
      // A key that does not belong to the certificate.
      writeFileSync(join(files, 'server.key'), readFileSync(join(next, 'server.key')));
      const waitForLog = async (pattern: RegExp) => {
        for (let i = 0; i < 50 && !lines.some((l) => pattern.test(l)); i++) await new Promise((r) => setTimeout(r, 100));
        return lines.find((l) => pattern.test(l));
      };
      expect(await waitForLog(/server\.key/)).toMatch(/level=error.*keeping the previous certificate.*key values mismatch/);
      expect(await answered()).toBe(true);

      lines.length = 0;
      unlinkSync(join(files, 'server.key'));
      expect(await waitForLog(/server\.key/)).toMatch(
        /level=error.*keeping the previous certificate.*GRPC_SERVER_TLS_KEY.*(ENOENT|no such file)/,
      );
      expect(await answered()).toBe(true);

      // A good pair (of a new CA) is served within seconds; the client trusts the new CA.
      for (const f of ['server.crt', 'server.key']) writeFileSync(join(files, f), readFileSync(join(next, f)));
      let rotated = false;
      for (let i = 0; i < 25 && !rotated; i++) {
        rotated = await answered(next);
        if (!rotated) await new Promise((r) => setTimeout(r, 200));
      }
      expect(rotated).toBe(true);
    } finally {
      rmSync(files, { recursive: true, force: true });
      rmSync(next, { recursive: true, force: true });
    }
  });
});

/** POST /json from `localAddress`: 127.0.0.6 is where Istio's sidecar connects from, for any remote client. */
function postJsonFrom(port: number, localAddress: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/json', method: 'POST', localAddress, timeout: 5000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(JSON.stringify({ domain: 't', descriptors: [{ entries: [{ key: 'k', value: 'j' }] }] }));
  });
}

describe('/json while gRPC requires client certificates (issue 8 finding 6, issue 18 finding 13)', () => {
  // A same-pod proxy (Istio's sidecar, from 127.0.0.6) passed the old loopback check for any
  // remote client: loopback is not identity, so /json is off unless the operator turns it on.
  test('is refused (403) even from loopback, by default; /healthcheck stays open', async () => {
    const t = await startMtls(dir, { GRPC_CLIENT_TLS_SAN: SAN });
    for (const from of ['127.0.0.6', '127.0.0.1']) {
      const res = await postJsonFrom(t.app.httpPort, from);
      console.log(`/json from ${from} under mTLS: ${res.status} ${res.body.trim()}`);
      expect(res.status).toBe(403);
      expect(res.body).toContain('HTTP_JSON_WITHOUT_CLIENT_CERT');
    }
    expect((await fetch(`${t.httpUrl}/healthcheck`)).status).toBe(200);
  });

  test('HTTP_JSON_WITHOUT_CLIENT_CERT=true turns it on, for every client', async () => {
    const t = await startMtls(dir, { GRPC_CLIENT_TLS_SAN: SAN, HTTP_JSON_WITHOUT_CLIENT_CERT: 'true' });
    expect((await postJsonFrom(t.app.httpPort, '127.0.0.6')).status).toBe(200);
  });
});

describe('idle connections on the TLS port (finding 5)', () => {
  test('a raw TCP connection that never starts the TLS handshake is closed after GRPC_MAX_CONNECTION_IDLE', async () => {
    const t = await startMtls(dir, { GRPC_MAX_CONNECTION_IDLE: '1s' });
    const socket = net.connect(t.app.grpcPort, '127.0.0.1').resume();
    const t0 = Date.now();
    const closed = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 6000);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    socket.destroy();
    console.log(`raw connection to the TLS port closed: ${closed} after ${Date.now() - t0} ms (GRPC_MAX_CONNECTION_IDLE=1s)`);
    expect(closed).toBe(true);
  });
});
