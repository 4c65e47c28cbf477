import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = `
domain: e2e
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
`;

function secondsToHourEnd(now: number): number {
  return Math.ceil((Math.floor(now / 3_600_000 + 1) * 3_600_000 - now) / 1000);
}

describe('ShouldRateLimit over real gRPC (memory backend)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ 'e2e.yaml': RULES }, { LIMIT_RESPONSE_HEADERS_ENABLED: 'true' });
  });
  afterAll(async () => {
    await t.stop();
  });

  test('counts down limit_remaining exactly, then answers OVER_LIMIT with reset and headers', async () => {
    const request = oneDescriptor('e2e', { user: 'alice' });
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
      const reset = Number(s.duration_until_reset!.seconds);
      expect(reset).toBeLessThanOrEqual(secondsToHourEnd(before));
      expect(reset).toBeGreaterThanOrEqual(secondsToHourEnd(after));
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
    const bob = await t.client.shouldRateLimit(oneDescriptor('e2e', { user: 'bob' }));
    expect(bob.statuses[0]!.limit_remaining).toBe(4);
  });

  test('one status per descriptor, in order: no rule, unlimited, limited, shadow', async () => {
    const res = await t.client.shouldRateLimit({
      domain: 'e2e',
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

  test('unknown domain answers OK without limits', async () => {
    const res = await t.client.shouldRateLimit(oneDescriptor('nope', { user: 'alice' }));
    expect(res.overall_code).toBe('OK');
    expect(res.statuses[0]!.current_limit).toBeNull();
  });

  test.each([
    ['an empty domain', { domain: '', descriptors: [{ entries: [{ key: 'user', value: 'a' }] }] }, /domain must not be empty/],
    ['no descriptors', { domain: 'e2e', descriptors: [] }, /descriptor list must not be empty/],
    ['an override with unit UNKNOWN', { domain: 'e2e', descriptors: [{ entries: [{ key: 'user', value: 'a' }], limit: { requests_per_unit: 1, unit: 'UNKNOWN' } }] }, /invalid unit 'UNKNOWN'/],
    ['an override with an out-of-range unit', { domain: 'e2e', descriptors: [{ entries: [{ key: 'user', value: 'a' }], limit: { requests_per_unit: 1, unit: 42 } }] }, /invalid unit '42'/],
    ['a 10 kB value', oneDescriptor('e2e', { user: 'x'.repeat(10_000) }), /longer than 4096 bytes/],
    ['too many descriptors', { domain: 'e2e', descriptors: Array.from({ length: 65 }, () => ({ entries: [{ key: 'user', value: 'a' }] })) }, /too many descriptors/],
  ])('%s is INVALID_ARGUMENT with a message, and the server keeps serving', async (_name, request, message) => {
    const err = await t.client.shouldRateLimit(request).then(
      () => undefined,
      (e: { code: number; details: string }) => e,
    );
    expect(err?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(err?.details).toMatch(message);
    expect(await t.client.healthCheck()).toBe('SERVING');
  });

  test('a descriptor with zero entries gets OK with no limit', async () => {
    const res = await t.client.shouldRateLimit({ domain: 'e2e', descriptors: [{ entries: [] }] });
    expect(res.overall_code).toBe('OK');
    expect(res.statuses).toHaveLength(1);
  });
});
