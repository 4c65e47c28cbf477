import { afterEach, describe, expect, it } from 'vitest';
import { StatsdMetrics, type StatsdSettings } from '../../../src/metrics/statsd-metrics';
import { datagrams, type StatsdTransport } from '../../../src/metrics/statsd-transport';
import { boundedLabel } from '../../../src/metrics/bounded-label';
import { ruleLabels, type RuleHitCounts } from '../../../src/metrics/metrics';
import { loadSettings } from '../../../src/settings/settings';

/** Keeps what would go on the wire. */
class RecordingTransport implements StatsdTransport {
  readonly payloads: string[] = [];
  send(payload: string): void {
    this.payloads.push(payload);
  }
  droppedBytes(): number {
    return 0;
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
  lines(): string[] {
    return this.payloads
      .join('')
      .split('\n')
      .filter((l) => l !== '');
  }
}

const HITS: RuleHitCounts = { totalHits: 5, withinLimit: 3, nearLimit: 1, overLimit: 2, overLimitWithLocalCache: 0, shadowMode: 0 };

function statsdFrom(env: Record<string, string>): { metrics: StatsdMetrics; transport: RecordingTransport } {
  const settings = loadSettings({ STATS_FLUSH_INTERVAL: '1h', ...env }).statsd as StatsdSettings;
  const transport = new RecordingTransport();
  return { metrics: new StatsdMetrics(settings, transport), transport };
}

let open: StatsdMetrics[] = [];
function make(env: Record<string, string> = {}): { metrics: StatsdMetrics; transport: RecordingTransport } {
  const made = statsdFrom(env);
  open.push(made.metrics);
  return made;
}
afterEach(async () => {
  await Promise.all(open.map((m) => m.close()));
  open = [];
});

describe('statsd lines as the reference sends them (lyft/gostats)', () => {
  it('names rule counters ratelimit.service.rate_limit.<key path>.<stat>, counters as |c, zero deltas not sent', () => {
    const { metrics, transport } = make();
    metrics.recordRule('edge', 'edge.api_key', HITS);
    metrics.flush();
    expect(transport.lines().sort()).toEqual([
      'ratelimit.service.rate_limit.edge.api_key.near_limit:1|c',
      'ratelimit.service.rate_limit.edge.api_key.over_limit:2|c',
      'ratelimit.service.rate_limit.edge.api_key.total_hits:5|c',
      'ratelimit.service.rate_limit.edge.api_key.within_limit:3|c',
    ]);
  });

  it('sends deltas: a second flush carries only what was counted since the first', () => {
    const { metrics, transport } = make();
    metrics.recordRule('edge', 'edge.api_key', HITS);
    metrics.flush();
    transport.payloads.length = 0;
    metrics.flush();
    expect(transport.payloads).toEqual([]);
    metrics.recordRule('edge', 'edge.api_key', { ...HITS, totalHits: 1, withinLimit: 1, nearLimit: 0, overLimit: 0 });
    metrics.flush();
    expect(transport.lines().sort()).toEqual([
      'ratelimit.service.rate_limit.edge.api_key.total_hits:1|c',
      'ratelimit.service.rate_limit.edge.api_key.within_limit:1|c',
    ]);
  });

  it('applies the reference stat-name clean-up to the key path (: and | and IPv4 dots)', () => {
    const { metrics, transport } = make();
    metrics.recordRule('d', 'd.remote_address_10.0.0.1.x_a:b|c', { ...HITS, nearLimit: 0, overLimit: 0, withinLimit: 5 });
    metrics.flush();
    expect(transport.lines()).toContain('ratelimit.service.rate_limit.d.remote_address_10_0_0_1.x_a_b_c.total_hits:5|c');
  });

  it('sends the service, config, error and server stats under the reference names and types', () => {
    const { metrics, transport } = make();
    metrics.configLoad(true);
    metrics.configLoad(false);
    metrics.domainNotFound('nope');
    metrics.globalShadowMode();
    metrics.shouldRateLimitError('redis_error');
    metrics.shouldRateLimitError('invalid_request');
    metrics.requestDone('ShouldRateLimit', 0.0042);
    metrics.requestDone('ShouldRateLimit', 0.0129);
    metrics.flush();
    expect(transport.lines().sort()).toEqual([
      'ratelimit.service.call.should_rate_limit.redis_error:1|c',
      'ratelimit.service.call.should_rate_limit.service_error:1|c',
      'ratelimit.service.config_load_error:1|c',
      'ratelimit.service.config_load_success:1|c',
      'ratelimit.service.global_shadow_mode:1|c',
      'ratelimit.service.rate_limit.nope.domain_not_found:1|c',
      // Timers in whole milliseconds, rounded down, one line per call.
      'ratelimit_server.ShouldRateLimit.response_time:12|ms',
      'ratelimit_server.ShouldRateLimit.response_time:4|ms',
      'ratelimit_server.ShouldRateLimit.total_requests:2|c',
    ]);
  });

  it('sends the Redis pool stats: cx_active a gauge sent at every flush, cx_total and cx_local_close counters', () => {
    const { metrics, transport } = make();
    metrics.redisConnection('redis_pool', 'open');
    metrics.redisConnection('redis_pool', 'open');
    metrics.redisConnection('redis_pool', 'close');
    metrics.redisConnection('redis_per_second_pool', 'open');
    metrics.flush();
    expect(transport.lines().sort()).toEqual([
      'ratelimit.redis_per_second_pool.cx_active:1|g',
      'ratelimit.redis_per_second_pool.cx_total:1|c',
      'ratelimit.redis_pool.cx_active:1|g',
      'ratelimit.redis_pool.cx_local_close:1|c',
      'ratelimit.redis_pool.cx_total:2|c',
    ]);
    transport.payloads.length = 0;
    metrics.flush();
    expect(transport.lines().sort()).toEqual(['ratelimit.redis_per_second_pool.cx_active:1|g', 'ratelimit.redis_pool.cx_active:1|g']);
  });

  it('puts EXTRA_TAGS at the end of every name as gostats serializes them (sorted, values cleaned)', () => {
    const { metrics, transport } = make({ EXTRA_TAGS: 'zone:eu.west-1,app:rl' });
    metrics.recordRule('edge', 'edge.k', { ...HITS, nearLimit: 0, overLimit: 0, withinLimit: 5 });
    metrics.requestDone('ShouldRateLimit', 0.001);
    metrics.flush();
    expect(transport.lines()).toContain('ratelimit.service.rate_limit.edge.k.total_hits.__app=rl.__zone=eu_west-1:5|c');
    expect(transport.lines()).toContain('ratelimit_server.ShouldRateLimit.response_time.__app=rl.__zone=eu_west-1:1|ms');
  });

  it('keeps a bounded sample of timer values and sends it with its sample rate', () => {
    const { metrics, transport } = make();
    for (let i = 0; i < 25_000; i++) metrics.requestDone('ShouldRateLimit', 0.002);
    metrics.flush();
    const timers = transport.lines().filter((l) => l.includes('|ms'));
    expect(timers).toHaveLength(10_000);
    expect(timers[0]).toBe('ratelimit_server.ShouldRateLimit.response_time:2|ms|@0.400000');
    expect(transport.lines()).toContain('ratelimit_server.ShouldRateLimit.total_requests:25000|c');
  });

  it('keeps at most 10 000 rule paths between flushes: the next one flushes and starts afresh', () => {
    const { metrics, transport } = make();
    for (let i = 0; i < 10_001; i++)
      metrics.recordRule('d', `d.user_${i}`, { ...HITS, nearLimit: 0, overLimit: 0, withinLimit: 1, totalHits: 1 });
    // The 10 001st path forced a flush of the first 10 000 (two lines each).
    expect(transport.lines()).toHaveLength(20_000);
    metrics.flush();
    expect(transport.lines()).toHaveLength(20_002);
  });
});

describe('DogStatsD (USE_DOG_STATSD) with mogrifiers', () => {
  const dog = { USE_STATSD: 'false', USE_DOG_STATSD: 'true' };

  it('sends EXTRA_TAGS as DogStatsD tags', () => {
    const { metrics, transport } = make({ ...dog, EXTRA_TAGS: 'env:prod' });
    metrics.configLoad(true);
    metrics.requestDone('ShouldRateLimit', 0.003);
    metrics.flush();
    expect(transport.lines().sort()).toEqual([
      'ratelimit.service.config_load_success:1|c|#env:prod',
      'ratelimit_server.ShouldRateLimit.response_time:3|ms|#env:prod',
      'ratelimit_server.ShouldRateLimit.total_requests:1|c|#env:prod',
    ]);
  });

  it("turns names into name + tags with the reference README's example mogrifiers, the first match winning", () => {
    const { metrics, transport } = make({
      ...dog,
      USE_DOG_STATSD_MOGRIFIERS: 'HITS,DOMAIN',
      DOG_STATSD_MOGRIFIER_HITS_PATTERN: '^ratelimit\\.service\\.rate_limit\\.([^.]+)\\.(.*)\\.([^.]+)$',
      DOG_STATSD_MOGRIFIER_HITS_NAME: 'ratelimit.service.rate_limit.$3',
      DOG_STATSD_MOGRIFIER_HITS_TAGS: 'domain:$1,descriptor:$2',
      DOG_STATSD_MOGRIFIER_DOMAIN_PATTERN: '^ratelimit\\.service\\.(.*)$',
      DOG_STATSD_MOGRIFIER_DOMAIN_NAME: 'ratelimit.$1',
    });
    metrics.recordRule('edge', 'edge.path_/login.remote_address', { ...HITS, nearLimit: 0, overLimit: 0, withinLimit: 5 });
    metrics.configLoad(true);
    metrics.flush();
    expect(transport.lines().sort()).toEqual([
      'ratelimit.config_load_success:1|c',
      'ratelimit.service.rate_limit.total_hits:5|c|#domain:edge,descriptor:path_/login.remote_address',
      'ratelimit.service.rate_limit.within_limit:5|c|#domain:edge,descriptor:path_/login.remote_address',
    ]);
  });
});

describe('datagrams', () => {
  it('never cuts a line and keeps each datagram within 1432 bytes when lines allow', () => {
    const line = 'x'.repeat(99) + '\n';
    const payload = line.repeat(40);
    const parts = datagrams(payload);
    expect(parts.join('')).toBe(payload);
    for (const p of parts) {
      expect(Buffer.byteLength(p)).toBeLessThanOrEqual(1432);
      expect(p.endsWith('\n')).toBe(true);
    }
    expect(parts).toHaveLength(3);
  });
});

describe('stat names from request text stay bounded (issue 8, finding 2, on the statsd side)', () => {
  it('an unknown domain of 4 KB gives a short stat name, and one interval keeps a bounded number of names', () => {
    const { metrics, transport } = make();
    const long = 'd'.repeat(4096);
    for (let i = 0; i < 20_000; i++) metrics.domainNotFound(`${i}-${long}`);
    metrics.domainNotFound('nope');
    metrics.flush();
    const lines = transport.lines();
    const longest = Math.max(...lines.map((l) => l.length));
    console.log(`20,000 unknown 4 KB domains in one interval: ${lines.length} stat lines, longest ${longest} characters`);
    expect(longest).toBeLessThan(300);
    expect(lines.length).toBeLessThanOrEqual(10_001);
    // A short, ordinary unknown domain keeps the reference's name.
    expect(lines.some((l) => l.startsWith('ratelimit.service.rate_limit.0-ddd'))).toBe(true);
  });
});

describe('stat names from request values are bounded as the Prometheus labels are (issue 18, finding 7)', () => {
  it('a detailed_metric path of 15 × 4 KB values gives a name of bounded length; key1 and key2 are the Prometheus labels', () => {
    const { metrics, transport } = make();
    const values = Array.from({ length: 15 }, (_, i) => `k${i}_${String(i).repeat(4000)}`);
    const metricKey = ['shop', ...values].join('.');
    metrics.recordRule('shop', metricKey, HITS);
    metrics.recordRule('shop', ['shop', ...values.slice(0, 14), 'k14_other'].join('.'), HITS);
    metrics.flush();
    const names = transport.lines().map((l) => l.slice(0, l.lastIndexOf(':')));
    const longest = Math.max(...names.map((n) => n.length));
    console.log(`15 × 4 KB detailed_metric values: stat name ${longest} characters (the path is ${metricKey.length})`);
    expect(longest).toBeLessThanOrEqual(600);
    // Two paths that differ only past the bound stay two stats.
    expect(new Set(names.filter((n) => n.endsWith('.total_hits'))).size).toBe(2);
    const labels = ruleLabels('shop', metricKey);
    const levels = (names[0] as string).slice('ratelimit.service.rate_limit.'.length).split('.');
    // The labels floodgate's own Prometheus series carry (PrometheusMetrics bounds each).
    expect(levels.slice(0, 3)).toEqual([labels.domain, labels.key1, labels.key2].map(boundedLabel));
  });

  it('a flush goes out in pieces of at most 64 KiB, and rule paths kept between flushes are bounded in bytes', () => {
    const { metrics, transport } = make();
    const value = 'v'.repeat(4000);
    for (let i = 0; i < 6000; i++) metrics.recordRule('shop', `shop.detailed_${i}_${value}`, HITS);
    // Rule paths are kept between flushes up to a bound in bytes too: these were sent already.
    expect(transport.payloads.length).toBeGreaterThan(0);
    metrics.flush();
    const sizes = transport.payloads.map((p) => Buffer.byteLength(p));
    const total = sizes.reduce((a, b) => a + b, 0);
    console.log(`6000 rule paths of 4 KB values: ${sizes.length} sends, largest ${Math.max(...sizes)} bytes, ${total} bytes in all`);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(64 * 1024);
    expect(transport.lines().filter((l) => l.endsWith('.total_hits:5|c'))).toHaveLength(6000);
  });
});
