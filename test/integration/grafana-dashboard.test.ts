// deploy/grafana/floodgate.json: every metric its queries use is one that a live /metrics
// scrape of the real server (Redis backend, local cache, orphan scan, failure mode) exports.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { waitUntil } from '../harness/wait';
import { has, scrape, total, type Sample } from '../helpers/metrics-scrape';
import { oneDescriptor } from '../helpers/rls-client';
import { startTestApp, type TestApp } from '../helpers/test-app';

interface Panel {
  title: string;
  targets?: { expr: string }[];
}
const dashboard = JSON.parse(readFileSync(join(projectRoot, 'deploy/grafana/floodgate.json'), 'utf8')) as {
  panels: Panel[];
  templating: { list: { type: string; query?: string | { query: string } }[] };
};

// PromQL words that look like metric names but are not.
const NOT_METRICS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'and',
  'or',
  'unless',
  'le',
  'inf',
  'nan',
]);

/** The metric names a PromQL expression reads. */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,[^)]*\)/g, '$1') // Grafana's label_values(metric, label)
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // string literals
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\[[^\]]*\]/g, '') // range selectors
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '') // label lists
    .replace(/\$\w+/g, ''); // Grafana variables
  const names: string[] = [];
  for (const m of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const followedBy = stripped.slice(m.index + m[0].length).trimStart();
    if (followedBy.startsWith('(') || NOT_METRICS.has(m[0].toLowerCase())) continue; // a function or keyword
    names.push(m[0]);
  }
  return [...new Set(names)];
}

const queries: string[] = [
  ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
  ...dashboard.templating.list.filter((v) => v.type === 'query').map((v) => (typeof v.query === 'string' ? v.query : (v.query?.query ?? ''))),
];

describe('metricNames', () => {
  it('finds the metrics of an expression, not its functions, labels or variables', () => {
    expect(metricNames('histogram_quantile(0.99, sum by (le, node) (rate(a_bucket{job=~"$job",x="y"}[$__rate_interval])))')).toEqual([
      'a_bucket',
    ]);
    expect(metricNames('sum(rate(a_total[5m])) / sum(rate(b_total{k="v"}[5m]))')).toEqual(['a_total', 'b_total']);
    expect(metricNames('time() - max(c_seconds)')).toEqual(['c_seconds']);
    expect(metricNames('label_values(d_total, job)')).toEqual(['d_total']);
  });
});

let redis: RedisProcess;
let app: TestApp;
let samples: Sample[];
beforeAll(async () => {
  redis = await startStandalone();
  app = await startTestApp(
    {
      'g.yaml': 'domain: g\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n',
      // An adaptive policy that moves a client up a tier within a few calls.
      'p.yaml': [
        'domain: p',
        'policy: { client: user, window_seconds: 60, thresholds: { elevated: 2, suspicious: 4, blocked: 8 } }',
        'descriptors:',
        '  - key: user',
        '    rate_limit: { unit: hour, requests_per_unit: 100 }',
        '',
      ].join('\n'),
    },
    { REDIS_URL: redis.url, LOCAL_CACHE_SIZE_IN_BYTES: '100000', ORPHAN_SCAN_INTERVAL: '1s', BACKEND_FAILURE_MODE: 'allow' },
  );
  // Within, over (fills the cache), from the cache; then an invalid call (an error type).
  for (let i = 0; i < 3; i++) await app.client.shouldRateLimit(oneDescriptor('g', { user: 'u' }));
  await app.client.shouldRateLimit({ domain: '', descriptors: [] }).catch(() => undefined);
  // Policy decisions, and a tier change (normal to elevated).
  for (let i = 0; i < 4; i++) await app.client.shouldRateLimit(oneDescriptor('p', { user: 'busy' }));
  await waitUntil('orphan scan ran', async () => has(await scrape(`${app.debugUrl}/metrics`), 'floodgate_redis_keys_without_ttl') || false, {
    timeoutMs: 15_000,
  });
  // Redis gone: failure-mode answers, errors, open breaker.
  await redis.stop();
  for (let i = 0; i < 4; i++) await app.client.shouldRateLimit(oneDescriptor('g', { user: `v${i}` }));
  // The policy state cannot be read: the normal tier applies, counted as unavailable.
  await app.client.shouldRateLimit(oneDescriptor('p', { user: 'busy' }));
  samples = await scrape(`${app.debugUrl}/metrics`);
});
afterAll(async () => {
  await app?.stop();
  await redis?.stop();
});

describe('deploy/grafana/floodgate.json', () => {
  it('has the panels the issue asks for', () => {
    const titles = dashboard.panels.map((p) => p.title.toLowerCase()).join('\n');
    for (const word of [
      'decisions per second',
      'over-limit ratio per rule',
      'latency',
      'redis script latency',
      'redis errors',
      'circuit breaker',
      'cache hits',
      'failure-mode answers',
      'policy',
    ]) {
      expect(titles).toContain(word);
    }
  });

  it('reads every adaptive-policy metric floodgate exports', () => {
    const policyMetrics = [...new Set(samples.map((s) => s.name).filter((n) => n.startsWith('floodgate_policy_')))].sort();
    expect(policyMetrics).toEqual([
      'floodgate_policy_decisions_total',
      'floodgate_policy_tier_changes_total',
      'floodgate_policy_unavailable_total',
    ]);
    const used = new Set(queries.flatMap(metricNames));
    expect(policyMetrics.filter((n) => !used.has(n))).toEqual([]);
  });

  it('every metric in its queries is exported by a live scrape', () => {
    const exported = new Set(samples.map((s) => s.name));
    const used = [...new Set(queries.flatMap(metricNames))].sort();
    expect(used.length).toBeGreaterThan(15);
    expect(used.filter((n) => !exported.has(n))).toEqual([]);
  });

  it('"Decisions per second" counts calls answered, not hits: 5 calls of hits_addend 4 are 5 decisions', async () => {
    const panel = dashboard.panels.find((p) => p.title === 'Decisions per second')!;
    const read = [...new Set((panel.targets ?? []).flatMap((t) => metricNames(t.expr)))];
    expect(read.length).toBeGreaterThan(0);
    const memory = await startTestApp({
      'h.yaml': 'domain: h\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1000 }\n',
    });
    try {
      const before = await scrape(`${memory.debugUrl}/metrics`);
      for (let i = 0; i < 5; i++) await memory.client.shouldRateLimit({ ...oneDescriptor('h', { k: 'a' }), hits_addend: 4 });
      const after = await scrape(`${memory.debugUrl}/metrics`);
      for (const name of read) expect(total(after, name) - total(before, name), name).toBe(5);
      // The hits have their own panel.
      const hits = dashboard.panels.find((p) => p.title === 'Hits per second per domain');
      expect(hits?.targets?.flatMap((t) => metricNames(t.expr))).toEqual(['ratelimit_service_rate_limit_total_hits']);
      expect(total(after, 'ratelimit_service_rate_limit_total_hits') - total(before, 'ratelimit_service_rate_limit_total_hits')).toBe(20);
    } finally {
      await memory.stop();
    }
  });
});
