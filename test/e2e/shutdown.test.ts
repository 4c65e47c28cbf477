import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, test } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { waitUntil } from '../harness/wait';
import { spawnServer, type ServerProcess } from '../helpers/server-process';
import { healthStub, oneDescriptor, rlsClient } from '../helpers/rls-client';

describe('SIGTERM', () => {
  // The example rules of `npm start`.
  const rules = {
    'edge.yaml': readFileSync(join(projectRoot, 'config/edge.yaml'), 'utf8'),
    'billing.yaml': readFileSync(join(projectRoot, 'config/billing.yaml'), 'utf8'),
  };
  const startServer = () => spawnServer(rules, { SHUTDOWN_GRACE_MS: '3000' });
  let server: ServerProcess | undefined;
  afterEach(() => {
    server?.cleanup();
  });

  test('health turns NOT_SERVING, the process exits 0 in bounded time', async () => {
    server = await startServer();
    const client = rlsClient(`127.0.0.1:${server.grpcPort}`);
    expect(await client.healthCheck('')).toBe('SERVING');
    expect(await client.healthCheck('ratelimit')).toBe('SERVING');
    expect((await fetch(`http://127.0.0.1:${server.httpPort}/healthcheck`)).status).toBe(200);
    const ok = await client.shouldRateLimit(oneDescriptor('edge', { api_key: 'k1' }));
    expect(ok.overall_code).toBe('OK');

    // A Watch stream sees the flip to NOT_SERVING before the server closes it.
    const health = healthStub(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
    const seen: string[] = [];
    const watch = health.Watch({ service: 'ratelimit' });
    const ended = new Promise<void>((resolve) => {
      watch.on('data', (m: { status: string }) => seen.push(m.status));
      watch.on('end', () => resolve());
      watch.on('error', () => resolve());
    });
    await waitUntil('the first Watch message', () => seen.length > 0, { timeoutMs: 15_000 });
    expect(seen).toEqual(['SERVING']);

    const t0 = Date.now();
    server.proc.kill('SIGTERM');
    const code = await server.exited;
    await ended;
    expect(code).toBe(0);
    // Bounded: the grace (3 s) and room for a busy machine.
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(seen).toEqual(['SERVING', 'NOT_SERVING']);
    health.close();
    client.close();
  });

  test('an unknown health service name is NOT_FOUND', async () => {
    server = await startServer();
    const client = rlsClient(`127.0.0.1:${server.grpcPort}`);
    await expect(client.healthCheck('something-else')).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    client.close();
  });
});
