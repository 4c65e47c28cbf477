// The policy layer through the real server: gRPC calls, the memory backend and real Redis.
// A client that bursts and keeps calling while denied climbs normal → elevated → suspicious →
// blocked, its limits shrink on the way (RateLimit-Limit), the box answers with Retry-After;
// a well-behaved client of the same domain keeps its full limit; the tier shows in a header,
// in dynamic metadata, in metrics and on the debug port; a request without the client entry
// makes no policy call; when the policy state cannot be read the tier is normal, and counted.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';
import { awayFromWindowEdge } from '../helpers/windows';
import type { WireResponse } from '../../src/rls/wire-types';

const RULES = {
  'api.yaml': `
domain: api
policy:
  client: remote_address
  window_seconds: 60
  weights: { requests: 1, repeats: 0, routes: 0, denials: 3 }
  thresholds: { elevated: 6, suspicious: 12, blocked: 20 }
  limit_percent: { elevated: 50, suspicious: 10 }
  blocked_seconds: 30
  quiet_seconds: 30
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: other
    rate_limit: { unit: minute, requests_per_unit: 10 }
`,
};
const ENV = { LIMIT_RESPONSE_HEADERS_ENABLED: 'true', RESPONSE_DYNAMIC_METADATA: 'true', BACKEND_FAILURE_MODE: 'allow' };

function header(res: WireResponse, name: string): string | undefined {
  return res.response_headers_to_add?.find((h) => h.key === name)?.value;
}

function tierOf(res: WireResponse): string | undefined {
  const fields = (res.dynamic_metadata as unknown as { fields: Record<string, { stringValue?: string }> } | null)?.fields;
  return fields?.['floodgate.tier']?.stringValue;
}

async function metric(t: TestApp, line: string): Promise<number> {
  const text = await (await fetch(`${t.debugUrl}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(line + ' '));
  return found === undefined ? 0 : Number(found.slice(line.length + 1));
}

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
}, 60_000);
afterAll(async () => {
  await redis?.stop();
});

describe.each([
  ['memory', (): Record<string, string> => ({})],
  ['redis', (): Record<string, string> => ({ REDIS_URL: redis.url, CACHE_KEY_PREFIX: `pe2e_${Date.now()}_` })],
])('policy on the %s backend', (_name, backendEnv) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(RULES, { ...ENV, ...backendEnv() });
  }, 30_000);
  afterAll(async () => {
    await t?.stop();
  });

  test('burst then hammering: tiers in order, shrinking limits, the box; a well-behaved client untouched', async () => {
    await awayFromWindowEdge(60, 10_000);
    const call = (ip: string): Promise<WireResponse> => t.client.shouldRateLimit(oneDescriptor('api', { remote_address: ip }));
    const seen: [string | undefined, string, string | undefined, string | undefined][] = [];
    const answeredAt: number[] = [];
    for (let i = 0; i < 11; i++) {
      const res = await call('10.0.0.1');
      answeredAt.push(Date.now());
      seen.push([header(res, 'X-Floodgate-Tier'), res.overall_code, header(res, 'RateLimit-Limit'), header(res, 'Retry-After')]);
      expect(tierOf(res)).toBe(header(res, 'X-Floodgate-Tier'));
      // The well-behaved client calls now and then, between the other's calls.
      if (i % 3 !== 0) continue;
      const good = await call('10.0.0.2');
      expect(header(good, 'X-Floodgate-Tier')).toBe('normal');
      expect(header(good, 'RateLimit-Limit')).toBe('10');
      expect(good.overall_code).toBe('OK');
    }
    // Scores: one per call, three per denial reported (with the next call).
    expect(seen.slice(0, 5)).toEqual(Array.from({ length: 5 }, () => ['normal', 'OK', '10', undefined]));
    expect(seen[5]).toEqual(['elevated', 'OVER_LIMIT', '5', expect.any(String)]);
    expect(seen[6]?.slice(0, 3)).toEqual(['elevated', 'OVER_LIMIT', '5']);
    expect(seen[7]?.slice(0, 3)).toEqual(['suspicious', 'OVER_LIMIT', '1']);
    expect(seen[8]?.slice(0, 3)).toEqual(['suspicious', 'OVER_LIMIT', '1']);
    expect(seen[9]).toEqual(['blocked', 'OVER_LIMIT', '0', '30']);
    // The box's 30 s count down between the two answers (a busy machine may take seconds).
    const between = Math.ceil((answeredAt[10]! - answeredAt[9]!) / 1000);
    expect(Number(seen[10]?.[3])).toBeLessThanOrEqual(30);
    expect(Number(seen[10]?.[3])).toBeGreaterThanOrEqual(29 - between);

    const look = (await (await fetch(`${t.debugUrl}/policy?domain=api&client=10.0.0.1`)).json()) as { blockedMsLeft: number };
    const sinceBlocked = Date.now() - answeredAt[9]!;
    expect(look).toMatchObject({
      domain: 'api',
      client: '10.0.0.1',
      tier: 'blocked',
      signals: { requests: 10, repeats: 0, routes: 0, denials: 4 },
      score: 22,
    });
    expect(look.blockedMsLeft).toBeLessThanOrEqual(30_000);
    expect(look.blockedMsLeft).toBeGreaterThan(30_000 - sinceBlocked - 1000);
    const calm = await (await fetch(`${t.debugUrl}/policy?domain=api&client=10.0.0.2`)).json();
    expect(calm).toMatchObject({ tier: 'normal', signals: { requests: 4, denials: 0 } });
    expect((await fetch(`${t.debugUrl}/policy?domain=nope&client=x`)).status).toBe(404);

    expect(await metric(t, 'floodgate_policy_tier_changes_total{domain="api",from="normal",to="elevated"}')).toBe(1);
    expect(await metric(t, 'floodgate_policy_tier_changes_total{domain="api",from="suspicious",to="blocked"}')).toBe(1);
    expect(await metric(t, 'floodgate_policy_decisions_total{domain="api",tier="normal",shadow="false"}')).toBe(9);
    expect(await metric(t, 'floodgate_policy_decisions_total{domain="api",tier="blocked",shadow="false"}')).toBe(2);
    expect(await (await fetch(`${t.debugUrl}/rlconfig`)).text()).toContain('api: policy client=remote_address route=- fingerprint=-');
  });

  test('a request without the client entry makes no policy decision', async () => {
    const before = await metric(t, 'floodgate_policy_decisions_total{domain="api",tier="normal",shadow="false"}');
    const res = await t.client.shouldRateLimit(oneDescriptor('api', { other: 'x' }));
    expect(res.overall_code).toBe('OK');
    expect(header(res, 'X-Floodgate-Tier')).toBeUndefined();
    expect(tierOf(res)).toBeUndefined();
    expect(await metric(t, 'floodgate_policy_decisions_total{domain="api",tier="normal",shadow="false"}')).toBe(before);
  });
});

describe('connections', () => {
  test('rules without a policy open no policy connection; rules with one open one', async () => {
    const own = await startStandalone();
    const clients = async (): Promise<number> =>
      String(await own.command('CLIENT', 'LIST'))
        .trim()
        .split('\n').length - 1;
    const apps: TestApp[] = [];
    try {
      const before = await clients();
      apps.push(
        await startTestApp(
          { 'plain.yaml': 'domain: plain\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n' },
          { REDIS_URL: own.url },
        ),
      );
      const withoutPolicy = await clients();
      apps.push(await startTestApp(RULES, { REDIS_URL: own.url }));
      const withPolicy = await clients();
      expect([withoutPolicy - before, withPolicy - withoutPolicy]).toEqual([1, 2]);
    } finally {
      for (const t of apps) await t.stop();
      await own.stop();
    }
  }, 60_000);
});

describe('a policy in shadow mode', () => {
  test('computes, reports and counts tiers, but the limits and the box stay normal', async () => {
    const shadowRules = { 'api.yaml': RULES['api.yaml'].replace('  quiet_seconds: 30\n', '  quiet_seconds: 30\n  shadow_mode: true\n') };
    const t = await startTestApp(shadowRules, ENV);
    try {
      await awayFromWindowEdge(60, 10_000);
      const seen: [string | undefined, string, string | undefined][] = [];
      for (let i = 0; i < 12; i++) {
        const res = await t.client.shouldRateLimit(oneDescriptor('api', { remote_address: '10.0.0.7' }));
        seen.push([header(res, 'X-Floodgate-Tier'), res.overall_code, header(res, 'RateLimit-Limit')]);
      }
      // Normal limits: 10 OK, then over; the tiers still climb (denials feed them too).
      expect(seen.map((s) => s[1])).toEqual([...Array<string>(10).fill('OK'), 'OVER_LIMIT', 'OVER_LIMIT']);
      expect(seen.every((s) => s[2] === '10')).toBe(true);
      expect(seen.map((s) => s[0])).toEqual([...Array<string>(5).fill('normal'), ...Array<string>(6).fill('elevated'), 'suspicious']);
      expect(await metric(t, 'floodgate_policy_decisions_total{domain="api",tier="elevated",shadow="true"}')).toBe(6);
    } finally {
      await t.stop();
    }
  }, 60_000);
});

describe('policy state that cannot be read', () => {
  test('the decision uses the normal tier, never a stricter one, and counts it', async () => {
    const own = await startStandalone();
    const t = await startTestApp(RULES, { ...ENV, REDIS_URL: own.url });
    try {
      await awayFromWindowEdge(60, 10_000);
      for (let i = 0; i < 10; i++) await t.client.shouldRateLimit(oneDescriptor('api', { remote_address: '10.9.9.9' }));
      const blocked = await t.client.shouldRateLimit(oneDescriptor('api', { remote_address: '10.9.9.9' }));
      expect(header(blocked, 'X-Floodgate-Tier')).toBe('blocked');
      await own.stop();
      const res = await t.client.shouldRateLimit(oneDescriptor('api', { remote_address: '10.9.9.9' }));
      // BACKEND_FAILURE_MODE=allow answers for the limits; the policy answers normal.
      expect(res.overall_code).toBe('OK');
      expect(header(res, 'X-Floodgate-Tier')).toBe('normal');
      expect(await metric(t, 'floodgate_policy_unavailable_total{domain="api"}')).toBe(1);
    } finally {
      await t.stop();
      await own.stop();
    }
  }, 60_000);
});
