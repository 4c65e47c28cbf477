import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { waitUntil } from '../harness/wait';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';
import { spawnServer, type ServerProcess } from '../helpers/server-process';

// The built server (npm run build first): the SDK is loaded only when TRACING_ENABLED, and
// with it on, spans reach a real OTLP receiver through the standard OTEL_* variables.

const RULES = { 'traced.yaml': 'domain: traced\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n' };

/**
 * Starts the built app in a fresh node, makes one /json call, and reports how many modules of
 * the OpenTelemetry SDK were then loaded. @opentelemetry/api is not counted: prom-client loads
 * it by itself (for exemplars) whenever it is installed, tracing or not.
 */
function openTelemetryModulesLoaded(env: Record<string, string>): Promise<number> {
  return appRun(env).then((r) => r.loaded);
}

/** The same run: the SDK modules loaded, and how long `app.stop()` took. */
function appRun(env: Record<string, string>): Promise<{ loaded: number; stopMs: number }> {
  const script = `
    const { loadSettings } = require(${JSON.stringify(join(projectRoot, 'dist/src/settings/settings.js'))});
    const { startApp } = require(${JSON.stringify(join(projectRoot, 'dist/src/app/app.js'))});
    const quiet = { debug() {}, info() {}, warn() {}, error() {} };
    (async () => {
      const settings = loadSettings({ RUNTIME_ROOT: ${JSON.stringify(join(projectRoot, 'config'))}, RUNTIME_APPDIRECTORY: '.', RUNTIME_WATCH_ROOT: 'false',
        HOST: '127.0.0.1', PORT: '0', GRPC_HOST: '127.0.0.1', GRPC_PORT: '0', DEBUG_PORT: '0', USE_PROMETHEUS: 'false', ...${JSON.stringify(env)} });
      const app = await startApp(settings, { logger: quiet });
      const res = await fetch('http://127.0.0.1:' + app.httpPort + '/json', { method: 'POST', body: JSON.stringify({ domain: 'none', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] }) });
      if (res.status !== 200) throw new Error('json answered ' + res.status);
      const loaded = Object.keys(require.cache).filter((path) => path.includes('/@opentelemetry/') && !path.includes('/@opentelemetry/api/')).length;
      const stopping = Date.now();
      await app.stop();
      process.stdout.write(JSON.stringify({ loaded, stopMs: Date.now() - stopping }));
      process.exit(0);
    })().catch((err) => { console.error(err); process.exit(1); });
  `;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['-e', script],
      { cwd: projectRoot, timeout: 30_000, env: { PATH: process.env.PATH ?? '', ...env } },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout) as { loaded: number; stopMs: number });
      },
    );
  });
}

describe('cost when off: the SDK is not loaded at all', () => {
  test('TRACING_ENABLED unset or false: not one SDK module in the process; true: the SDK is there', async () => {
    expect(await openTelemetryModulesLoaded({})).toBe(0);
    expect(await openTelemetryModulesLoaded({ TRACING_ENABLED: 'false' })).toBe(0);
    // The control: the same probe sees the SDK when tracing is on (with no collector listening:
    // the stop must still be prompt).
    const on = await appRun({ TRACING_ENABLED: 'true', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9/v1/traces' });
    expect(on.loaded).toBeGreaterThan(10);
    // The stop alone, not the SDK's loading (slow on a busy machine): the exporter's flush is cut
    // at 3 s (SHUTDOWN_BOUND_MS), well under its own 10 s timeout.
    console.log(`tracing on, no collector: app.stop() took ${on.stopMs} ms`);
    expect(on.stopMs).toBeLessThan(8000);
  });
});

describe('spans reach an OTLP receiver (TRACING_EXPORTER_PROTOCOL http and grpc)', () => {
  let http: Server;
  let httpBodies: string[] = [];
  let grpcServer: grpc.Server;
  let grpcBodies: Buffer[] = [];
  let grpcHeaders: grpc.Metadata[] = [];
  let grpcPort: number;
  let server: ServerProcess | undefined;

  beforeAll(async () => {
    // OTLP/HTTP: a POST of the export request to /v1/traces.
    http = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/v1/traces') httpBodies.push(Buffer.concat(chunks).toString());
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    http.listen(0, '127.0.0.1');
    await once(http, 'listening');
    // OTLP/gRPC: TraceService/Export, taken as raw bytes (span names are plain UTF-8 in protobuf).
    grpcServer = new grpc.Server();
    const raw = (b: Buffer): Buffer => b;
    grpcServer.addService(
      {
        Export: {
          path: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
          requestStream: false,
          responseStream: false,
          requestSerialize: raw,
          requestDeserialize: raw,
          responseSerialize: raw,
          responseDeserialize: raw,
        },
      },
      {
        Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
          grpcBodies.push(call.request);
          grpcHeaders.push(call.metadata);
          callback(null, Buffer.alloc(0));
        },
      },
    );
    grpcPort = await new Promise<number>((resolve, reject) =>
      grpcServer.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
    );
  });
  afterEach(() => {
    server?.cleanup();
    server = undefined;
    httpBodies = [];
    grpcBodies = [];
    grpcHeaders = [];
  });
  afterAll(() => {
    http?.close();
    grpcServer?.forceShutdown();
  });

  async function callOnce(s: ServerProcess): Promise<void> {
    const client = rlsClient(`127.0.0.1:${s.grpcPort}`);
    try {
      expect((await client.shouldRateLimit(oneDescriptor('traced', { k: 'v' }))).overall_code).toBe('OK');
    } finally {
      client.close();
    }
  }

  test('http (the default): OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_BSP_SCHEDULE_DELAY are honoured', async () => {
    const port = (http.address() as AddressInfo).port;
    server = await spawnServer(RULES, {
      TRACING_ENABLED: 'true',
      TRACING_SERVICE_NAME: 'rls-otlp',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${port}/v1/traces`,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test',
    });
    await callOnce(server);
    const body = await waitUntil('an OTLP/HTTP export', () => httpBodies.find((b) => b.includes('ShouldRateLimit Execution')), {
      timeoutMs: 10_000,
    });
    expect(body).toContain('rls-otlp');
    expect(body).toContain('deployment.environment');
    expect(body).toContain('traced');
  });

  test('grpc: OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_HEADERS are honoured', async () => {
    server = await spawnServer(RULES, {
      TRACING_ENABLED: 'true',
      TRACING_EXPORTER_PROTOCOL: 'grpc',
      TRACING_SERVICE_NAME: 'rls-otlp-grpc',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${grpcPort}`,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-token=s3cret',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    await callOnce(server);
    const body = await waitUntil('an OTLP/gRPC export', () => grpcBodies.find((b) => b.includes('ShouldRateLimit Execution')), {
      timeoutMs: 10_000,
    });
    expect(body.includes('rls-otlp-grpc')).toBe(true);
    expect(grpcHeaders[0]?.get('x-collector-token')).toEqual(['s3cret']);
  });
});
