import { describe, expect, it } from 'vitest';
import { PrometheusMetrics, ruleLabels, UNKNOWN_DOMAIN_LABEL, type RuleHitCounts, type ServiceMetrics } from '../../../src/metrics/metrics';

describe('ruleLabels', () => {
  // The statsd exporter mapping the reference ships (src/stats/prom/default_mapper.yaml):
  // `ratelimit.service.rate_limit.(domain).(key1).(key2)(\..*)?.total_hits`.
  it('splits domain.key1_value1.key2_value2.key3: key1 and key2 are the first two levels, deeper ones are dropped', () => {
    expect(ruleLabels('domain', 'domain.key1_value1.key2_value2.key3')).toEqual({
      domain: 'domain',
      key1: 'key1_value1',
      key2: 'key2_value2',
    });
    expect(ruleLabels('d', 'd.k1_v1.k2_v2.k3_v3.k4')).toEqual({ domain: 'd', key1: 'k1_v1', key2: 'k2_v2' });
  });

  it('sanitizes the path as the reference names its stats: IPv4 dots, `:` and `|` become `_`', () => {
    expect(ruleLabels('web', 'web.remote_address_10.0.0.1.path_/a:b')).toEqual({
      domain: 'web',
      key1: 'remote_address_10_0_0_1',
      key2: 'path_/a_b',
    });
    expect(ruleLabels('web', 'web.k_a|b')).toEqual({ domain: 'web', key1: 'k_a_b', key2: '' });
  });

  it('has an empty key2 for a one-level rule', () => {
    expect(ruleLabels('web', 'web.path_/login')).toEqual({ domain: 'web', key1: 'path_/login', key2: '' });
  });

  it('fills key1 and key2 for a two-level rule', () => {
    expect(ruleLabels('web', 'web.remote_address.path_/api')).toEqual({ domain: 'web', key1: 'remote_address', key2: 'path_/api' });
  });

  it('strips a domain that itself contains dots', () => {
    expect(ruleLabels('edge.proxy', 'edge.proxy.client_a.op_b')).toEqual({ domain: 'edge.proxy', key1: 'client_a', key2: 'op_b' });
  });
});

/** The value of one sample line in Prometheus text, or undefined when there is none. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = (m[2] ?? '').split(',').filter((s) => s !== '');
    if (wanted.length === have.length && wanted.every((w) => have.includes(w))) return Number(m[3]);
  }
  return undefined;
}

const COUNTS: RuleHitCounts = { totalHits: 6, withinLimit: 3, nearLimit: 2, overLimit: 3, overLimitWithLocalCache: 1, shadowMode: 4 };

describe('PrometheusMetrics', () => {
  it('declares the reference metric names', async () => {
    const text = await new PrometheusMetrics().registry.metrics();
    for (const name of [
      'ratelimit_service_rate_limit_total_hits',
      'ratelimit_service_rate_limit_within_limit',
      'ratelimit_service_rate_limit_near_limit',
      'ratelimit_service_rate_limit_over_limit',
      'ratelimit_service_rate_limit_over_limit_with_local_cache',
      'ratelimit_service_rate_limit_shadow_mode',
      'ratelimit_service_config_load_success',
      'ratelimit_service_config_load_error',
      'ratelimit_service_should_rate_limit_error',
      'ratelimit_service_total_requests',
      'ratelimit_service_response_time_seconds',
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
    expect(text).toContain('# TYPE ratelimit_service_rate_limit_total_hits counter');
    expect(text).toContain('# TYPE ratelimit_service_response_time_seconds histogram');
  });

  it('adds rule counts under domain/key1/key2 labels', async () => {
    const m = new PrometheusMetrics();
    m.recordRule('d', 'd.k1_v1.k2_v2.k3', COUNTS);
    m.recordRule('d', 'd.k1_v1.k2_v2.k3', {
      ...COUNTS,
      totalHits: 1,
      withinLimit: 1,
      nearLimit: 0,
      overLimit: 0,
      overLimitWithLocalCache: 0,
      shadowMode: 0,
    });
    m.recordRule('d', 'd.other', { ...COUNTS, totalHits: 2 });
    const text = await m.registry.metrics();
    const labels = { domain: 'd', key1: 'k1_v1', key2: 'k2_v2' };
    expect(sample(text, 'ratelimit_service_rate_limit_total_hits', labels)).toBe(7);
    expect(sample(text, 'ratelimit_service_rate_limit_within_limit', labels)).toBe(4);
    expect(sample(text, 'ratelimit_service_rate_limit_near_limit', labels)).toBe(2);
    expect(sample(text, 'ratelimit_service_rate_limit_over_limit', labels)).toBe(3);
    expect(sample(text, 'ratelimit_service_rate_limit_over_limit_with_local_cache', labels)).toBe(1);
    expect(sample(text, 'ratelimit_service_rate_limit_shadow_mode', labels)).toBe(4);
    expect(sample(text, 'ratelimit_service_rate_limit_total_hits', { domain: 'd', key1: 'other', key2: '' })).toBe(2);
  });

  it('counts config loads, errors by err_type and requests by grpc_method', async () => {
    const m = new PrometheusMetrics();
    m.configLoad(true);
    m.configLoad(true);
    m.configLoad(false);
    m.shouldRateLimitError('redis_error');
    m.shouldRateLimitError('redis_error');
    m.shouldRateLimitError('invalid_request');
    m.requestDone('ShouldRateLimit', 0.003);
    m.requestDone('ShouldRateLimit', 0.2);
    // The service calls every sink through ServiceMetrics, with the request's domain.
    const sink: ServiceMetrics = m;
    sink.domainNotFound('ghost');
    const text = await m.registry.metrics();
    expect(sample(text, 'ratelimit_service_config_load_success')).toBe(2);
    expect(sample(text, 'ratelimit_service_config_load_error')).toBe(1);
    expect(sample(text, 'ratelimit_service_should_rate_limit_error', { err_type: 'redis_error' })).toBe(2);
    expect(sample(text, 'ratelimit_service_should_rate_limit_error', { err_type: 'invalid_request' })).toBe(1);
    expect(sample(text, 'ratelimit_service_total_requests', { grpc_method: 'ShouldRateLimit' })).toBe(2);
    expect(sample(text, 'ratelimit_service_response_time_seconds_count', { grpc_method: 'ShouldRateLimit' })).toBe(2);
    expect(sample(text, 'ratelimit_service_response_time_seconds_bucket', { grpc_method: 'ShouldRateLimit', le: '0.005' })).toBe(1);
    expect(sample(text, 'ratelimit_service_response_time_seconds_sum', { grpc_method: 'ShouldRateLimit' })).toBeCloseTo(0.203, 9);
    expect(sample(text, 'ratelimit_service_domain_not_found', { domain: UNKNOWN_DOMAIN_LABEL })).toBe(1);
  });

  it('observes response times in milliseconds with PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS, buckets scaled alike', async () => {
    const m = new PrometheusMetrics({ responseTimeInMilliseconds: true });
    m.requestDone('ShouldRateLimit', 0.003);
    const text = await m.registry.metrics();
    expect(sample(text, 'ratelimit_service_response_time_seconds_sum', { grpc_method: 'ShouldRateLimit' })).toBeCloseTo(3, 9);
    expect(sample(text, 'ratelimit_service_response_time_seconds_bucket', { grpc_method: 'ShouldRateLimit', le: '5' })).toBe(1);
    expect(sample(text, 'ratelimit_service_response_time_seconds_bucket', { grpc_method: 'ShouldRateLimit', le: '2.5' })).toBe(0);
  });

  it('reports backend health as a 0/1 gauge', async () => {
    const m = new PrometheusMetrics();
    expect(sample(await m.registry.metrics(), 'floodgate_backend_healthy')).toBe(1);
    m.setBackendHealthy(false);
    expect(sample(await m.registry.metrics(), 'floodgate_backend_healthy')).toBe(0);
  });

  it('keeps counting across scrapes: each scrape shows every hit recorded before it', async () => {
    const m = new PrometheusMetrics();
    const labels = { domain: 'd', key1: 'k', key2: '' };
    m.recordRule('d', 'd.k', COUNTS);
    expect(sample(await m.registry.metrics(), 'ratelimit_service_rate_limit_total_hits', labels)).toBe(6);
    expect(sample(await m.registry.metrics(), 'ratelimit_service_rate_limit_total_hits', labels)).toBe(6);
    m.recordRule('d', 'd.k', COUNTS);
    m.recordRule('d', 'd.k', COUNTS);
    const text = await m.registry.metrics();
    expect(sample(text, 'ratelimit_service_rate_limit_total_hits', labels)).toBe(18);
    expect(sample(text, 'ratelimit_service_rate_limit_over_limit_with_local_cache', labels)).toBe(3);
    expect(sample(text, 'ratelimit_service_rate_limit_shadow_mode', labels)).toBe(12);
    // A single metric read on its own (as the tests and the cluster aggregator do) is current too.
    m.recordRule('d', 'd.k', COUNTS);
    expect(await m.registry.getSingleMetricAsString('ratelimit_service_rate_limit_within_limit')).toContain('key1="k",key2=""} 12');
  });

  it('loses no hits of any label set within METRICS_MAX_SERIES, however many there are', async () => {
    const m = new PrometheusMetrics({ maxSeries: 20_000 });
    const one = { ...COUNTS, totalHits: 1, withinLimit: 1, nearLimit: 0, overLimit: 0, overLimitWithLocalCache: 0, shadowMode: 0 };
    m.recordRule('d', 'd.first', one);
    for (let i = 0; i < 10_050; i++) m.recordRule('d', `d.k${i}`, one);
    m.recordRule('d', 'd.first', one);
    const text = await m.registry.metrics();
    expect(sample(text, 'ratelimit_service_rate_limit_total_hits', { domain: 'd', key1: 'first', key2: '' })).toBe(2);
    expect(sample(text, 'ratelimit_service_rate_limit_within_limit', { domain: 'd', key1: 'k0', key2: '' })).toBe(1);
    expect(sample(text, 'ratelimit_service_rate_limit_within_limit', { domain: 'd', key1: 'k10049', key2: '' })).toBe(1);
  });

  it('keeps registries apart (no global registry)', async () => {
    const a = new PrometheusMetrics();
    const b = new PrometheusMetrics();
    a.configLoad(true);
    expect(sample(await a.registry.metrics(), 'ratelimit_service_config_load_success')).toBe(1);
    expect(sample(await b.registry.metrics(), 'ratelimit_service_config_load_success')).toBe(0);
  });
});

/** Number of sample lines of one metric. */
function seriesCount(text: string, name: string): number {
  return text.split('\n').filter((line) => line.startsWith(name + '{') || line.startsWith(name + ' ')).length;
}

describe('PrometheusMetrics bounds (issue 8, finding 2)', () => {
  const ONE: RuleHitCounts = { totalHits: 1, withinLimit: 1, nearLimit: 0, overLimit: 0, overLimitWithLocalCache: 0, shadowMode: 0 };

  it('labels every unknown domain with one fixed value, never the request text', async () => {
    const m = new PrometheusMetrics();
    const sink: ServiceMetrics = m;
    for (let i = 0; i < 1000; i++) sink.domainNotFound(`d${i}-${'x'.repeat(4096)}`);
    const text = await m.registry.metrics();
    console.log(`1000 unknown 4 KB domains: /metrics is ${text.length} bytes`);
    expect(seriesCount(text, 'ratelimit_service_domain_not_found')).toBe(1);
    expect(sample(text, 'ratelimit_service_domain_not_found', { domain: UNKNOWN_DOMAIN_LABEL })).toBe(1000);
    expect(text).not.toContain('xxxx');
  });

  it('keeps at most maxSeries rule label sets and counts what it dropped', async () => {
    const m = new PrometheusMetrics({ maxSeries: 100 });
    for (let i = 0; i < 1000; i++) m.recordRule('d', `d.user_${i}`, ONE);
    m.recordRule('d', 'd.user_5', ONE); // an existing series keeps counting
    const text = await m.registry.metrics();
    console.log(
      `1000 label sets, cap 100: ${seriesCount(text, 'ratelimit_service_rate_limit_total_hits')} series, /metrics ${text.length} bytes`,
    );
    expect(seriesCount(text, 'ratelimit_service_rate_limit_total_hits')).toBe(100);
    expect(sample(text, 'ratelimit_service_rate_limit_total_hits', { domain: 'd', key1: 'user_5', key2: '' })).toBe(2);
    expect(sample(text, 'floodgate_metrics_series_dropped_total')).toBe(900);
  });

  it('shortens a long label value to a bounded, distinct one', async () => {
    const m = new PrometheusMetrics();
    const long = 'v'.repeat(4096);
    m.recordRule('d', `d.k_${long}a`, ONE);
    m.recordRule('d', `d.k_${long}b`, ONE);
    const text = await m.registry.metrics();
    const lines = text.split('\n').filter((l) => l.startsWith('ratelimit_service_rate_limit_total_hits{'));
    console.log(`two 4 KB label values: sample lines of ${lines.map((l) => l.length).join(', ')} bytes`);
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line.length).toBeLessThan(400);
  });

  it('keeps a scrape small and quick even when 10,000 requests each bring 4 KB detailed values', async () => {
    const m = new PrometheusMetrics();
    for (let i = 0; i < 10_000; i++) m.recordRule('d', `d.user_${i}-${'u'.repeat(4096)}.path_${'p'.repeat(4096)}`, ONE);
    // The control, measured in the same run: 10,000 short label sets at the same cap. A busy
    // machine slows both; the least of interleaved scrapes is the cost (a stall only adds).
    const control = new PrometheusMetrics();
    for (let i = 0; i < 10_000; i++) control.recordRule('d', `d.user_${i}.path_p`, ONE);
    const scrapeMs = async (metrics: PrometheusMetrics): Promise<{ ms: number; text: string }> => {
      const start = performance.now();
      const text = await metrics.registry.metrics();
      return { ms: performance.now() - start, text };
    };
    let ms = Infinity;
    let controlMs = Infinity;
    let text = '';
    for (let round = 0; round < 3; round++) {
      controlMs = Math.min(controlMs, (await scrapeMs(control)).ms);
      const scraped = await scrapeMs(m);
      ms = Math.min(ms, scraped.ms);
      text = scraped.text;
    }
    console.log(
      `10,000 label sets of 2 × 4 KB at the default cap: /metrics ${(text.length / 1e6).toFixed(2)} MB in ${ms.toFixed(0)} ms; short labels ${controlMs.toFixed(0)} ms`,
    );
    expect(text.length).toBeLessThan(4_000_000);
    expect(ms).toBeLessThan(20 * controlMs + 100);
  });

  it('counts memory counters evicted', async () => {
    const m = new PrometheusMetrics();
    m.memoryCountersEvicted(3);
    m.memoryCountersEvicted(1);
    expect(sample(await m.registry.metrics(), 'floodgate_memory_counters_evicted_total')).toBe(4);
  });
});
