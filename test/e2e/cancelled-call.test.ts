import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createLogger } from '../../src/base/log';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { within } from '../harness/wait';
import { oneDescriptor, rlsStub } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = `
domain: c
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 100 }
`;

describe('a call the client cancels', () => {
  let redis: RedisProcess;
  let t: TestApp;
  const logLines: string[] = [];
  beforeAll(async () => {
    redis = await startStandalone();
    t = await startTestApp(
      { 'c.yaml': RULES },
      { REDIS_URL: redis.url },
      { logger: createLogger('DEBUG', 'text', (line) => logLines.push(line)) },
    );
    // Wait until the backend is connected.
    await within(5000, () => t.app.limiter.isHealthy(), 'the backend connected');
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  test('is not answered, not logged as a failure and not counted as an error', async () => {
    expect((await t.client.shouldRateLimit(oneDescriptor('c', { k: 'v' }))).overall_code).toBe('OK');
    // Redis holds every command for 700 ms: the call is still waiting on it when cancelled, and
    // its 300 ms budget then runs out on the server, which is the failure path a cancelled call
    // must not report.
    await redis.command('CLIENT', 'PAUSE', '700', 'ALL');
    const raw = rlsStub(`127.0.0.1:${t.app.grpcPort}`, grpc.credentials.createInsecure());
    const outcome = await new Promise<grpc.ServiceError | null>((resolve) => {
      const call = raw.ShouldRateLimit(oneDescriptor('c', { k: 'v' }), { deadline: Date.now() + 300 }, (err) => resolve(err));
      setTimeout(() => call.cancel(), 50);
    });
    raw.close();
    expect(outcome?.code).toBe(grpc.status.CANCELLED);
    // Let the server's budget run out and the paused command finish.
    await new Promise((r) => setTimeout(r, 900));
    const errors = await t.app.metrics.registry.getSingleMetricAsString('ratelimit_service_should_rate_limit_error');
    expect(errors).not.toMatch(/ratelimit_service_should_rate_limit_error\{/);
    expect(logLines.filter((l) => /level=(error|warn)/.test(l) && /ShouldRateLimit/.test(l))).toEqual([]);
    // The service is fine afterwards; the cancelled call's hit still reached Redis.
    const after = await t.client.shouldRateLimit(oneDescriptor('c', { k: 'v' }));
    expect(after.statuses[0]!.limit_remaining).toBe(97);
  });
});
