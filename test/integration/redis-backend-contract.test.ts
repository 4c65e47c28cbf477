// Done when: the core end-to-end contract holds on the Redis backend too (standalone and
// cluster): the OK → OVER_LIMIT countdown with exact limit_remaining and duration_until_reset,
// headers, per-value counters, and /json answering 200, 429 and 400.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startCluster, startStandalone, type RedisClusterHarness, type RedisProcess } from '../harness/redis-servers';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge } from './redis-backend-helpers';

const RULES = `
domain: contract
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: hour
      requests_per_unit: 5
  - key: path
    value: /login
    rate_limit:
      unit: minute
      requests_per_unit: 1
`;

function secondsToWindowEnd(now: number, windowSeconds: number): number {
  const w = windowSeconds * 1000;
  return Math.ceil((Math.floor(now / w + 1) * w - now) / 1000);
}

async function postJson(url: string, body: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

let standalone: RedisProcess;
let cluster: RedisClusterHarness;
beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startStandalone(), startCluster({ masters: 3, replicasPerMaster: 1 })]);
});
afterAll(async () => {
  await Promise.all([standalone?.stop(), cluster?.stop()]);
});

describe.each([
  { name: 'standalone', env: () => ({ REDIS_URL: standalone.url }) },
  { name: 'cluster', env: () => ({ REDIS_TYPE: 'CLUSTER', REDIS_URL: cluster.seeds }) },
])('the service contract on Redis ($name)', (d) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ 'contract.yaml': RULES }, { ...d.env(), LIMIT_RESPONSE_HEADERS_ENABLED: 'true', CACHE_KEY_PREFIX: `contract_${d.name}_` });
  });
  afterAll(async () => {
    await t?.stop();
  });

  test('counts down limit_remaining exactly, then OVER_LIMIT with reset and headers', async () => {
    await awayFromWindowEdge(3600, 30_000);
    const request = oneDescriptor('contract', { user: 'alice' });
    for (let expected = 4; expected >= 0; expected--) {
      const before = Date.now();
      const res = await t.client.shouldRateLimit(request);
      const after = Date.now();
      expect(res.overall_code).toBe('OK');
      const s = res.statuses[0]!;
      expect(s.code).toBe('OK');
      expect(s.limit_remaining).toBe(expected);
      expect(s.current_limit).toEqual({ name: 'per_user', requests_per_unit: 5, unit: 'HOUR' });
      // Redis' clock and ours agree on this machine to well under a second.
      const reset = Number(s.duration_until_reset!.seconds);
      expect(reset).toBeLessThanOrEqual(secondsToWindowEnd(before, 3600) + 1);
      expect(reset).toBeGreaterThanOrEqual(secondsToWindowEnd(after, 3600) - 1);
    }
    const over = await t.client.shouldRateLimit(request);
    expect(over.overall_code).toBe('OVER_LIMIT');
    expect(over.statuses[0]!.code).toBe('OVER_LIMIT');
    expect(over.statuses[0]!.limit_remaining).toBe(0);
    const headers = Object.fromEntries(over.response_headers_to_add.map((h) => [h.key, h.value]));
    expect(headers['RateLimit-Limit']).toBe('5');
    expect(headers['RateLimit-Remaining']).toBe('0');
    expect(Number(headers['RateLimit-Reset'])).toBeGreaterThan(0);
    expect(Number(headers['Retry-After'])).toBe(Number(headers['RateLimit-Reset']));
    // Another value of the same key has its own counter.
    const bob = await t.client.shouldRateLimit(oneDescriptor('contract', { user: 'bob' }));
    expect(bob.statuses[0]!.limit_remaining).toBe(4);
  });

  test('/json answers 200, then 429 with the same body shape, and 400 for a bad body', async () => {
    await awayFromWindowEdge(60, 5_000);
    const body = JSON.stringify({ domain: 'contract', descriptors: [{ entries: [{ key: 'path', value: '/login' }] }] });
    const first = await postJson(`${t.httpUrl}/json`, body);
    expect(first.status).toBe(200);
    expect(first.json.overallCode).toBe('OK');
    expect(first.json.statuses).toEqual([{ code: 'OK', currentLimit: { requestsPerUnit: 1, unit: 'MINUTE' }, durationUntilReset: expect.stringMatching(/^\d+s$/) }]);
    const second = await postJson(`${t.httpUrl}/json`, body);
    expect(second.status).toBe(429);
    expect(second.json.overallCode).toBe('OVER_LIMIT');
    expect((second.json.statuses as { code: string }[])[0]!.code).toBe('OVER_LIMIT');
    const bad = await postJson(`${t.httpUrl}/json`, '{"domain":"contract","descriptors":[]}');
    expect(bad.status).toBe(400);
    expect(typeof bad.json.error).toBe('string');
  });
});
