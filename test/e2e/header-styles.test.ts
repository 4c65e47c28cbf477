// RESPONSE_HEADERS_STYLE through the real server: the headers a real gRPC call gets back, in
// each style, parsed with a structured-field parser; Retry-After in every style.
import { parseItem, parseList } from 'structured-headers';
import { afterEach, describe, expect, test } from 'vitest';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = { 'h.yaml': 'domain: h\ndescriptors:\n  - key: user\n    rate_limit: { name: per_user, unit: hour, requests_per_unit: 2 }\n' };

let app: TestApp | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

async function threeCalls(style: string): Promise<Map<string, string>[]> {
  app = await startTestApp(RULES, { LIMIT_RESPONSE_HEADERS_ENABLED: 'true', RESPONSE_HEADERS_STYLE: style });
  const out: Map<string, string>[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await app.client.shouldRateLimit(oneDescriptor('h', { user: 'ann' }));
    out.push(new Map(res.response_headers_to_add.map((h) => [h.key, h.value])));
  }
  return out;
}

describe('RESPONSE_HEADERS_STYLE', () => {
  test('ietf: RateLimit-Policy and RateLimit, then Retry-After when over', async () => {
    const [first, , third] = await threeCalls('ietf');
    const [policy, policyParams] = parseList(first!.get('RateLimit-Policy')!)[0]!;
    expect(policy).toBe('per_user');
    expect(Object.fromEntries([...policyParams].filter(([k]) => k !== 'pk'))).toEqual({ q: 2, qu: 'requests', w: 3600 });
    expect(policyParams.get('pk')).toBeInstanceOf(ArrayBuffer);
    const [, limitParams] = parseList(first!.get('RateLimit')!)[0]!;
    expect(limitParams.get('r')).toBe(1);
    expect(limitParams.get('t')).toBeGreaterThan(0);
    expect(first!.has('Retry-After')).toBe(false);
    expect(parseList(third!.get('RateLimit')!)[0]![1].get('r')).toBe(0);
    expect(parseItem(third!.get('Retry-After')!)[0]).toBeGreaterThan(0);
    expect(third!.has('RateLimit-Limit')).toBe(false);
  });

  test('x-ratelimit: the X-RateLimit trio, then Retry-After when over', async () => {
    const [first, , third] = await threeCalls('x-ratelimit');
    expect(parseItem(first!.get('X-RateLimit-Limit')!)[0]).toBe(2);
    expect(parseItem(first!.get('X-RateLimit-Remaining')!)[0]).toBe(1);
    expect(parseItem(first!.get('X-RateLimit-Reset')!)[0]).toBeGreaterThan(0);
    expect(parseItem(third!.get('Retry-After')!)[0]).toBeGreaterThan(0);
    expect([...third!.keys()].sort()).toEqual(['Retry-After', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']);
  });

  test('reference (default): RateLimit-Limit/-Remaining/-Reset, then Retry-After', async () => {
    const [first, , third] = await threeCalls('reference');
    expect(parseItem(first!.get('RateLimit-Limit')!)[0]).toBe(2);
    expect(parseItem(first!.get('RateLimit-Remaining')!)[0]).toBe(1);
    expect([...third!.keys()].sort()).toEqual(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After']);
  });
});
