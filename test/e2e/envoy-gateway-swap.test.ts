// Issue 19, done when: floodgate started exactly as Envoy Gateway's rate-limit Deployment starts
// envoyproxy/ratelimit (internal/infrastructure/kubernetes/ratelimit, testdata/deployments/
// default.yaml): `command: ["/bin/ratelimit"]` with no arguments, as 65534:65534, its environment
// word for word, the `envoy-rate-limit` Secret mounted at /certs (tls.crt, tls.key, ca.crt: one
// pair serves gRPC over TLS and dials the xDS server with mTLS), the RateLimitConfig that Envoy
// Gateway's translator makes of a BackendTrafficPolicy, and its probes (/healthcheck on 8080).
// Only what a test on a shared machine must change is changed, and said so below.
import * as grpc from '@grpc/grpc-js';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { freePort } from '../harness/free-port';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { sleep, waitUntil } from '../harness/wait';
import { awayFromWindowEdge } from '../helpers/windows';
import { makeCertificates, makeServiceCertificate } from '../helpers/certificates';
import { rlsStub, type RlsStub, type TestRequest } from '../helpers/rls-client';
import { spawnCommandWithEnv, type ServerProcess } from '../helpers/server-process';
import { startXdsServer, xdsServerBinary, type RateLimitConfigJson, type XdsServer } from '../helpers/xds-server';

const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;
const RATELIMIT_SAN = 'envoy-ratelimit.envoy-gateway-system.svc.cluster.local';

/**
 * The descriptor tree Envoy Gateway's translator emits for one BackendTrafficPolicy rule
 * (testdata/out/ratelimit-config), with the fields the RateLimitConfig proto carries over xDS.
 */
function leaf(key: string, limit: number | undefined, value: string | null = key): Record<string, unknown> {
  return {
    key,
    ...(value !== null ? { value } : {}),
    rate_limit: limit === undefined ? null : { requests_per_unit: limit, unit: 'HOUR', unlimited: false },
    descriptors: [],
    shadow_mode: false,
    detailed_metric: false,
    quota_mode: false,
  };
}
function policy(loginLimit: number, perUserLimit: number): RateLimitConfigJson {
  const route = (key: string, children: unknown[]) => ({ ...leaf(key, undefined), descriptors: children });
  return {
    name: 'default/eg/http',
    domain: 'default/eg/http',
    descriptors: [
      route('httproute/default/backend/rule/0/match/0/www_example_com', [
        // rule 0: a header match, one shared counter (5 per hour, then the edit)
        route('default/policy/rule/0', [leaf('rule-0-match-0', loginLimit)]),
        // rule 1: `type: Distinct` on x-user-id, one counter per value (no value in the tree)
        route('default/policy/rule/1', [leaf('rule-1-match-0', perUserLimit, null)]),
      ]),
    ],
  };
}
const ROUTE = 'httproute/default/backend/rule/0/match/0/www_example_com';
const shared = (): TestRequest => ({
  domain: 'default/eg/http',
  descriptors: [
    {
      entries: [
        { key: ROUTE, value: ROUTE },
        { key: 'default/policy/rule/0', value: 'default/policy/rule/0' },
        { key: 'rule-0-match-0', value: 'rule-0-match-0' },
      ],
    },
  ],
});
const perUser = (user: string): TestRequest => ({
  domain: 'default/eg/http',
  descriptors: [
    {
      entries: [
        { key: ROUTE, value: ROUTE },
        { key: 'default/policy/rule/1', value: 'default/policy/rule/1' },
        { key: 'rule-1-match-0', value: user },
      ],
    },
  ],
});

let dir: string;
let redis: RedisProcess;
let xds: XdsServer;
let server: ServerProcess | undefined;
let client: RlsStub;
let httpPort: number;
let debugPort: number;

function call(request: TestRequest, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve) => {
    client.ShouldRateLimit(request, { deadline: Date.now() + timeoutMs }, (err, res) =>
      resolve(err ? `error ${grpc.status[err.code]}` : res.overall_code),
    );
  });
}
async function healthcheck(): Promise<number> {
  // 5 s: a busy machine may stall a probe for a second; a probe that fails is a non-200 either way.
  return (await fetch(`http://127.0.0.1:${httpPort}/healthcheck`, { signal: AbortSignal.timeout(5000) })).status;
}

beforeAll(async () => {
  xdsServerBinary();
  dir = mkdtempSync(join(tmpdir(), 'floodgate-eg-'));
  chmodSync(dir, 0o755);
  const pki = join(dir, 'pki');
  mkdirSync(pki);
  makeCertificates(pki);
  makeServiceCertificate(pki, 'ratelimit', `DNS:envoy-ratelimit,DNS:envoy-ratelimit.envoy-gateway-system,DNS:${RATELIMIT_SAN}`);
  // The test's stand-in for envoy-gateway:18001 answers on localhost (no cluster DNS here).
  makeServiceCertificate(pki, 'gateway', 'DNS:envoy-gateway,DNS:localhost');
  // The Secret `envoy-rate-limit` as Kubernetes mounts it at /certs.
  const certs = join(dir, 'certs');
  mkdirSync(certs);
  copyFileSync(join(pki, 'ratelimit.crt'), join(certs, 'tls.crt'));
  copyFileSync(join(pki, 'ratelimit.key'), join(certs, 'tls.key'));
  copyFileSync(join(pki, 'ca.crt'), join(certs, 'ca.crt'));
  // defaultMode 420 (0644), readable by 65534.
  for (const f of ['tls.crt', 'tls.key', 'ca.crt']) chmodSync(join(certs, f), 0o644);
  mkdirSync(join(dir, 'bin'));
  symlinkSync(join(projectRoot, 'bin', 'ratelimit'), join(dir, 'bin', 'ratelimit'));
  mkdirSync(join(dir, 'data'));

  redis = await startStandalone();
  xds = await startXdsServer({
    statePath: join(dir, 'xds-state.json'),
    node: 'envoy-ratelimit',
    tls: { cert: join(pki, 'gateway.crt'), key: join(pki, 'gateway.key'), clientCa: join(pki, 'ca.crt') },
  });
  await xds.push('1', [policy(5, 2)]);

  httpPort = await freePort();
  debugPort = await freePort();
  const [grpcPort, metricsPort] = await Promise.all([freePort(), freePort()]);
  server = await spawnCommandWithEnv(
    { command: join(dir, 'bin', 'ratelimit'), ...(asRoot ? { uid: NOBODY, gid: NOBODY } : {}) },
    {
      // Envoy Gateway's environment, word for word, but for the paths and addresses noted.
      RUNTIME_ROOT: join(dir, 'data'), // /data
      RUNTIME_SUBDIRECTORY: 'ratelimit',
      RUNTIME_IGNOREDOTFILES: 'true',
      RUNTIME_WATCH_ROOT: 'false',
      LOG_LEVEL: 'info',
      USE_STATSD: 'true',
      STATSD_PORT: '9125',
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: `localhost:${xds.address.split(':').at(-1)}`, // envoy-gateway:18001
      CONFIG_GRPC_XDS_NODE_ID: 'envoy-ratelimit',
      GRPC_SERVER_USE_TLS: 'true',
      GRPC_SERVER_TLS_CERT: join(certs, 'tls.crt'),
      GRPC_SERVER_TLS_KEY: join(certs, 'tls.key'),
      GRPC_SERVER_TLS_CA_CERT: join(certs, 'ca.crt'),
      CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
      CONFIG_GRPC_XDS_CLIENT_TLS_CERT: join(certs, 'tls.crt'),
      CONFIG_GRPC_XDS_CLIENT_TLS_KEY: join(certs, 'tls.key'),
      CONFIG_GRPC_XDS_SERVER_TLS_CACERT: join(certs, 'ca.crt'),
      FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url, // redis.redis.svc:6379
      // The ports are the defaults in the pod (8080, 8081, 6070, 9090); free ones here.
      PORT: String(httpPort),
      GRPC_PORT: String(grpcPort),
      DEBUG_PORT: String(debugPort),
      PROMETHEUS_ADDR: `:${metricsPort}`,
    },
  );
  // Envoy's side: TLS to the rate-limit service, verified against the CA, by the Service's name.
  client = rlsStub(`127.0.0.1:${grpcPort}`, grpc.credentials.createSsl(readFileSync(join(pki, 'ca.crt'))), {
    'grpc.ssl_target_name_override': RATELIMIT_SAN,
  });
}, 660_000);
afterAll(async () => {
  client?.close();
  server?.cleanup();
  await xds?.kill();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("floodgate as Envoy Gateway's rate-limit Deployment", () => {
  test('answers from the policy over xDS, through a policy edit and a Redis outage, with /healthcheck 200 throughout', async () => {
    const probes: number[] = [];
    // Probes answered while Redis was away: the outage lasts until there are enough of them.
    let probesInOutage = 0;
    let outage = false;
    let probing = true;
    // The readiness probe (every 5 s, threshold 1) and liveness, polled much more often here.
    const prober = (async () => {
      for (let i = 0; i < 2000 && probing; i++) {
        const status = await healthcheck().catch(() => 0);
        probes.push(status);
        if (outage) probesInOutage++;
        await sleep(100);
      }
    })();
    try {
      if (asRoot) expect(readFileSync(`/proc/${server!.proc.pid}/status`, 'utf8')).toMatch(new RegExp(`^Uid:\\s+${NOBODY}\\s`, 'm'));
      let last = '';
      // The counts below are exact within one hour window.
      await awayFromWindowEdge(3600, 90_000);
      await waitUntil('the first snapshot', async () => (last = await call(shared())) === 'OK', {
        timeoutMs: 30_000,
        intervalMs: 50,
        diagnostics: () => `last answer: ${last}; server said: ${server!.output().slice(-3000)}`,
      });
      // 5 per hour on the shared rule: one call above was the first.
      const first: string[] = [];
      for (let i = 0; i < 5; i++) first.push(await call(shared()));
      expect(first).toEqual(['OK', 'OK', 'OK', 'OK', 'OVER_LIMIT']);
      expect([await call(perUser('alice')), await call(perUser('alice')), await call(perUser('alice')), await call(perUser('bob'))]).toEqual([
        'OK',
        'OK',
        'OVER_LIMIT',
        'OK',
      ]);

      // The policy is edited: 8 per hour. The count so far stays (6 calls counted, the denied one
      // too: a fixed window counts every hit, as the reference does).
      await xds.push('2', [policy(8, 2)]);
      await waitUntil(
        'the edited policy in force',
        async () => (await (await fetch(`http://127.0.0.1:${debugPort}/rlconfig`)).text()).includes('requests_per_unit=8'),
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      expect([await call(shared()), await call(shared()), await call(shared())]).toEqual(['OK', 'OK', 'OVER_LIMIT']);

      // Redis goes away for 3 s: calls are answered at once (UNAVAILABLE: Envoy Gateway's filter
      // fails open), and health stays up, so the kubelet restarts nothing.
      // The outage is a fixed amount of work, not a time: 20 calls and 10 probes, however slow
      // this machine is (each call's deadline leaves a busy machine room; a server waiting
      // for Redis would still run into it).
      await redis.kill('SIGKILL');
      outage = true;
      const during: string[] = [];
      for (let i = 0; i < 20; i++) {
        during.push(await call(perUser('carol'), 5000));
        await sleep(100);
      }
      await waitUntil('10 probes during the outage', () => probesInOutage >= 10, { timeoutMs: 60_000, intervalMs: 50 });
      outage = false;
      expect(new Set(during)).toEqual(new Set(['error UNAVAILABLE']));
      await redis.restart();
      await waitUntil('Redis back', async () => (await call(perUser('dave'), 5000)) === 'OK', { timeoutMs: 30_000, intervalMs: 100 });
      expect(await call(perUser('dave'))).toBe('OK');
      expect(await call(perUser('dave'))).toBe('OVER_LIMIT');
    } finally {
      probing = false;
      await prober;
    }
    expect(probesInOutage).toBeGreaterThanOrEqual(10);
    expect(probes.filter((s) => s !== 200)).toEqual([]);
    console.info(
      `Envoy Gateway swap: ${probes.length} /healthcheck probes (${probesInOutage} while Redis was down), all 200, through a policy edit and a Redis outage`,
    );
  });
});
