// GRPC_MAX_CONNECTION_AGE / _GRACE: the server ends a connection (GOAWAY) once it is that old, so
// Envoy reconnects and load spreads over new replicas; the reference has the same settings.
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, test } from 'vitest';
import { loadProtos } from '../../src/grpc/protos';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = { 'd.yaml': 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 100 }\n' };

function call(client: grpc.Client): Promise<void> {
  return new Promise((resolve, reject) => {
    (client as unknown as Record<string, (...a: unknown[]) => void>)['ShouldRateLimit']!(
      { domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] },
      { deadline: Date.now() + 5000 },
      (err: grpc.ServiceError | null) => (err ? reject(err) : resolve()),
    );
  });
}

/** The channel's states over `ms`, after one call made it READY. */
async function statesAfterOneCall(t: TestApp, ms: number): Promise<grpc.connectivityState[]> {
  const protos = loadProtos();
  const client = new protos.rlsClient(`127.0.0.1:${t.app.grpcPort}`, grpc.credentials.createInsecure()) as grpc.Client;
  try {
    await call(client);
    const channel = client.getChannel();
    const states = [channel.getConnectivityState(false)];
    const until = Date.now() + ms;
    while (Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      const s = channel.getConnectivityState(false);
      if (s !== states[states.length - 1]) states.push(s);
    }
    // The channel still works: it reconnects on the next call.
    await call(client);
    return states;
  } finally {
    client.close();
  }
}

describe('GRPC_MAX_CONNECTION_AGE', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.stop();
    t = undefined;
  });

  test('a connection older than the age is closed by the server (the client goes IDLE, then reconnects)', async () => {
    t = await startTestApp(RULES, { GRPC_MAX_CONNECTION_AGE: '300ms', GRPC_MAX_CONNECTION_AGE_GRACE: '200ms' });
    const states = await statesAfterOneCall(t, 1500);
    expect(states[0]).toBe(grpc.connectivityState.READY);
    expect(states).toContain(grpc.connectivityState.IDLE);
  });

  test('with the default (24h) the connection stays open', async () => {
    t = await startTestApp(RULES);
    expect(await statesAfterOneCall(t, 1500)).toEqual([grpc.connectivityState.READY]);
  });
});
