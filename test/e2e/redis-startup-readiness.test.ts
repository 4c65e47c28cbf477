// Issue 28, section 2: a broken Redis setting never gives a Ready pod. The server is started the
// way the shipped Deployment starts it (deploy/kubernetes/base: its environment, the built
// server), only the addresses changed to loopback ports of this test:
// - REDIS_URL at a dead port: the pod is not Ready (/healthcheck and the gRPC health service the
//   readiness probe asks), it keeps retrying, and it becomes Ready once a redis-server answers
//   on that port;
// - REDIS_URL missing (a broken Secret or ConfigMap reference): it refuses to start, naming the
//   variable, instead of counting in this pod's memory.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { projectRoot } from '../../src/base/paths';
import { trackChild } from '../harness/cleanup-registry';
import { freePort } from '../harness/free-port';
import { REDIS_SERVER_BIN, requireRedisServer } from '../harness/redis-binary';
import { sleep, waitUntil } from '../harness/wait';
import { kustomize, type Manifest } from '../helpers/kustomize-lite';
import { rlsClient } from '../helpers/rls-client';
import { SERVER_NODE_FLAGS } from '../helpers/server-process';

const root = mkdtempSync(join(tmpdir(), 'floodgate-startup-ready-'));
mkdirSync(join(root, 'config'));
writeFileSync(join(root, 'config', 'd.yaml'), 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5 }\n');
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface EnvVar {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: { configMapKeyRef?: { name: string; key: string }; secretKeyRef?: { optional?: boolean } };
}

/** The shipped Deployment's environment, its references resolved by `refs` (an optional Secret absent). */
function deploymentEnv(refs: Record<string, string | undefined>): Record<string, string> {
  const deployment = kustomize(join(projectRoot, 'deploy/kubernetes/base')).find(
    (o: Manifest) => o['kind'] === 'Deployment' && (o['metadata'] as { name: string }).name === 'floodgate',
  ) as { spec: { template: { spec: { containers: { env: EnvVar[] }[] } } } };
  const env: Record<string, string> = {};
  for (const v of deployment.spec.template.spec.containers[0]!.env) {
    if (v.value !== undefined) env[v.name] = v.value;
    else if (v.valueFrom?.secretKeyRef?.optional) continue;
    else if (refs[v.name] !== undefined) env[v.name] = refs[v.name]!;
    else if (!(v.name in refs)) throw new Error(`the test does not know how to resolve ${v.name}`);
  }
  return env;
}

interface Addresses {
  readonly grpcPort: number;
  readonly httpPort: number;
}

/** The Deployment's environment with this test's loopback addresses and rules directory. */
async function shippedEnv(redisUrl: string | undefined): Promise<{ env: Record<string, string>; ports: Addresses }> {
  const ports = { grpcPort: await freePort(), httpPort: await freePort() };
  const env: Record<string, string> = {
    // REDIS_TYPE as the base's ConfigMap floodgate-redis sets it: one server, as this test's Redis.
    ...deploymentEnv({ REDIS_URL: redisUrl, REDIS_TYPE: 'SINGLE' }),
    RUNTIME_ROOT: root,
    HOST: '127.0.0.1',
    PORT: String(ports.httpPort),
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(ports.grpcPort),
    DEBUG_HOST: '127.0.0.1',
    DEBUG_PORT: String(await freePort()),
    PROMETHEUS_ADDR: `127.0.0.1:${await freePort()}`,
    LOG_LEVEL: 'INFO',
  };
  if (redisUrl === undefined) delete env['REDIS_URL'];
  return { env, ports };
}

interface Started {
  readonly proc: ChildProcess;
  readonly exited: Promise<number | null>;
  output(): string;
}

function startServer(env: Record<string, string>): Started {
  const proc = spawn(process.execPath, [...SERVER_NODE_FLAGS, join(projectRoot, 'dist/src/main.js')], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  trackChild(proc);
  let err = '';
  proc.stderr.on('data', (chunk: Buffer) => {
    err = (err + chunk.toString()).slice(-50_000);
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, exited, output: () => err };
}

/** /healthcheck's status, or 0 when nothing answers on the port. */
function healthcheck(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/healthcheck', timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
  });
}

/** The gRPC health status the readiness probe asks for (service `ratelimit`), or the call's error. */
async function grpcHealth(port: number): Promise<string> {
  const client = rlsClient(`127.0.0.1:${port}`);
  try {
    return await client.healthCheck('ratelimit');
  } catch (err) {
    return `error: ${(err as Error).message}`;
  } finally {
    client.close();
  }
}

/** The seconds the server reports having waited for Redis so far (its own clock), from its log. */
function secondsWaited(output: string): number {
  const waits = [...output.matchAll(/not connected after (\d+) s; still retrying/g)].map((m) => Number(m[1]));
  return waits.length === 0 ? 0 : Math.max(...waits);
}

describe('started as the shipped Deployment starts it', () => {
  test('the kustomize base, the chart and the Envoy Gateway values all set the backend explicitly', () => {
    expect(deploymentEnv({ REDIS_URL: 'x', REDIS_TYPE: 'SINGLE' })['BACKEND_TYPE']).toBe('redis');
    const chart = readFileSync(join(projectRoot, 'deploy/helm/floodgate/templates/deployment.yaml'), 'utf8');
    // Inside `{{- if $redis.enabled }}`: memory only when the values turn Redis off.
    expect(chart).toMatch(/if \$redis\.enabled \}\}\s*\n\s*- name: BACKEND_TYPE\s*\n\s*value: redis\s*\n/);
    const gateway = parse(readFileSync(join(projectRoot, 'deploy/gateways/envoy-gateway-values.yaml'), 'utf8')) as {
      config: { envoyGateway: { provider: { kubernetes: { rateLimitDeployment: { container: { env: EnvVar[] } } } } } };
    };
    const gatewayEnv = gateway.config.envoyGateway.provider.kubernetes.rateLimitDeployment.container.env;
    expect(gatewayEnv.find((e) => e.name === 'BACKEND_TYPE')?.value).toBe('redis');
  });

  test('REDIS_URL at a dead port: never Ready while it retries, Ready once Redis answers there', { timeout: 90_000 }, async () => {
    requireRedisServer();
    const redisPort = await freePort();
    const { env, ports } = await shippedEnv(`127.0.0.1:${redisPort}`);
    const server = startServer(env);
    let redis: ChildProcess | undefined;
    try {
      // Until the server says it has retried for 10 s (past the 5 s after which floodgate used
      // to serve anyway), every look finds it not Ready.
      const until = Date.now() + 60_000;
      while (secondsWaited(server.output()) < 10) {
        if (Date.now() > until) throw new Error(`no report of 10 s of retrying within 60 s:\n${server.output()}`);
        expect(server.proc.exitCode, server.output()).toBeNull();
        expect(await healthcheck(ports.httpPort), server.output()).not.toBe(200);
        expect(await grpcHealth(ports.grpcPort), server.output()).not.toBe('SERVING');
        await sleep(200);
      }
      expect(server.output()).toContain('ECONNREFUSED');
      redis = spawn(REDIS_SERVER_BIN, ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
        stdio: 'ignore',
      });
      trackChild(redis);
      await waitUntil(
        'the server to become Ready',
        async () => (await healthcheck(ports.httpPort)) === 200 && (await grpcHealth(ports.grpcPort)) === 'SERVING',
        { timeoutMs: 30_000, intervalMs: 100, diagnostics: () => server.output() },
      );
    } finally {
      server.proc.kill('SIGKILL');
      redis?.kill('SIGKILL');
    }
  });

  test('REDIS_URL missing (a broken Secret reference): it refuses to start, naming the variable', { timeout: 30_000 }, async () => {
    const { env } = await shippedEnv(undefined);
    const server = startServer(env);
    try {
      const code = await Promise.race([server.exited, new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), 20_000))]);
      expect(code, server.output()).toBe(2);
      expect(server.output()).toContain("invalid value for REDIS_URL: '' (required when BACKEND_TYPE is redis)");
    } finally {
      server.proc.kill('SIGKILL');
    }
  });
});
