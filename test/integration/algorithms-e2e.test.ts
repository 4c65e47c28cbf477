import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Algorithm } from '../../src/domain/algorithm';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

// A rule file naming each algorithm loads and limits
// over real gRPC, on the memory backend and on Redis.
const ALGORITHMS: readonly Algorithm[] = ['sliding_window', 'token_bucket', 'gcra', 'sliding_log'];
const isBucket = (a: Algorithm): boolean => a === 'token_bucket' || a === 'gcra';

const RULES = `
domain: algos
descriptors:
${ALGORITHMS.map((a) => `  - key: ${a}\n    rate_limit: { unit: hour, requests_per_unit: 3, algorithm: ${a}${isBucket(a) ? ', burst: 4' : ''} }`).join('\n')}
`;

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startStandalone();
}, 60_000);
afterAll(async () => {
  await redis?.stop();
});

describe.each([
  ['memory', () => ({})],
  ['redis', () => ({ REDIS_URL: redis.url, CACHE_KEY_PREFIX: 'algos_e2e_' })],
] as const)('algorithms end to end (%s backend)', (_name, env) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ 'algos.yaml': RULES }, { ...env(), LIMIT_RESPONSE_HEADERS_ENABLED: 'true' });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it.each(ALGORITHMS)('%s: counts down, then denies with a Retry-After, and denials do not consume', async (algorithm) => {
    const capacity = isBucket(algorithm) ? 4 : 3;
    const request = oneDescriptor('algos', { [algorithm]: 'client-1' });
    for (let left = capacity - 1; left >= 0; left--) {
      const res = await t.client.shouldRateLimit(request);
      expect(res.overall_code).toBe('OK');
      expect(res.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: left, current_limit: { requests_per_unit: 3, unit: 'HOUR' } });
      expect(Number(res.statuses[0]!.duration_until_reset!.seconds)).toBeGreaterThan(0);
    }
    for (let i = 0; i < 3; i++) {
      const over = await t.client.shouldRateLimit(request);
      expect(over.overall_code).toBe('OVER_LIMIT');
      expect(over.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0 });
      const headers = Object.fromEntries(over.response_headers_to_add.map((h) => [h.key, h.value]));
      expect(Number(headers['RateLimit-Reset'])).toBeGreaterThan(0);
    }
    // Another client of the same rule has its own counter.
    expect((await t.client.shouldRateLimit(oneDescriptor('algos', { [algorithm]: 'client-2' }))).overall_code).toBe('OK');
  });
});
