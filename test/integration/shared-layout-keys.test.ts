// REDIS_KEY_LAYOUT=reference (issue 30): floodgate writes, for the same requests, the keys, values
// and expiries the reference binary writes. Each side runs against a Redis of its own, and the
// two Redises are compared key by key. Every rule the reference can express counts in its key;
// those it cannot keep floodgate's own (hash-tagged) keys.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { startReference, type ReferenceServer } from '../harness/reference-server';
import { rlsClient, type RlsTestClient, type TestRequest } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { scanKeys } from './redis-backend-helpers';
import { createLogger } from '../../src/base/log';
import { awayFromWindowEdge } from '../helpers/windows';

const RULES = `
domain: d
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: ip
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: path
    value: "/api/*"
    share_threshold: true
    rate_limit: { unit: day, requests_per_unit: 100 }
`;

// Floodgate only: a unit_multiplier and another algorithm keep floodgate's keys.
const FLOODGATE_ONLY = `
  - key: team
    rate_limit: { unit: minute, unit_multiplier: 5, requests_per_unit: 10 }
  - key: app
    rate_limit: { unit: minute, requests_per_unit: 10, algorithm: sliding_window }
`;

const PREFIX = 'p_';
/** Each descriptor key's unit in seconds (RULES; `client`: the override's HOUR). */
const UNIT_OF: Readonly<Record<string, number>> = { user: 3600, ip: 60, path: 86400, client: 3600 };

const REQUESTS: TestRequest[] = [
  { domain: 'd', descriptors: [{ entries: [{ key: 'user', value: 'alice' }] }] },
  { domain: 'd', descriptors: [{ entries: [{ key: 'user', value: 'alice' }] }], hits_addend: 3 },
  { domain: 'd', descriptors: [{ entries: [{ key: 'ip', value: '10.0.0.1' }] }, { entries: [{ key: 'user', value: 'bob' }] }] },
  { domain: 'd', descriptors: [{ entries: [{ key: 'path', value: '/api/a' }] }] },
  { domain: 'd', descriptors: [{ entries: [{ key: 'path', value: '/api/b' }] }] },
  // A per-request override: the reference counts it in the descriptor's own key, in its unit.
  { domain: 'd', descriptors: [{ entries: [{ key: 'client', value: 'x' }], limit: { requests_per_unit: 7, unit: 'HOUR' } }] },
];

async function dump(redis: RedisProcess): Promise<Map<string, { value: string; ttl: number }>> {
  const out = new Map<string, { value: string; ttl: number }>();
  for (const key of await scanKeys(redis, PREFIX)) {
    out.set(key, { value: String(await redis.command('GET', key)), ttl: Number(await redis.command('TTL', key)) });
  }
  return out;
}

describe('REDIS_KEY_LAYOUT=reference writes what the reference writes (issue 30)', () => {
  let refRedis: RedisProcess;
  let ourRedis: RedisProcess;
  let reference: ReferenceServer;
  let app: TestApp;
  let refClient: RlsTestClient;
  const logged: string[] = [];
  beforeAll(async () => {
    [refRedis, ourRedis] = await Promise.all([startStandalone(), startStandalone()]);
    const env = { CACHE_KEY_PREFIX: PREFIX, EXPIRATION_JITTER_MAX_SECONDS: '0' };
    reference = await startReference({ 'd.yaml': RULES }, { ...env, REDIS_URL: `127.0.0.1:${refRedis.port}` });
    app = await startTestApp(
      { 'd.yaml': RULES + FLOODGATE_ONLY },
      { ...env, BACKEND_TYPE: 'redis', REDIS_URL: `127.0.0.1:${ourRedis.port}`, REDIS_KEY_LAYOUT: 'reference' },
      { logger: createLogger('INFO', 'text', (line) => logged.push(line)) },
    );
    refClient = rlsClient(`127.0.0.1:${reference.grpcPort}`);
  }, 900_000);
  afterAll(async () => {
    refClient?.close();
    await app?.stop();
    await reference?.stop();
    await Promise.all([refRedis?.stop(), ourRedis?.stop()]);
  });

  test('the same keys, values and TTLs for every request the reference can express', async () => {
    // All requests inside one minute window (the shortest unit here), so that both sides name the same windows.
    await awayFromWindowEdge(60, 20_000);
    const started = Date.now();
    for (const request of REQUESTS) {
      const [theirs, ours] = await Promise.all([refClient.shouldRateLimit(request), app.client.shouldRateLimit(request)]);
      expect(ours.overall_code).toBe(theirs.overall_code);
      expect(ours.statuses?.map((s) => s.limit_remaining)).toEqual(theirs.statuses?.map((s) => s.limit_remaining));
    }
    const [theirs, ours] = [await dump(refRedis), await dump(ourRedis)];
    expect([...ours.keys()].sort()).toEqual([...theirs.keys()].sort());
    // EXPIRE unit seconds on each hit, on both sides (jitter 0): each TTL is the unit less the
    // seconds that passed since the requests (however slow the machine).
    const elapsed = Math.ceil((Date.now() - started) / 1000) + 1;
    for (const [key, { value, ttl }] of theirs) {
      const mine = ours.get(key);
      const unit = UNIT_OF[key.split('_')[2] ?? ''] ?? -1;
      expect(mine?.value, key).toBe(value);
      expect(ttl, key).toBeGreaterThanOrEqual(unit - elapsed);
      expect(ttl, key).toBeLessThanOrEqual(unit);
      expect(mine?.ttl, key).toBeGreaterThanOrEqual(unit - elapsed);
      expect(mine?.ttl, key).toBeLessThanOrEqual(unit);
    }
  });

  test('rules the reference cannot express keep floodgate’s own keys', async () => {
    await app.client.shouldRateLimit({ domain: 'd', descriptors: [{ entries: [{ key: 'team', value: 't' }] }] });
    await app.client.shouldRateLimit({ domain: 'd', descriptors: [{ entries: [{ key: 'app', value: 'a' }] }] });
    const keys = await scanKeys(ourRedis, `${PREFIX}rl:`);
    expect(keys.some((k) => k.startsWith(`${PREFIX}rl:{d:team=t}:fixed_window:300`))).toBe(true);
    expect(keys.some((k) => k.startsWith(`${PREFIX}rl:{d:app=a}:sliding_window:60`))).toBe(true);
    // Said once when the rules loaded.
    const said = logged.filter((l) => l.includes('REDIS_KEY_LAYOUT=reference'));
    expect(said).toHaveLength(1);
    expect(said[0]).toContain("2 of 5 rules count in floodgate's own keys");
    expect(said[0]).toContain('d.team: unit_multiplier; d.app: algorithm sliding_window');
  });
});
