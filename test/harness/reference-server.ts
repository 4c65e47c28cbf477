import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { goInstalledTool } from '../helpers/go-install-tool';
import { oneDescriptor, rlsStub } from '../helpers/rls-client';
import { trackChild, trackDir, releaseDir } from './cleanup-registry';
import { freePort } from './free-port';
import { waitUntil } from './wait';

/**
 * envoyproxy/ratelimit (the reference), built from its source at a pinned commit by `go install`
 * from the Go module proxy (the same source as a `fetch` of the repository; the proxy serves it as
 * this pseudo-version), once per machine into ~/.cache/floodgate-test. REFERENCE_RATELIMIT_BIN
 * names a binary built otherwise. A machine that cannot build it fails the test that needs it.
 */
export const REFERENCE_MODULE = 'github.com/envoyproxy/ratelimit/src/service_cmd';
export const REFERENCE_VERSION = 'v1.4.1-0.20260122083618-3fb702589d36';

export function referenceBinary(): string {
  return process.env.REFERENCE_RATELIMIT_BIN || goInstalledTool(REFERENCE_MODULE, REFERENCE_VERSION);
}

export interface ReferenceServer {
  readonly grpcPort: number;
  readonly httpPort: number;
  /** What the process printed, the last 20,000 characters. */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts the reference on loopback with `rules` (file name → YAML) and `env` (REDIS_URL and the
 * rest), statsd off. Resolves once it answers a gRPC call, which it does only after Redis answered.
 */
export async function startReference(rules: Record<string, string>, env: Record<string, string>): Promise<ReferenceServer> {
  const bin = referenceBinary();
  const dir = mkdtempSync(join(tmpdir(), 'reference-'));
  trackDir(dir);
  mkdirSync(join(dir, 'config'));
  for (const [name, text] of Object.entries(rules)) writeFileSync(join(dir, 'config', name), text);
  const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
  const child: ChildProcess = spawn(bin, [], {
    env: {
      PATH: process.env.PATH,
      USE_STATSD: 'false',
      LOG_LEVEL: 'WARN',
      REDIS_SOCKET_TYPE: 'tcp',
      RUNTIME_ROOT: dir,
      RUNTIME_SUBDIRECTORY: '.',
      RUNTIME_WATCH_ROOT: 'false',
      HOST: '127.0.0.1',
      PORT: String(httpPort),
      DEBUG_HOST: '127.0.0.1',
      DEBUG_PORT: String(debugPort),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackChild(child);
  let log = '';
  const keep = (chunk: Buffer): void => {
    log = (log + chunk.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    releaseDir(dir);
  };
  const stub = rlsStub(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
  try {
    // A domain no rule names counts nothing; the reference answers it once it serves.
    await waitUntil(
      'the reference to answer gRPC',
      () =>
        new Promise<boolean>((resolve) =>
          stub.ShouldRateLimit(oneDescriptor('readiness-probe', { k: 'v' }), { deadline: Date.now() + 2000 }, (err) => resolve(!err)),
        ),
      { timeoutMs: 60_000, diagnostics: () => log },
    );
  } catch (err) {
    await stop();
    throw err;
  } finally {
    stub.close();
  }
  return { grpcPort, httpPort, output: () => log, stop };
}
