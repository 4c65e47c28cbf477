// Issue 19, finding 3: IPv6 listen addresses (Istio's sample sets HOST and GRPC_HOST to `::`),
// and a port in use named by its variable instead of grpc-js' "No address added out of total 1
// resolved". Real servers, real calls over [::1].
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { SettingsError } from '../../src/base/errors';
import { rlsClient } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = {
  'v6.yaml': `
domain: v6
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 1 }
`,
};

const apps: TestApp[] = [];
const blockers: Server[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.stop()));
  await Promise.all(blockers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** Two calls over [::1]: the first is OK, the second OVER_LIMIT, so both reached the counter. */
async function callsOverIpv6(t: TestApp): Promise<string[]> {
  const client = rlsClient(`[::1]:${t.app.grpcPort}`);
  try {
    const request = { domain: 'v6', descriptors: [{ entries: [{ key: 'k', value: 'x' }] }] };
    const codes = [(await client.shouldRateLimit(request)).overall_code, (await client.shouldRateLimit(request)).overall_code];
    return codes.map(String);
  } finally {
    client.close();
  }
}

describe('IPv6 listen addresses (issue 19, finding 3)', () => {
  test.each(['::', '::1'])("HOST, GRPC_HOST and DEBUG_HOST '%s': gRPC, HTTP and debug answer over [::1]", async (host) => {
    const t = await startTestApp(RULES, { HOST: host, GRPC_HOST: host, DEBUG_HOST: host });
    apps.push(t);
    expect(await callsOverIpv6(t)).toEqual(['OK', 'OVER_LIMIT']);
    expect((await fetch(`http://[::1]:${t.app.httpPort}/healthcheck`)).status).toBe(200);
    const rlconfig = await fetch(`http://[::1]:${t.app.debugPort}/rlconfig`);
    expect(rlconfig.status).toBe(200);
    expect(await rlconfig.text()).toContain('v6.k: unit=HOUR requests_per_unit=1');
  });

  test("'::' also takes IPv4 clients, as Go's listener on '::' does", async () => {
    const t = await startTestApp(RULES, { HOST: '::', GRPC_HOST: '::' });
    apps.push(t);
    const client = rlsClient(`127.0.0.1:${t.app.grpcPort}`);
    try {
      expect(await client.healthCheck()).toBe('SERVING');
    } finally {
      client.close();
    }
    expect((await fetch(`http://127.0.0.1:${t.app.httpPort}/healthcheck`)).status).toBe(200);
  });
});

function occupiedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => resolve((s.address() as { port: number }).port));
    blockers.push(s);
  });
}

async function startError(env: Record<string, string>): Promise<Error> {
  try {
    apps.push(await startTestApp(RULES, env));
  } catch (err) {
    return err as Error;
  }
  throw new Error('the start did not fail');
}

describe('a port in use is named by its variable (issue 19)', () => {
  test.each(['GRPC_PORT', 'PORT', 'DEBUG_PORT'])('%s', async (variable) => {
    const port = await occupiedPort();
    const err = await startError({ DEBUG_HOST: '127.0.0.1', [variable]: String(port) });
    console.log(`${variable} in use: ${err.message}`);
    expect(err).toBeInstanceOf(SettingsError);
    expect(err.message).toBe(`${variable} ${port} is in use`);
  });
});
