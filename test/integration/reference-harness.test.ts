// The reference harness itself (test/harness/reference-server.ts): the binary built from source
// starts, answers, and counts in the key src/limiter/reference-key.ts names.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import Redis from 'ioredis';
import { referenceWindowKey } from '../../src/limiter/reference-key';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { startReference, type ReferenceServer } from '../harness/reference-server';
import { oneDescriptor, rlsClient } from '../helpers/rls-client';

const RULES = `
domain: d
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
`;

describe('the reference binary (issue 30)', () => {
  let redis: RedisProcess;
  let reference: ReferenceServer;
  beforeAll(async () => {
    redis = await startStandalone();
    reference = await startReference({ 'd.yaml': RULES }, { REDIS_URL: `127.0.0.1:${redis.port}`, CACHE_KEY_PREFIX: 'p_' });
  }, 900_000);
  afterAll(async () => {
    await reference?.stop();
    await redis?.stop();
  });

  test('counts a request in the key referenceWindowKey names', async () => {
    const client = rlsClient(`127.0.0.1:${reference.grpcPort}`);
    const before = Date.now();
    const answer = await client.shouldRateLimit(oneDescriptor('d', { user: 'alice' }));
    const after = Date.now();
    client.close();
    expect(answer.overall_code).toBe('OK');
    const admin = new Redis({ port: redis.port, lazyConnect: true });
    await admin.connect();
    const keys = await admin.keys('*');
    const ttl = await admin.ttl(keys[0] ?? '');
    await admin.quit();
    const counter = { domain: 'd', entries: [{ key: 'user', value: 'alice' }] };
    expect([referenceWindowKey('p_', counter, 3600, before), referenceWindowKey('p_', counter, 3600, after)]).toContain(keys[0]);
    expect(keys).toHaveLength(1);
    expect(ttl).toBeGreaterThan(3000);
  });
});
