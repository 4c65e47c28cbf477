import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as protobuf from 'protobufjs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { RATE_LIMIT_CONFIG_TYPE_URL } from '../../src/config/xds/rate-limit-config-resource';
import { protoDir } from '../../src/base/paths';
import { sleep, waitUntil } from '../harness/wait';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

// Issue 18 finding 4: updates that arrive while a snapshot compiles are coalesced. The
// go-control-plane test server (test/xds-server) waits for each ACK before it sends the next
// snapshot, so it never sends one during a compile; a management server may though (the ADS
// protocol does not forbid it). This one, in the test, writes snapshots whenever told.

interface Request {
  readonly version_info: string;
  readonly response_nonce: string;
  readonly error_detail: { readonly message: string } | null;
}

interface Descriptor {
  readonly key: string;
  readonly rate_limit?: { readonly unit?: number; readonly requests_per_unit: number };
}

interface Config {
  readonly name: string;
  readonly domain: string;
  readonly descriptors: readonly Descriptor[];
}

const MINUTE = 2;

/** An ADS server that sends a snapshot the moment `send` is called, answered or not. */
async function pushAheadAdsServer(): Promise<{
  address: string;
  requests: Request[];
  send(version: string, configs: readonly Config[]): void;
  close(): void;
}> {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(protoDir, target);
  root.loadSync('ratelimit/config/ratelimit/v3/rls_conf.proto', { keepCase: true });
  const RateLimitConfig = root.lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');
  const definition = protoLoader.loadSync('envoy/service/discovery/v3/ads.proto', { keepCase: true, includeDirs: [protoDir], defaults: true });
  const service = (definition['envoy.service.discovery.v3.AggregatedDiscoveryService'] as grpc.ServiceDefinition) ?? {};
  const requests: Request[] = [];
  let stream: grpc.ServerDuplexStream<Request, unknown> | undefined;
  const server = new grpc.Server();
  server.addService(service, {
    StreamAggregatedResources(call: grpc.ServerDuplexStream<Request, unknown>) {
      stream = call;
      call.on('data', (request: Request) => requests.push(request));
      call.on('error', () => {});
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    address: `127.0.0.1:${port}`,
    requests,
    send(version, configs) {
      if (!stream) throw new Error('no ADS stream open');
      stream.write({
        version_info: version,
        nonce: version,
        type_url: RATE_LIMIT_CONFIG_TYPE_URL,
        resources: configs.map((c) => ({
          type_url: RATE_LIMIT_CONFIG_TYPE_URL,
          value: Buffer.from(RateLimitConfig.encode(RateLimitConfig.fromObject(c)).finish()),
        })),
      });
    },
    close() {
      stream?.end();
      server.forceShutdown();
    },
  };
}

async function counter(t: TestApp, name: string): Promise<number> {
  const text = await t.app.metrics.registry.getSingleMetricAsString(name);
  return Number(new RegExp(`${name} (\\d+)`).exec(text)?.[1] ?? 'NaN');
}

/** The limit the rules in force give domain `edit`, key `k`. */
async function editLimit(t: TestApp): Promise<number | undefined> {
  const response = await t.client.shouldRateLimit(oneDescriptor('edit', { k: 'v' }));
  return response.statuses[0]?.current_limit?.requests_per_unit;
}

const edit = (limit: number): Config => ({
  name: 'edit',
  domain: 'edit',
  descriptors: [{ key: 'k', rate_limit: { unit: MINUTE, requests_per_unit: limit } }],
});

/** Enough resources to keep the compile busy for many turns of the event loop. */
const filler = (count: number): Config[] =>
  Array.from({ length: count }, (_, i) => ({
    name: `fill-${String(i).padStart(5, '0')}`,
    domain: `fill-${i}`,
    descriptors: [{ key: 'remote_address', rate_limit: { unit: MINUTE, requests_per_unit: 5 } }],
  }));

describe('xDS updates that arrive while a snapshot compiles are coalesced (issue 18, finding 4)', () => {
  let server: Awaited<ReturnType<typeof pushAheadAdsServer>>;
  let t: TestApp;

  beforeAll(async () => {
    server = await pushAheadAdsServer();
    t = await startTestApp({}, { CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_URL: server.address });
    await waitUntil('the ADS stream', () => server.requests.length > 0, { timeoutMs: 10_000 });
    server.send('v1', [edit(1)]);
    await waitUntil('the first snapshot', async () => (await editLimit(t)) === 1, { timeoutMs: 10_000 });
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
    server?.close();
  });

  test('three snapshots sent back to back: the first and the newest are compiled, the middle one never; the old rules serve meanwhile', async () => {
    const loadsBefore = await counter(t, 'ratelimit_service_config_load_success');
    const errorsBefore = await counter(t, 'ratelimit_service_config_load_error');
    const requestsBefore = server.requests.length;
    // The middle snapshot is bad (a limit without a unit): compiled, it would count a load error and be NACKed.
    server.send('v2-big', [edit(2), ...filler(3000)]);
    server.send('v3-bad', [{ name: 'edit', domain: 'edit', descriptors: [{ key: 'k', rate_limit: { requests_per_unit: 3 } }] }]);
    server.send('v4-newest', [edit(4)]);
    const seen = new Set<number | undefined>();
    const until = Date.now() + 60_000;
    while (Date.now() < until && !server.requests.slice(requestsBefore).some((r) => r.response_nonce === 'v4-newest')) {
      seen.add(await editLimit(t));
      await sleep(5);
    }
    const answers = server.requests.slice(requestsBefore);
    console.log(
      `coalescing: limits seen while compiling ${[...seen].join(', ')}; answers ${answers.map((r) => `${r.response_nonce}${r.error_detail ? ' NACK' : ''}`).join(', ')}`,
    );
    // The old rules answered while the big snapshot compiled.
    expect(seen.has(1)).toBe(true);
    // Only the newest is answered (ACKed); the big one was superseded before its answer, the bad one never compiled.
    expect(answers.map((r) => [r.response_nonce, r.version_info, r.error_detail?.message ?? null])).toEqual([['v4-newest', 'v4-newest', null]]);
    expect(seen.has(3)).toBe(false);
    expect(await editLimit(t)).toBe(4);
    expect(await counter(t, 'ratelimit_service_config_load_error')).toBe(errorsBefore);
    // The big snapshot (compiled: it was in progress) and the newest.
    expect(await counter(t, 'ratelimit_service_config_load_success')).toBe(loadsBefore + 2);
  }, 90_000);
});
