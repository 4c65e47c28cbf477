// Drop-in for a reference deployment that reads its stats through a statsd_exporter sidecar: an
// environment file written for envoyproxy/ratelimit (USE_STATSD left at its default, on), the
// real prometheus/statsd_exporter with the reference's documented mapping, the built server as a
// real process, real gRPC calls, and the Prometheus series the exporter then serves.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { freePort } from '../harness/free-port';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { startStatsdExporter, type StatsdExporter } from '../harness/statsd-exporter';
import { waitUntil } from '../harness/wait';
import { nonZero, parseExposition } from '../helpers/prometheus-text';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';
import { parseEnvFile, spawnServerWithEnv, type ServerProcess } from '../helpers/server-process';

const RULES = `
domain: rl
descriptors:
  - key: api_key
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: tenant
    descriptors:
      - key: plan
        shadow_mode: true
        rate_limit: { unit: minute, requests_per_unit: 1 }
`;

const CONF_YAML = join(projectRoot, 'test/fixtures/statsd-exporter/conf.yaml');
const DEFAULT_MAPPER_YAML = join(projectRoot, 'test/fixtures/statsd-exporter/default_mapper.yaml');
const CALLS = 5 + 3 + 2 + 1;

// A mapping of one's own: renames, a regex with \${n}, a drop, a metric-type filter, defaults.
const CUSTOM_MAPPING = `
defaults:
  observer_type: histogram
mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "rl_hits"
    labels: { domain: "$1", descriptor: "$2" }
  - match: "ratelimit\\\\.service\\\\.rate_limit\\\\.([^.]+)\\\\.(.+)\\\\.(over_limit|within_limit)"
    match_type: regex
    name: "rl_\${3}"
    labels: { domain: "$1", path: "$2" }
  - match: "ratelimit.service.rate_limit.*.*.near_limit"
    action: drop
    name: dropped
  - match: "ratelimit_server.*.total_requests"
    match_metric_type: counter
    name: "rl_requests"
    labels: { method: "$1" }
`;

/** An environment file as one writes it for the reference: no floodgate variable in it. */
async function referenceEnvFile(root: string, redis: RedisProcess, exporter: StatsdExporter, protocolLine = ''): Promise<string> {
  return `
# envoyproxy/ratelimit with a statsd_exporter sidecar (USE_STATSD is on by default)
STATSD_HOST=127.0.0.1
STATSD_PORT=${exporter.statsdPort}
STATS_FLUSH_INTERVAL=300ms
${protocolLine}
USE_PROMETHEUS=false
LOG_LEVEL=info
LOG_FORMAT=json
REDIS_SOCKET_TYPE=tcp
REDIS_URL=${redis.url}
REDIS_POOL_SIZE=10
REDIS_POOL_ON_EMPTY_BEHAVIOR=WAIT
RUNTIME_ROOT=${root}
RUNTIME_SUBDIRECTORY=ratelimit
RUNTIME_WATCH_ROOT=false
RUNTIME_IGNOREDOTFILES=true
HOST=127.0.0.1
PORT=${await freePort()}
GRPC_HOST=127.0.0.1
GRPC_PORT=${await freePort()}
DEBUG_HOST=127.0.0.1
DEBUG_PORT=${await freePort()}
`;
}

/** The same sequence of calls for every run. */
async function sendSequence(server: ServerProcess): Promise<void> {
  const client = rlsClient(`127.0.0.1:${server.grpcPort}`);
  try {
    for (let i = 0; i < 5; i++) await client.shouldRateLimit(oneDescriptor('rl', { api_key: 'a' }));
    for (let i = 0; i < 3; i++) await client.shouldRateLimit(oneDescriptor('rl', { path: '/login', remote_address: '10.0.0.1' }));
    for (let i = 0; i < 2; i++) await client.shouldRateLimit(oneDescriptor('rl', { tenant: 't1', plan: 'free' }));
    await client.shouldRateLimit(oneDescriptor('nope', { k: 'v' }));
  } finally {
    client.close();
  }
}

/** The exporter's samples once the flush carrying all CALLS requests has arrived. */
async function exporterSamplesAfterFlush(
  exporter: StatsdExporter,
  requestsKey = 'ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}',
): Promise<Map<string, number>> {
  // A flush goes out in several datagrams over UDP (and several reads over TCP): the one with the
  // request count may be read before the others, and a busy machine widens the gap. Every call
  // is in, and two scrapes a few flush intervals apart agree, before the figures count.
  let previous = '';
  return waitUntil(
    'the exporter to have every call, and its figures to stay put',
    async () => {
      const text = await exporter.scrape();
      const samples = parseExposition(text);
      if (samples.get(requestsKey) !== CALLS) return undefined;
      const figures = JSON.stringify(nonZero(samples, 'ratelimit_'));
      const stable = figures === previous;
      previous = figures;
      return stable ? samples : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 1000 },
  );
}

describe('statsd through a real statsd_exporter, from a reference environment file', () => {
  let redis: RedisProcess;
  let root: string;
  let exporter: StatsdExporter | undefined;
  let server: ServerProcess | undefined;

  beforeAll(async () => {
    redis = await startStandalone();
    root = mkdtempSync(join(tmpdir(), 'floodgate-statsd-'));
    mkdirSync(join(root, 'ratelimit', 'config'), { recursive: true });
    writeFileSync(join(root, 'ratelimit', 'config', 'rl.yaml'), RULES);
  });

  afterEach(async () => {
    server?.cleanup();
    server = undefined;
    await exporter?.stop();
    exporter = undefined;
    await redis.command('FLUSHALL');
  });

  afterAll(async () => {
    await redis.stop();
    rmSync(root, { recursive: true, force: true });
  });

  test.each([
    ['TCP, gostats default', ''],
    ['UDP, STATSD_PROTOCOL=udp', 'STATSD_PROTOCOL=udp'],
  ])("the reference's documented mapping (examples/prom-statsd-exporter/conf.yaml) gives its series (%s)", async (_, protocolLine) => {
    exporter = await startStatsdExporter(CONF_YAML);
    server = await spawnServerWithEnv(parseEnvFile(await referenceEnvFile(root, redis, exporter, protocolLine)));
    await sendSequence(server);
    const samples = await exporterSamplesAfterFlush(exporter);

    // What conf.yaml makes of the reference's stat names: rule counters of two levels
    // (domain.key) and three levels (domain.key.key) get labels; everything it has no rule for
    // keeps the exporter's default name (dots become underscores).
    expect(nonZero(samples, 'ratelimit_service_rate_limit_')).toEqual({
      'ratelimit_service_rate_limit_total_hits{domain="rl",key1="api_key"}': 5,
      'ratelimit_service_rate_limit_within_limit{domain="rl",key1="api_key"}': 3,
      'ratelimit_service_rate_limit_near_limit{domain="rl",key1="api_key"}': 1,
      'ratelimit_service_rate_limit_over_limit{domain="rl",key1="api_key"}': 2,
      'ratelimit_service_rate_limit_total_hits{domain="rl",key1="path_/login",key2="remote_address"}': 3,
      'ratelimit_service_rate_limit_within_limit{domain="rl",key1="path_/login",key2="remote_address"}': 2,
      'ratelimit_service_rate_limit_near_limit{domain="rl",key1="path_/login",key2="remote_address"}': 1,
      'ratelimit_service_rate_limit_over_limit{domain="rl",key1="path_/login",key2="remote_address"}': 1,
      'ratelimit_service_rate_limit_total_hits{domain="rl",key1="tenant",key2="plan"}': 2,
      'ratelimit_service_rate_limit_within_limit{domain="rl",key1="tenant",key2="plan"}': 1,
      // A limit of 1: the near-limit threshold is floor(0.8) = 0, so the first hit is near.
      'ratelimit_service_rate_limit_near_limit{domain="rl",key1="tenant",key2="plan"}': 1,
      'ratelimit_service_rate_limit_over_limit{domain="rl",key1="tenant",key2="plan"}': 1,
      'ratelimit_service_rate_limit_shadow_mode{domain="rl",key1="tenant",key2="plan"}': 1,
      ratelimit_service_rate_limit_nope_domain_not_found: 1,
    });
    expect(samples.get('ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}')).toBe(CALLS);
    expect(samples.get('ratelimit_service_config_load_success')).toBe(1);
    // The Redis connection (no mapping: the exporter's default names): a gauge and a counter.
    expect(samples.get('ratelimit_redis_pool_cx_active')).toBe(1);
    expect(samples.get('ratelimit_redis_pool_cx_total')).toBe(1);
    // One timer observation per call (the exporter reads `|ms` lines as seconds).
    expect(samples.get('ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"}')).toBe(CALLS);
    // The reference variables of the file that change nothing here are named at start-up, once each.
    expect(server.output().match(/REDIS_POOL_SIZE is set but has no effect/g)).toHaveLength(1);
    expect(server.output().match(/REDIS_POOL_ON_EMPTY_BEHAVIOR is set but has no effect/g)).toHaveLength(1);
  });

  test("through the reference's built-in mapping, statsd gives the same series as floodgate's Prometheus endpoint", async () => {
    exporter = await startStatsdExporter(DEFAULT_MAPPER_YAML);
    server = await spawnServerWithEnv(parseEnvFile(await referenceEnvFile(root, redis, exporter)));
    await sendSequence(server);
    const viaStatsd = await exporterSamplesAfterFlush(exporter);
    const res = await fetch(`http://127.0.0.1:${server.debugPort}/metrics`);
    const direct = parseExposition(await res.text());

    // domain_not_found has no rule in the reference's mapping; floodgate exports it with one fixed
    // label, since an unknown domain is request text (statsd keeps the reference's name).
    const { ratelimit_service_rate_limit_nope_domain_not_found: notFound, ...rules } = nonZero(viaStatsd, 'ratelimit_service_rate_limit_');
    expect(notFound).toBe(1);
    expect(direct.get('ratelimit_service_domain_not_found{domain="(unknown)"}')).toBe(1);
    expect(Object.keys(rules).length).toBe(13);
    expect(nonZero(direct, 'ratelimit_service_rate_limit_')).toEqual(rules);
    for (const key of [
      'ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}',
      'ratelimit_service_config_load_success',
      'ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"}',
    ]) {
      expect(direct.get(key), key).toBe(viaStatsd.get(key));
    }
  });

  test("PROMETHEUS_MAPPER_YAML: floodgate's Prometheus endpoint serves what the real statsd_exporter makes of the same stats with the same mapping", async () => {
    const mappingFile = join(root, 'mapping.yaml');
    writeFileSync(mappingFile, CUSTOM_MAPPING);
    exporter = await startStatsdExporter(mappingFile);
    const prometheusPort = await freePort();
    const env = parseEnvFile(await referenceEnvFile(root, redis, exporter));
    server = await spawnServerWithEnv({
      ...env,
      USE_PROMETHEUS: 'true',
      PROMETHEUS_ADDR: `127.0.0.1:${prometheusPort}`,
      PROMETHEUS_MAPPER_YAML: mappingFile,
    });
    await sendSequence(server);
    const viaExporter = await exporterSamplesAfterFlush(exporter, 'rl_requests{method="ShouldRateLimit"}');
    const mapped = await waitUntil(
      'the mapped series to have every call',
      async () => {
        const samples = parseExposition(await (await fetch(`http://127.0.0.1:${prometheusPort}/metrics`)).text());
        return samples.get('rl_requests{method="ShouldRateLimit"}') === CALLS ? samples : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const ours = (samples: Map<string, number>) => ({ ...nonZero(samples, 'rl_'), ...nonZero(samples, 'ratelimit_') });
    const expected = ours(viaExporter);
    // The exporter reads `|ms` timers as seconds; the reference's own sink (and floodgate's) hands
    // its mapper milliseconds, so only the observation counts compare.
    for (const key of Object.keys(expected)) if (/response_time_(sum|bucket)/.test(key) || key.includes('_response_time{')) delete expected[key];
    const actual = ours(mapped);
    for (const key of Object.keys(actual)) if (/response_time_(sum|bucket)/.test(key) || key.includes('_response_time{')) delete actual[key];
    // The one deliberate difference: an unknown domain is request text, so floodgate never makes
    // it a metric name (issue 18, finding 5); it counts in one fixed series instead.
    expect(expected['ratelimit_service_rate_limit_nope_domain_not_found']).toBe(1);
    delete expected['ratelimit_service_rate_limit_nope_domain_not_found'];
    expect(actual['ratelimit_service_domain_not_found{domain="(unknown)"}']).toBe(1);
    delete actual['ratelimit_service_domain_not_found{domain="(unknown)"}'];
    expect(actual).toEqual(expected);
    expect(actual).toMatchObject({
      'rl_hits{descriptor="api_key",domain="rl"}': 5,
      'rl_over_limit{domain="rl",path="api_key"}': 2,
      'rl_within_limit{domain="rl",path="path_/login.remote_address"}': 2,
      'rl_requests{method="ShouldRateLimit"}': CALLS,
    });
    // Dropped: the two-level near_limit; the three-level ones match no mapping and keep their escaped names.
    expect(Object.keys(actual).filter((k) => k.includes('near_limit'))).toEqual([
      'ratelimit_service_rate_limit_rl_path__login_remote_address_near_limit',
      'ratelimit_service_rate_limit_rl_tenant_plan_near_limit',
    ]);
  });

  test("USE_DOG_STATSD with the reference README's mogrifier and EXTRA_TAGS: the exporter reads the DogStatsD tags as labels", async () => {
    const mappingFile = join(root, 'no-mapping.yaml');
    writeFileSync(mappingFile, 'mappings: []\n');
    exporter = await startStatsdExporter(mappingFile);
    const env = parseEnvFile(await referenceEnvFile(root, redis, exporter));
    server = await spawnServerWithEnv({
      ...env,
      USE_STATSD: 'false',
      USE_DOG_STATSD: 'true',
      EXTRA_TAGS: 'env:test',
      USE_DOG_STATSD_MOGRIFIERS: 'HITS',
      DOG_STATSD_MOGRIFIER_HITS_PATTERN: '^ratelimit\\.service\\.rate_limit\\.([^.]+)\\.(.*)\\.([^.]+)$',
      DOG_STATSD_MOGRIFIER_HITS_NAME: 'ratelimit.service.rate_limit.$3',
      DOG_STATSD_MOGRIFIER_HITS_TAGS: 'domain:$1,descriptor:$2',
    });
    await sendSequence(server);
    const samples = await exporterSamplesAfterFlush(exporter, 'ratelimit_server_ShouldRateLimit_total_requests{env="test"}');
    expect(nonZero(samples, 'ratelimit_service_rate_limit_total_hits')).toEqual({
      'ratelimit_service_rate_limit_total_hits{descriptor="api_key",domain="rl",env="test"}': 5,
      'ratelimit_service_rate_limit_total_hits{descriptor="path_/login.remote_address",domain="rl",env="test"}': 3,
      'ratelimit_service_rate_limit_total_hits{descriptor="tenant.plan",domain="rl",env="test"}': 2,
    });
    expect(samples.get('ratelimit_service_rate_limit_over_limit{descriptor="api_key",domain="rl",env="test"}')).toBe(2);
    expect(samples.get('ratelimit_service_config_load_success{env="test"}')).toBe(1);
  });
});
