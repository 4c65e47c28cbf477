// PROMETHEUS_MAPPER_YAML in-process: the reference's own default mapping gives floodgate's own
// series; a missing or broken file stops start-up with a message naming the variable.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { waitUntil } from '../harness/wait';
import { nonZero, parseExposition } from '../helpers/prometheus-text';
import { oneDescriptor } from '../helpers/rls-client';
import { residentMb } from '../helpers/process-memory';
import { spawnServer } from '../helpers/server-process';
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
        { timeoutMs: 20_000 },
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

  // Issue 18, finding 5: each unknown domain became a metric name of its own, never dropped
  // (25 s of them gave 30,042 names, a 15.7 MB /metrics and 396 MB of RSS). The built server,
  // its /metrics scraped as Prometheus does.
  test('unknown domains are one (unknown) series, and request values stay within METRICS_MAX_SERIES', async () => {
    const server = await spawnServer(
      { 'rl.yaml': RULES['rl.yaml'] + '  - key: detailed\n    detailed_metric: true\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n' },
      {
        PROMETHEUS_MAPPER_YAML: join(projectRoot, 'test/fixtures/statsd-exporter/default_mapper.yaml'),
        STATS_FLUSH_INTERVAL: '200ms',
        METRICS_MAX_SERIES: '100',
      },
    );
    try {
      const post = (domain: string, key: string, value: string) =>
        fetch(`http://127.0.0.1:${server.httpPort}/json`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ domain, descriptors: [{ entries: [{ key, value }] }] }),
        });
      await post('rl', 'api_key', 'ordinary');
      const pad = 'd'.repeat(4000);
      const unknown = 2000;
      const detailed = 600;
      for (let i = 0; i < unknown; i += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, j) => post(`${i + j}-${pad}`, 'user', 'x')));
      }
      for (let i = 0; i < detailed; i += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, j) => post('rl', 'detailed', `${i + j}-${pad}`)));
      }
      const metricsUrl = `http://127.0.0.1:${server.debugPort}/metrics`;
      let last = '';
      const text = await waitUntil(
        'every request flushed',
        async () => {
          last = await (await fetch(metricsUrl)).text();
          // Both batches flushed: the unknown domains all counted, and the detailed values past
          // the cap counted as dropped (a flush may fall between the two batches).
          const seen = parseExposition(last);
          const flushed = seen.get('ratelimit_service_domain_not_found{domain="(unknown)"}') === unknown;
          return flushed && (seen.get('floodgate_metrics_series_dropped_total') ?? 0) > 0 ? last : undefined;
        },
        {
          timeoutMs: 15_000,
          diagnostics: () =>
            `/metrics: ${new Set([...parseExposition(last).keys()].map((k) => k.replace(/\{.*$/, ''))).size} metric names, ` +
            `${(last.length / 1024).toFixed(0)} KB; RSS ${residentMb(server.proc.pid as number).toFixed(0)} MB`,
        },
      );
      const samples = parseExposition(text);
      const names = new Set([...samples.keys()].map((k) => k.replace(/\{.*$/, '')));
      const ruleSeries = [...samples.keys()].filter((k) => k.startsWith('ratelimit_service_rate_limit_'));
      const rss = residentMb(server.proc.pid as number);
      console.log(
        `${unknown} unknown 4 KB domains and ${detailed} detailed_metric 4 KB values, mapped: ${names.size} metric names, ` +
          `${ruleSeries.length} rule series, /metrics ${(text.length / 1024).toFixed(0)} KB, RSS ${rss.toFixed(0)} MB`,
      );
      expect([...names].filter((n) => n.includes('dddd'))).toEqual([]);
      expect(names.size).toBeLessThan(150);
      // Six series per label set at most (METRICS_MAX_SERIES label sets); the rest is counted.
      expect(ruleSeries.length).toBeLessThanOrEqual(6 * 100);
      expect(samples.get('floodgate_metrics_series_dropped_total')).toBeGreaterThan(0);
      // A rule that was there first keeps counting.
      expect(samples.get('ratelimit_service_rate_limit_total_hits{domain="rl",key1="api_key"}')).toBe(1);
      expect(text.length).toBeLessThan(1024 * 1024);
    } finally {
      server.cleanup();
    }
  }, 120_000);
});
