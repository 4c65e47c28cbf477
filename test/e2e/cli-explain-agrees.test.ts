// `floodgate explain` agrees with the running server: for each request, the real bin's answer
// (--json) is compared with the real server's gRPC answer and with the Redis keys the server
// actually wrote. Wildcards, key-only, exact values, share_threshold, unlimited, whitelists,
// replaces, shadow mode and all five algorithms are covered.
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import Redis from 'ioredis';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { DescriptorExplanation } from '../../src/cli/explain-command';
import { projectRoot } from '../../src/base/paths';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { rlsClient, type RlsTestClient, type TestRequest } from '../helpers/rls-client';
import { runCli } from '../helpers/run-cli';
import { spawnServer, type ServerProcess } from '../helpers/server-process';
import { scanKeys, uniquePrefix } from '../integration/redis-backend-helpers';
import { fixedWindowKey } from '../helpers/fixed-window-value';
import { waitUntil } from '../harness/wait';

const SHOP = join(projectRoot, 'test/fixtures/cli/shop');
const PREFIX = uniquePrefix('explain');

type Entries = Record<string, string>;
// Each request: its descriptors, in order. `+` in the command line separates them.
const REQUESTS: readonly Entries[][] = [
  [{ api_key: 'alice' }],
  [{ api_key: 'partner-42' }],
  [{ api_key: 'test-1' }],
  [{ api_key: 'test-' }],
  [{ api_key: 'xtest-1' }],
  [{ remote_address: '10.0.0.1', path: '/login' }],
  [{ remote_address: '10.0.0.1', path: '/api/v1/items' }],
  [{ remote_address: '10.0.0.1', path: '/other' }],
  [{ remote_address: '10.0.0.1' }],
  [{ static: '/static/app.js' }],
  [{ static: '/static/' }],
  [{ static: '/img/x.png' }],
  [{ health_probe: 'yes' }],
  [{ internal_client: 'batch' }],
  [{ tenant: 'acme:eu' }],
  [{ user: 'bob{1}' }],
  [{ plan: 'premium' }, { api_key: 'carol' }],
  [{ api_key: 'dave' }, { plan: 'premium' }],
  [{ plan: 'basic' }, { api_key: 'erin' }],
  [{ plan: 'premium' }, { api_key: 'test-7' }],
  [{ unknown_key: 'v' }],
  [{ api_key: 'frank' }, { user: 'frank' }, { tenant: 'frank' }],
];

let redis: RedisProcess;
let server: ServerProcess;
let client: RlsTestClient;
let subscriber: Redis;
// Every key the server wrote, as Redis announced it (keyspace notifications). A key that lives
// less than a second (a token bucket refilled at 20/s) may be gone before a SCAN on a busy
// machine; its notification is not.
const written = new Set<string>();
let marks = 0;
beforeAll(async () => {
  redis = await startStandalone();
  await redis.command('CONFIG', 'SET', 'notify-keyspace-events', 'KA');
  subscriber = new Redis({ host: redis.host, port: redis.port, maxRetriesPerRequest: 1 });
  subscriber.on('pmessage', (_pattern: string, channel: string, event: string) => {
    if (channel === '__floodgate_test_mark__') marks = Number(event);
    else if (event !== 'expired' && event !== 'del') written.add(channel.slice(channel.indexOf(':') + 1));
  });
  await subscriber.psubscribe(`__keyspace@0__:${PREFIX}*`, '__floodgate_test_mark__');
  const rules: Record<string, string> = {};
  for (const name of ['shop.yaml', 'search.yaml']) rules[name] = readFileSync(join(SHOP, name), 'utf8');
  server = await spawnServer(rules, { REDIS_URL: redis.url, CACHE_KEY_PREFIX: PREFIX });
  client = rlsClient(`127.0.0.1:${server.grpcPort}`);
});
afterAll(async () => {
  subscriber?.disconnect();
  client?.close();
  server?.cleanup();
  await redis?.stop();
});

/**
 * Resolves once the subscriber has seen every notification of the commands Redis ran so far:
 * Redis publishes in order, so a mark published now arrives after them.
 */
async function notificationsSettled(): Promise<void> {
  const mark = marks + 1;
  await redis.command('PUBLISH', '__floodgate_test_mark__', mark);
  await waitUntil('the keyspace notifications', () => marks >= mark, { timeoutMs: 30_000, intervalMs: 5 });
}

function commandLine(descriptors: readonly Entries[]): string[] {
  return descriptors.flatMap((d, i) => [...(i > 0 ? ['+'] : []), ...Object.entries(d).map(([k, v]) => `${k}=${v}`)]);
}

test(`explain agrees with the server on ${REQUESTS.length} requests`, async () => {
  expect(REQUESTS.length).toBeGreaterThanOrEqual(20);
  const outcomes = new Set<string>();
  for (const descriptors of REQUESTS) {
    const run = await runCli(['explain', SHOP, 'shop', ...commandLine(descriptors), '--json'], { CACHE_KEY_PREFIX: PREFIX });
    expect(run.code, run.stderr).toBe(0);
    const explained = (JSON.parse(run.stdout) as { descriptors: DescriptorExplanation[] }).descriptors;
    const before = new Set(await scanKeys(redis, PREFIX));
    await notificationsSettled();
    written.clear();
    const request: TestRequest = {
      domain: 'shop',
      descriptors: descriptors.map((d) => ({ entries: Object.entries(d).map(([key, value]) => ({ key, value })) })),
    };
    const calledFrom = Date.now();
    const answer = await client.shouldRateLimit(request);
    const calledTo = Date.now();
    await notificationsSettled();
    const created = (await scanKeys(redis, PREFIX)).filter((k) => !before.has(k));
    const what = JSON.stringify(descriptors);
    explained.forEach((e, i) => {
      outcomes.add(e.outcome);
      const status = answer.statuses[i]!;
      if (e.outcome === 'counted') {
        expect(status.current_limit, what).toEqual({ name: e.rule!.name ?? '', requests_per_unit: e.rule!.requestsPerUnit, unit: e.rule!.unit });
      } else {
        expect(status.current_limit ?? null, what).toBeNull();
        expect(status.limit_remaining, what).toBe(e.outcome === 'unlimited' ? 4294967295 : 0);
      }
    });
    const present = new Set([...(await scanKeys(redis, PREFIX)), ...written]);
    // A fixed window keeps its count in the key of the window of the call (issue 20):
    // `<counter>:<window start, epoch s>`, the window of calledFrom or, across an edge, calledTo.
    const keys = explained
      .filter((e) => e.outcome === 'counted')
      .map((e) => {
        if (e.rule!.algorithm !== 'fixed_window') return e.redisKey!;
        const [from, to] = [calledFrom, calledTo].map((t) => fixedWindowKey(e.redisKey!, e.rule!.windowSeconds, t));
        return present.has(from!) ? from! : to!;
      });
    // Every key explain names was written by the call or exists now, and the server wrote no other.
    for (const key of keys) expect(present.has(key), `${what}: ${key}`).toBe(true);
    for (const key of [...created, ...written]) expect(keys, what).toContain(key);
  }
  expect([...outcomes].sort()).toEqual(['counted', 'no-limit', 'no-match', 'replaced', 'unlimited']);
});
