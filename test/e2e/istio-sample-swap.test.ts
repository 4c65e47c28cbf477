// Issue 19, done when: floodgate started as Istio's own sample starts envoyproxy/ratelimit
// (samples/ratelimit/rate-limit-service.yaml): `command: ["/bin/ratelimit"]`, HOST and GRPC_HOST
// `::`, RUNTIME_ROOT /data with RUNTIME_SUBDIRECTORY ratelimit, RUNTIME_WATCH_ROOT false,
// RUNTIME_IGNOREDOTFILES true, and the ConfigMap `ratelimit-config` mounted at
// /data/ratelimit/config in the layout the kubelet writes: a `..<timestamp>` directory, a `..data`
// link to it, and one link per key. Before, it failed twice before reading a rule (IPv6 hosts).
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { freePort } from '../harness/free-port';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { waitUntil } from '../harness/wait';
import { oneDescriptor, rlsClient, type RlsTestClient } from '../helpers/rls-client';
import { spawnCommandWithEnv, type ServerProcess } from '../helpers/server-process';

/** The sample's ConfigMap, as its comment gives it. */
const SAMPLE_CONFIG = (rootLimit: number) => `domain: echo-ratelimit
descriptors:
  - key: PATH
    value: "/"
    rate_limit:
      unit: minute
      requests_per_unit: ${rootLimit}
  - key: PATH
    rate_limit:
      unit: minute
      requests_per_unit: 100
`;

let dir: string;
let mount: string;
let redis: RedisProcess;
let server: ServerProcess | undefined;
let client: RlsTestClient;
let httpPort: number;
let generation = 0;

/** Writes a new ConfigMap generation and swaps `..data` to it atomically, as the kubelet does. */
function publishConfigMap(files: Record<string, string>): void {
  const stamp = `..2026_11_26_12_00_0${generation++}.000000001`;
  mkdirSync(join(mount, stamp));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(mount, stamp, name), text);
  symlinkSync(stamp, join(mount, '..data_tmp'));
  renameSync(join(mount, '..data_tmp'), join(mount, '..data'));
  for (const name of Object.keys(files)) {
    try {
      symlinkSync(join('..data', name), join(mount, name));
    } catch {
      // The per-key link exists from the first generation and follows `..data`.
    }
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'floodgate-istio-'));
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, 'bin'));
  symlinkSync(join(projectRoot, 'bin', 'ratelimit'), join(dir, 'bin', 'ratelimit'));
  mount = join(dir, 'data', 'ratelimit', 'config');
  mkdirSync(mount, { recursive: true });
  publishConfigMap({ 'config.yaml': SAMPLE_CONFIG(1) });
  redis = await startStandalone();
  httpPort = await freePort();
  const [grpcPort, debugPort, metricsPort] = await Promise.all([freePort(), freePort(), freePort()]);
  server = await spawnCommandWithEnv(
    { command: join(dir, 'bin', 'ratelimit') },
    {
      // The sample's environment, word for word, but for the paths and addresses noted.
      LOG_LEVEL: 'debug',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url, // redis:6379
      USE_STATSD: 'false',
      RUNTIME_ROOT: join(dir, 'data'), // /data
      RUNTIME_SUBDIRECTORY: 'ratelimit',
      RUNTIME_WATCH_ROOT: 'false',
      RUNTIME_IGNOREDOTFILES: 'true',
      HOST: '::',
      GRPC_HOST: '::',
      // The pod's ports are the defaults (8080, 8081, 6070, 9090); free ones here.
      PORT: String(httpPort),
      GRPC_PORT: String(grpcPort),
      DEBUG_PORT: String(debugPort),
      PROMETHEUS_ADDR: `:${metricsPort}`,
    },
  );
  client = rlsClient(`[::1]:${grpcPort}`);
}, 120_000);
afterAll(async () => {
  client?.close();
  server?.cleanup();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("floodgate as Istio's sample rate-limit Deployment", () => {
  test('listens on :: (IPv6 and IPv4), loads the ConfigMap once, and follows a ConfigMap update', async () => {
    expect((await fetch(`http://[::1]:${httpPort}/healthcheck`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${httpPort}/healthcheck`)).status).toBe(200);
    const root = (): Promise<string> => client.shouldRateLimit(oneDescriptor('echo-ratelimit', { PATH: '/' })).then((r) => r.overall_code);
    expect([await root(), await root()]).toEqual(['OK', 'OVER_LIMIT']);
    expect((await client.shouldRateLimit(oneDescriptor('echo-ratelimit', { PATH: '/echo' }))).overall_code).toBe('OK');

    // The operator raises the limit of `/`: the kubelet writes a new generation and swaps `..data`.
    publishConfigMap({ 'config.yaml': SAMPLE_CONFIG(5) });
    await waitUntil('the new ConfigMap generation in force', async () => (await root()) === 'OK', { timeoutMs: 10_000, intervalMs: 200 });
    expect(server!.output()).not.toMatch(/duplicate domain/);
  });
});
