// PROMETHEUS_MAPPER_YAML in-process: the reference's own default mapping gives floodgate's own
// series; a missing or broken file stops start-up with a message naming the variable.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { projectRoot } from '../../src/paths';
import { waitUntil } from '../harness/wait';
import { nonZero, parseExposition } from '../helpers/prometheus-text';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

const RULES = {
  'rl.yaml': `
domain: rl
descriptors:
  - key: api_key
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: path
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 1 }
`,
};

describe('PROMETHEUS_MAPPER_YAML', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.stop();
    t = undefined;
  });

  test("with the reference's default mapping, the endpoint serves floodgate's own rule series", async () => {
    const plain = await startTestApp(RULES);
    t = await startTestApp(RULES, {
      PROMETHEUS_MAPPER_YAML: join(projectRoot, 'test/fixtures/statsd-exporter/default_mapper.yaml'),
      STATS_FLUSH_INTERVAL: '100ms',
    });
    try {
      for (const app of [plain, t]) {
        for (let i = 0; i < 5; i++) await app.client.shouldRateLimit(oneDescriptor('rl', { api_key: 'k' }));
        for (let i = 0; i < 2; i++) await app.client.shouldRateLimit(oneDescriptor('rl', { path: '/a', user: 'u' }));
      }
      const own = parseExposition(await (await fetch(`${plain.debugUrl}/metrics`)).text());
      const mapped = await waitUntil(
        'the flushed stats',
        async () => {
          const samples = parseExposition(await (await fetch(`${t!.debugUrl}/metrics`)).text());
          return samples.get('ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}') === 7 ? samples : undefined;
        },
        { timeoutMs: 5000 },
      );
      expect(nonZero(mapped, 'ratelimit_service_rate_limit_')).toEqual(nonZero(own, 'ratelimit_service_rate_limit_'));
      expect(Object.keys(nonZero(own, 'ratelimit_service_rate_limit_')).length).toBeGreaterThanOrEqual(6);
      // The mapping scales the millisecond timer to seconds: 7 calls well under a second each.
      const key = 'ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"}';
      expect(mapped.get(key)).toBe(7);
      expect(mapped.get('ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="1"}')).toBe(7);
      // floodgate's operator metrics are served beside the mapped ones, as without a mapping.
      expect(mapped.get('floodgate_rules_loaded{domain="rl"}')).toBe(2);
      expect(mapped.get('floodgate_backend_failure_mode_answers_total{mode="allow"}')).toBe(0);
      expect(mapped.get('floodgate_rules_loaded{domain="rl"}')).toBe(own.get('floodgate_rules_loaded{domain="rl"}'));
    } finally {
      await plain.stop();
    }
  });

  test('a missing or broken mapping file stops start-up, naming PROMETHEUS_MAPPER_YAML', async () => {
    await expect(startTestApp(RULES, { PROMETHEUS_MAPPER_YAML: '/nonexistent/mapping.yaml' })).rejects.toThrow(
      "invalid value for PROMETHEUS_MAPPER_YAML: '/nonexistent/mapping.yaml'",
    );
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-mapper-'));
    try {
      writeFileSync(join(dir, 'm.yaml'), 'mappings:\n  - match: "a.*"\n');
      await expect(startTestApp(RULES, { PROMETHEUS_MAPPER_YAML: join(dir, 'm.yaml') })).rejects.toThrow(
        "metric mapping didn't set a metric name",
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
