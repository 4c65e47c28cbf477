// The operator metrics in a live /metrics scrape of the real server on a real Redis: script
// latency per script and node, local-cache hits, rules per domain, then with Redis gone the
// failure-mode answers, the errors by kind and the open breaker.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { waitUntil } from '../harness/wait';
import { has, scrape, total } from '../helpers/metrics-scrape';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = {
  'm.yaml': `domain: m
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: tb
    rate_limit: { unit: minute, requests_per_unit: 100, algorithm: token_bucket }
  - key: free
    rate_limit: { unlimited: true }
`,
  'n.yaml': 'domain: n\ndescriptors:\n  - key: x\n    rate_limit: { unit: second, requests_per_unit: 5 }\n',
};

let redis: RedisProcess;
let app: TestApp;
beforeAll(async () => {
  redis = await startStandalone();
  app = await startTestApp(RULES, { REDIS_URL: redis.url, LOCAL_CACHE_SIZE_IN_BYTES: '100000', BACKEND_FAILURE_MODE: 'allow' });
});
afterAll(async () => {
  await app?.stop();
  await redis?.stop();
});

test('Redis, cache, rules and process metrics, then failure-mode answers, errors and the open breaker', async () => {
  const url = `${app.debugUrl}/metrics`;
  const before = Date.now() / 1000;
  let samples = await scrape(url);
  expect(total(samples, 'floodgate_rules_loaded', { domain: 'm' })).toBe(2); // unlimited not counted
  expect(total(samples, 'floodgate_rules_loaded', { domain: 'n' })).toBe(1);
  expect(total(samples, 'floodgate_config_last_success_timestamp_seconds')).toBeGreaterThan(before - 60);
  for (const name of [
    'nodejs_eventloop_lag_seconds',
    'nodejs_eventloop_lag_p99_seconds',
    'process_cpu_seconds_total',
    'process_resident_memory_bytes',
    'nodejs_heap_size_used_bytes',
    'floodgate_event_loop_delay_seconds_count',
  ]) {
    expect(has(samples, name), name).toBe(true);
  }

  for (let i = 0; i < 4; i++) await app.client.shouldRateLimit(oneDescriptor('m', { user: 'ann' }));
  await app.client.shouldRateLimit(oneDescriptor('m', { tb: 'x' }));
  samples = await scrape(url);
  const node = 'server'; // outside a cluster the one node is named 'server'
  // Call 1 counts, call 2 is over and fills the cache, calls 3 and 4 come from the cache.
  expect(total(samples, 'floodgate_redis_script_duration_seconds_count', { script: 'fixed_window', node })).toBe(2);
  expect(total(samples, 'floodgate_redis_script_duration_seconds_count', { script: 'token_bucket', node })).toBe(1);
  expect(total(samples, 'floodgate_local_cache_hits_total')).toBe(2);
  expect(total(samples, 'floodgate_redis_circuit_open', { node: 'server' })).toBe(0);
  expect(total(samples, 'floodgate_backend_failure_mode_answers_total')).toBe(0);

  await redis.stop();
  for (let i = 0; i < 6; i++) {
    const res = await app.client.shouldRateLimit(oneDescriptor('n', { x: String(i) }));
    expect(res.overall_code).toBe('OK'); // BACKEND_FAILURE_MODE=allow
  }
  samples = await scrape(url);
  expect(total(samples, 'floodgate_backend_failure_mode_answers_total', { mode: 'allow' })).toBe(6);
  const errors = total(samples, 'floodgate_redis_errors_total');
  expect(errors).toBeGreaterThanOrEqual(6);
  expect(total(samples, 'floodgate_redis_errors_total', { kind: 'other' })).toBe(0);
  await waitUntil('breaker open', async () => total(await scrape(url), 'floodgate_redis_circuit_open', { node: 'server' }) === 1 || false, {
    timeoutMs: 20_000,
  });
});
