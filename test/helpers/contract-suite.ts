// floodgate's service contract, as one suite that every backend must pass: the memory
// backend (test/e2e/contract-memory.test.ts) and Redis standalone and cluster
// (test/integration/redis-backend-contract.test.ts). Real gRPC and HTTP against the real server.
import { status as GrpcStatus } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { oneDescriptor } from './rls-client';
import { startTestApp, type TestApp } from './test-app';
import { awayFromWindowEdge } from './windows';

const RULES = `
domain: contract
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: hour
      requests_per_unit: 5
  - key: tenant
    shadow_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: free
    rate_limit:
      unlimited: true
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

/** Defines the contract suite for one backend; `env` adds the backend's settings. */
export function serviceContractSuite(backend: string, env: () => Record<string, string>): void {
  describe(`the service contract (${backend})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp({ 'contract.yaml': RULES }, { ...env(), LIMIT_RESPONSE_HEADERS_ENABLED: 'true' });
    });
    afterAll(async () => {
      await t?.stop();
    });

    test('counts down limit_remaining exactly, then answers OVER_LIMIT with reset and headers', async () => {
      await awayFromWindowEdge(3600, 30_000);
      const request = oneDescriptor('contract', { user: 'alice' });
      for (let expected = 4; expected >= 0; expected--) {
        const before = Date.now();
        const res = await t.client.shouldRateLimit(request);
        const after = Date.now();
        expect(res.overall_code).toBe('OK');
        expect(res.statuses).toHaveLength(1);
        const s = res.statuses[0]!;
        expect(s.code).toBe('OK');
        expect(s.limit_remaining).toBe(expected);
        expect(s.current_limit).toEqual({ name: 'per_user', requests_per_unit: 5, unit: 'HOUR' });
        // Redis' clock and this process's agree to well under a second on one machine.
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

    test('one status per descriptor, in order: no rule, unlimited, limited, shadow', async () => {
      const res = await t.client.shouldRateLimit({
        domain: 'contract',
        descriptors: [
          { entries: [{ key: 'nothing', value: 'x' }] },
          { entries: [{ key: 'free', value: 'x' }] },
          { entries: [{ key: 'user', value: 'carol' }] },
          { entries: [{ key: 'tenant', value: 't1' }], hits_addend: { value: 3 } },
        ],
      });
      expect(res.overall_code).toBe('OK');
      expect(res.statuses.map((s) => s.code)).toEqual(['OK', 'OK', 'OK', 'OK']);
      expect(res.statuses[0]!.current_limit).toBeNull();
      expect(res.statuses[1]!.limit_remaining).toBe(4294967295);
      expect(res.statuses[2]!.limit_remaining).toBe(4);
      // Shadow mode: over its limit of 1, yet OK.
      expect(res.statuses[3]!.limit_remaining).toBe(0);
    });

    test('an unknown domain, and a descriptor with zero entries, answer OK without limits', async () => {
      const unknown = await t.client.shouldRateLimit(oneDescriptor('nope', { user: 'alice' }));
      expect(unknown.overall_code).toBe('OK');
      expect(unknown.statuses[0]!.current_limit).toBeNull();
      const empty = await t.client.shouldRateLimit({ domain: 'contract', descriptors: [{ entries: [] }] });
      expect(empty.overall_code).toBe('OK');
      expect(empty.statuses).toHaveLength(1);
    });

    test.each([
      ['an empty domain', { domain: '', descriptors: [{ entries: [{ key: 'user', value: 'a' }] }] }, /domain must not be empty/],
      ['no descriptors', { domain: 'contract', descriptors: [] }, /descriptor list must not be empty/],
      [
        'an override with unit UNKNOWN',
        { domain: 'contract', descriptors: [{ entries: [{ key: 'user', value: 'a' }], limit: { requests_per_unit: 1, unit: 'UNKNOWN' } }] },
        /invalid unit 'UNKNOWN'/,
      ],
      [
        'an override with an out-of-range unit',
        { domain: 'contract', descriptors: [{ entries: [{ key: 'user', value: 'a' }], limit: { requests_per_unit: 1, unit: 42 } }] },
        /invalid unit '42'/,
      ],
      ['a 10 kB value', oneDescriptor('contract', { user: 'x'.repeat(10_000) }), /longer than 4096 bytes/],
      [
        'too many descriptors',
        { domain: 'contract', descriptors: Array.from({ length: 65 }, () => ({ entries: [{ key: 'user', value: 'a' }] })) },
        /too many descriptors/,
      ],
    ])('%s is INVALID_ARGUMENT with a message, and the server keeps serving', async (_name, request, message) => {
      const err = await t.client.shouldRateLimit(request).then(
        () => undefined,
        (e: { code: number; details: string }) => e,
      );
      expect(err?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
      expect(err?.details).toMatch(message);
      expect(await t.client.healthCheck()).toBe('SERVING');
    });

    test('/json answers 200, then 429 with the same body shape', async () => {
      await awayFromWindowEdge(60, 5_000);
      const body = JSON.stringify({ domain: 'contract', descriptors: [{ entries: [{ key: 'path', value: '/login' }] }] });
      const first = await postJson(`${t.httpUrl}/json`, body);
      expect(first.status).toBe(200);
      expect(first.json.overallCode).toBe('OK');
      expect(first.json.statuses).toEqual([
        { code: 'OK', currentLimit: { requestsPerUnit: 1, unit: 'MINUTE' }, durationUntilReset: expect.stringMatching(/^\d+s$/) },
      ]);
      const second = await postJson(`${t.httpUrl}/json`, body);
      expect(second.status).toBe(429);
      expect(second.json.overallCode).toBe('OVER_LIMIT');
      expect((second.json.statuses as { code: string }[])[0]!.code).toBe('OVER_LIMIT');
    });

    test.each([
      ['a body that is not JSON', '{"domain": '],
      ['descriptors that are not a list', '{"domain":"contract","descriptors":{}}'],
      ['an empty domain', '{"domain":"","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}'],
      ['no descriptors', '{"domain":"contract","descriptors":[]}'],
      [
        'an override with a bad unit',
        '{"domain":"contract","descriptors":[{"entries":[{"key":"a","value":"b"}],"limit":{"requestsPerUnit":1,"unit":"FORTNIGHT"}}]}',
      ],
    ])('/json answers 400 for %s', async (_name, body) => {
      const res = await postJson(`${t.httpUrl}/json`, body);
      expect(res.status).toBe(400);
      expect(typeof res.json.error).toBe('string');
    });

    test('/healthcheck says OK, and debug /rlconfig lists the rules in the reference format', async () => {
      const health = await fetch(`${t.httpUrl}/healthcheck`);
      expect(health.status).toBe(200);
      expect(await health.text()).toBe('OK');
      expect(await (await fetch(`${t.debugUrl}/rlconfig`)).text()).toBe(
        [
          'contract.user: unit=HOUR requests_per_unit=5, shadow_mode: false, quota_mode: false',
          'contract.tenant: unit=HOUR requests_per_unit=1, shadow_mode: true, quota_mode: false',
          'contract.path_/login: unit=MINUTE requests_per_unit=1, shadow_mode: false, quota_mode: false',
          '',
        ].join('\n'),
      );
    });
  });
}
