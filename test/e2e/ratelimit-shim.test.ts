// Issue 19 finding 1: Envoy Gateway (and Istio's sample, and Contour's examples) start the
// rate-limit container with `command: ["/bin/ratelimit"]` and no arguments, as any uid (Envoy
// Gateway: 65534:65534). The image links /bin/ratelimit to bin/ratelimit; here the same shim is
// started through a link of that name, as that user, and must serve.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { freePort } from '../harness/free-port';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';
import { spawnCommandWithEnv, type ServerProcess } from '../helpers/server-process';

const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;

let root: string;
let server: ServerProcess | undefined;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'floodgate-shim-'));
  // What the image has: /bin/ratelimit -> /app/bin/ratelimit.
  mkdirSync(join(root, 'bin'));
  symlinkSync(join(projectRoot, 'bin', 'ratelimit'), join(root, 'bin', 'ratelimit'));
  mkdirSync(join(root, 'data', 'ratelimit', 'config'), { recursive: true });
  writeFileSync(
    join(root, 'data', 'ratelimit', 'config', 'config.yaml'),
    'domain: shim\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n',
  );
  // mkdtemp makes the directory 0700: the rules must be readable by the container's user.
  chmodSync(root, 0o755);
});
afterAll(() => {
  server?.cleanup();
  rmSync(root, { recursive: true, force: true });
});

describe('/bin/ratelimit', () => {
  test('starts the service with no arguments, as uid 65534 when the tests run as root, and serves', async () => {
    const [port, grpcPort, debugPort, metricsPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    server = await spawnCommandWithEnv(
      { command: join(root, 'bin', 'ratelimit'), ...(asRoot ? { uid: NOBODY, gid: NOBODY } : {}) },
      {
        RUNTIME_ROOT: join(root, 'data'),
        RUNTIME_SUBDIRECTORY: 'ratelimit',
        RUNTIME_WATCH_ROOT: 'false',
        RUNTIME_IGNOREDOTFILES: 'true',
        USE_STATSD: 'false',
        HOST: '127.0.0.1',
        GRPC_HOST: '127.0.0.1',
        PORT: String(port),
        GRPC_PORT: String(grpcPort),
        DEBUG_PORT: String(debugPort),
        PROMETHEUS_ADDR: `127.0.0.1:${metricsPort}`,
      },
    );
    if (asRoot) expect(readFileSync(`/proc/${server.proc.pid}/status`, 'utf8')).toMatch(new RegExp(`^Uid:\\s+${NOBODY}\\s`, 'm'));
    expect((await fetch(`http://127.0.0.1:${port}/healthcheck`)).status).toBe(200);
    const client = rlsClient(`127.0.0.1:${grpcPort}`);
    try {
      const first = await client.shouldRateLimit(oneDescriptor('shim', { k: 'a' }));
      const second = await client.shouldRateLimit(oneDescriptor('shim', { k: 'a' }));
      expect([first.overall_code, second.overall_code]).toEqual(['OK', 'OVER_LIMIT']);
    } finally {
      client.close();
    }
  });
});
