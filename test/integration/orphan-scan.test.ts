// The orphan-key scan end to end: a counter key without a TTL under the prefix is reported by
// `floodgate keys` (the real bin), repaired by `--fix`, and reported by the running server's
// gauge floodgate_redis_keys_without_ttl; with ORPHAN_SCAN_REPLICAS the server's SCAN calls go
// to the cluster's replicas only.
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { keySlot } from '../harness/key-slot';
import { waitUntil } from '../harness/wait';
import { runCli } from '../helpers/run-cli';
import { startTestApp, type TestApp } from '../helpers/test-app';
import type { Logger } from '../../src/base/log';
import { uniquePrefix } from './redis-backend-helpers';

const RULES = { 'd.yaml': 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n' };

async function gauge(app: TestApp, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${app.debugUrl}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

async function gaugeBecomes(app: TestApp, name: string, value: number): Promise<void> {
  let last: number | undefined;
  await waitUntil(`${name} = ${value}`, async () => (last = await gauge(app, name)) === value, {
    timeoutMs: 20_000,
    intervalMs: 100,
    diagnostics: () => `last value: ${String(last)}`,
  });
}

describe('standalone', () => {
  const warnings: { msg: string; fields?: Record<string, unknown> }[] = [];
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (msg, fields) => void warnings.push({ msg, ...(fields ? { fields } : {}) }),
    error: () => undefined,
  };
  let redis: RedisProcess;
  let app: TestApp;
  const prefix = uniquePrefix('orphan');
  beforeAll(async () => {
    redis = await startStandalone();
    app = await startTestApp(
      RULES,
      { REDIS_URL: redis.url, CACHE_KEY_PREFIX: prefix, ORPHAN_SCAN_INTERVAL: '1s', ORPHAN_SCAN_COUNT: '10' },
      { logger },
    );
  });
  afterAll(async () => {
    await app?.stop();
    await redis?.stop();
  });

  test('a key without TTL: keys reports it, the gauge reports it, --fix repairs it, the gauge clears', async () => {
    // Real counters written by the server have their TTL and are not reported.
    for (let i = 0; i < 3; i++) await app.client.shouldRateLimit({ domain: 'd', descriptors: [{ entries: [{ key: 'k', value: `v${i}` }] }] });
    await gaugeBecomes(app, 'floodgate_redis_keys_without_ttl', 0);
    const orphan = `${prefix}rl:{d:k=lost}:fixed_window:60`;
    await redis.command('SET', orphan, '4');

    const args = ['keys', '--redis', redis.url, '--prefix', prefix];
    expect(await runCli(args)).toEqual({
      code: 1,
      stdout: `no-ttl ${orphan} (string)\nscanned 4 keys on 1 node: 1 without TTL, 0 of unknown shape\n`,
      stderr: '',
    });
    await gaugeBecomes(app, 'floodgate_redis_keys_without_ttl', 1);
    // ...and a sample of the keys is logged.
    const logged = warnings.find((w) => w.msg.startsWith('orphan scan: 1 counter keys without TTL'));
    expect(logged?.fields?.['sample']).toEqual([orphan]);

    const fixed = await runCli([...args, '--fix']);
    expect(fixed).toEqual({
      code: 0,
      stdout: `no-ttl ${orphan} (string) -> ttl 120s\nscanned 4 keys on 1 node: 1 without TTL, 0 of unknown shape, 1 fixed\n`,
      stderr: '',
    });
    expect(Number(await redis.command('TTL', orphan))).toBeGreaterThan(100);
    await gaugeBecomes(app, 'floodgate_redis_keys_without_ttl', 0);
    expect(await gauge(app, 'floodgate_redis_orphan_scan_last_success_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 60);
  });
});

// Issue 30: in the shared layout the counters are the reference's keys; the gauge counts one
// without a TTL, and never another application's key under the prefix.
describe('standalone, REDIS_KEY_LAYOUT=reference', () => {
  let redis: RedisProcess;
  let app: TestApp;
  const prefix = uniquePrefix('orphanref');
  beforeAll(async () => {
    redis = await startStandalone();
    app = await startTestApp(RULES, {
      REDIS_URL: redis.url,
      CACHE_KEY_PREFIX: prefix,
      REDIS_KEY_LAYOUT: 'reference',
      ORPHAN_SCAN_INTERVAL: '1s',
    });
  });
  afterAll(async () => {
    await app?.stop();
    await redis?.stop();
  });

  test("a reference key without TTL is counted by the gauge; another application's key is not", async () => {
    await redis.command('SET', `${prefix}session_alice`, 'theirs');
    // Other applications' keys of a reference key's shape: a domain the rules do not have, a
    // domain-like name, and the rules' domain with window starts no minute window has now.
    const minuteStart = Math.floor(Date.now() / 60_000) * 60;
    await redis.command('SET', `${prefix}orders_2024_11_30`, '5');
    await redis.command('SET', `${prefix}dx_k_v_${minuteStart}`, '5');
    await redis.command('SET', `${prefix}d_k_v_${minuteStart + 7200}`, '5');
    await redis.command('SET', `${prefix}d_k_v_1000000020`, '5');
    await redis.command('SET', `${prefix}d_k_v_${minuteStart + 1}`, '5');
    await gaugeBecomes(app, 'floodgate_redis_keys_without_ttl', 0);
    const orphan = `${prefix}d_k_lost_${Math.floor(Date.now() / 60_000) * 60}`;
    await redis.command('SET', orphan, '4');
    await gaugeBecomes(app, 'floodgate_redis_keys_without_ttl', 1);
    expect(await gauge(app, 'floodgate_redis_keys_unknown_shape')).toBe(0);
  });
});

describe('cluster with ORPHAN_SCAN_REPLICAS', () => {
  let cluster: RedisClusterHarness;
  let app: TestApp;
  const prefix = uniquePrefix('orphanrep');
  beforeAll(async () => {
    cluster = await startCluster({ masters: 3, replicasPerMaster: 1 });
    await cluster.waitForHealthy();
    for (const node of cluster.nodes) await node.command('CONFIG', 'RESETSTAT');
    app = await startTestApp(RULES, {
      REDIS_URL: cluster.seeds,
      REDIS_TYPE: 'CLUSTER',
      CACHE_KEY_PREFIX: prefix,
      ORPHAN_SCAN_INTERVAL: '1s',
      ORPHAN_SCAN_REPLICAS: 'true',
    });
  });
  afterAll(async () => {
    await app?.stop();
    await cluster?.stop();
  });

  test('the gauge counts orphans on every shard, read from replicas only', async () => {
    // One orphan per master (the slot ranges of a fresh 3-master cluster are its thirds),
    // written through a real cluster client so each lands on the master that owns it.
    const keys: string[] = [];
    for (let i = 0; keys.length < 3 && i < 10_000; i++) {
      const key = `${prefix}rl:{d:k=o${i}}:fixed_window:60`;
      if (Math.floor(keySlot(key) / (16384 / 3)) === keys.length) keys.push(key);
    }
    const writer = new Cluster([...cluster.startupNodes]);
    try {
      for (const key of keys) await writer.set(key, '1');
    } finally {
      writer.disconnect();
    }
    await cluster.waitForHealthy();
    await gaugeBecomes(app, 'floodgate_redis_keys_without_ttl', 3);
    const scans = async (node: { command(...a: string[]): Promise<unknown> }) =>
      /cmdstat_scan:calls=(\d+)/.exec(String(await node.command('INFO', 'commandstats')))?.[1] ?? '0';
    for (const m of cluster.masters()) expect(await scans(m), `master ${m.url}`).toBe('0');
    for (const r of cluster.replicas()) expect(Number(await scans(r)), `replica ${r.url}`).toBeGreaterThan(0);

    // The CLI on the same cluster: every master scanned, the three orphans reported and fixed
    // (on the masters), and the replicas' view, hence the gauge, follows.
    const seed = cluster.masters()[0]!.url;
    const args = ['keys', '--redis', seed, '--cluster', '--prefix', prefix];
    const report = await runCli(args);
    expect(report.code).toBe(1);
    expect(report.stdout).toBe(
      [...keys]
        .sort()
        .map((k) => `no-ttl ${k} (string)`)
        .join('\n') + '\nscanned 3 keys on 3 nodes: 3 without TTL, 0 of unknown shape\n',
    );
    const fixed = await runCli([...args, '--fix']);
    expect(fixed.code).toBe(0);
    expect(fixed.stdout.endsWith('scanned 3 keys on 3 nodes: 3 without TTL, 0 of unknown shape, 3 fixed\n')).toBe(true);
    await gaugeBecomes(app, 'floodgate_redis_keys_without_ttl', 0);
  });
});
