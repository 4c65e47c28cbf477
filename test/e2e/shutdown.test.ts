import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, test } from 'vitest';
import { loadProtos } from '../../src/grpc/protos';
import { projectRoot } from '../../src/paths';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';

interface Running {
  proc: ChildProcess;
  grpcPort: number;
  httpPort: number;
  exited: Promise<number | null>;
}

/** Runs the built server (`npm run build` first) as a real process on ephemeral ports. */
async function startServer(): Promise<Running> {
  const proc = spawn(process.execPath, [join(projectRoot, 'dist/src/main.js')], {
    env: {
      PATH: process.env.PATH,
      RUNTIME_ROOT: projectRoot,
      RUNTIME_WATCH_ROOT: 'false',
      HOST: '127.0.0.1',
      PORT: '0',
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: '0',
      DEBUG_PORT: '0',
      USE_PROMETHEUS: 'false',
      SHUTDOWN_GRACE_MS: '3000',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const ports = await new Promise<{ grpcPort: number; httpPort: number }>((resolve, reject) => {
    let err = '';
    const timer = setTimeout(() => reject(new Error(`server did not start: ${err}`)), 15_000);
    proc.stderr!.on('data', (chunk: Buffer) => {
      err += chunk.toString();
      const m = /serving gRPC on [\d.]+:(\d+), HTTP on [\d.]+:(\d+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve({ grpcPort: Number(m[1]), httpPort: Number(m[2]) });
      }
    });
    proc.once('exit', (code) => reject(new Error(`server exited with ${code}: ${err}`)));
  });
  return { proc, exited, ...ports };
}

describe('SIGTERM', () => {
  let server: Running | undefined;
  afterEach(() => {
    server?.proc.kill('SIGKILL');
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
    const protos = loadProtos();
    const health = new protos.healthClient(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
    const seen: string[] = [];
    const watch = health.Watch!({ service: 'ratelimit' });
    const ended = new Promise<void>((resolve) => {
      watch.on('data', (m: { status: string }) => seen.push(m.status));
      watch.on('end', () => resolve());
      watch.on('error', () => resolve());
    });
    await new Promise((r) => setTimeout(r, 200));
    expect(seen).toEqual(['SERVING']);

    const t0 = Date.now();
    server.proc.kill('SIGTERM');
    const code = await server.exited;
    await ended;
    expect(code).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5000);
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

