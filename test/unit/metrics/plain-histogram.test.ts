import { AggregatorRegistry, Histogram, Registry, type RegistryContentType } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { PlainHistogram, type HistogramChild } from '../../../src/metrics/plain-histogram';
import { parseScrape, total } from '../../helpers/metrics-scrape';
import { mulberry32 } from '../../helpers/seeded-random';

// The script histogram's bounds, and the response time's in milliseconds (le="2.5", le="500"...).
const SCRIPT_BUCKETS = [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5];
const MS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1].map((b) => b * 1000);
const NAME = 'test_duration_seconds';
const HELP = 'Time of something, with "quotes" and a \\ backslash';

/** Values on every bound, 0, above the last bound, and random ones across (and past) the range. */
function values(buckets: readonly number[], seed: number, n: number): number[] {
  const random = mulberry32(seed);
  const last = buckets[buckets.length - 1]!;
  const out = [...buckets, 0, last * 1.0000001, last * 3, 1e6];
  for (let i = 0; i < n; i++) {
    const r = random();
    if (r < 0.2) out.push(buckets[Math.floor(random() * buckets.length)]!);
    else if (r < 0.6) out.push(random() * last * 1.2);
    else out.push(Math.exp(Math.log(buckets[0]! / 10) + random() * Math.log((last * 10) / (buckets[0]! / 10))));
  }
  return out;
}

interface Pair {
  readonly reference: Registry<RegistryContentType>;
  readonly plain: Registry<RegistryContentType>;
  /** Both histograms' children for one label set; observe goes to both. */
  child(...labelValues: string[]): { observe(value: number): void };
}

/** The same histogram twice: prom-client's in one registry, PlainHistogram in another. */
function pair(labelNames: string[], buckets: readonly number[], contentType: RegistryContentType = Registry.PROMETHEUS_CONTENT_TYPE): Pair {
  const reference = new Registry<RegistryContentType>();
  const plain = new Registry<RegistryContentType>();
  reference.setContentType(contentType);
  plain.setContentType(contentType);
  const ref = new Histogram({ name: NAME, help: HELP, labelNames, buckets: [...buckets], registers: [reference] });
  const ours = new PlainHistogram({ name: NAME, help: HELP, labelNames, buckets, registers: [plain] });
  return {
    reference,
    plain,
    child(...labelValues) {
      const a = labelNames.length === 0 ? { observe: (v: number) => ref.observe(v) } : ref.labels(...labelValues);
      const b: HistogramChild = ours.child(...labelValues);
      return {
        observe(v) {
          a.observe(v);
          b.observe(v);
        },
      };
    },
  };
}

async function expectSame(p: Pair): Promise<string> {
  const text = await p.reference.metrics();
  expect(await p.plain.metrics()).toBe(text);
  expect(await p.plain.getMetricsAsJSON()).toStrictEqual(await p.reference.getMetricsAsJSON());
  return text;
}

describe('PlainHistogram', () => {
  it.each([
    ['Prometheus text', SCRIPT_BUCKETS, Registry.PROMETHEUS_CONTENT_TYPE],
    ['Prometheus text, millisecond bounds', MS_BUCKETS, Registry.PROMETHEUS_CONTENT_TYPE],
    ['OpenMetrics', SCRIPT_BUCKETS, Registry.OPENMETRICS_CONTENT_TYPE],
  ] as const)('exposes what prom-client Histogram does for the same observations (%s)', async (_, buckets, contentType) => {
    const p = pair(['script', 'node'], buckets, contentType);
    // Created in one order, first observed in another; one never observed.
    const a = p.child('fixed_window', '10.0.0.1:6379');
    const b = p.child('token_bucket', 'persecond/10.0.0.2:6379');
    p.child('gcra', 'never:1');
    const c = p.child('fixed_window', 'other');
    const all = values(buckets, 7, 3000);
    c.observe(all[0]!);
    all.forEach((v, i) => [a, b, c][i % 3]!.observe(v));
    const text = await expectSame(p);
    expect(p.plain.contentType).toBe(contentType);
    expect(text).toContain('fixed_window');
    expect(text).not.toContain('never:1');
    // Several scrapes read the same counts.
    await expectSame(p);
  });

  it('a value equal to a bound counts in that bucket, above the last bound only in +Inf', async () => {
    const p = pair(['grpc_method'], SCRIPT_BUCKETS);
    const c = p.child('ShouldRateLimit');
    for (const b of SCRIPT_BUCKETS) c.observe(b);
    c.observe(0);
    c.observe(0.6);
    const text = await expectSame(p);
    const samples = parseScrape(text);
    SCRIPT_BUCKETS.forEach((le, i) => expect(total(samples, `${NAME}_bucket`, { le: String(le) })).toBe(i + 2));
    expect(total(samples, `${NAME}_bucket`, { le: '+Inf' })).toBe(SCRIPT_BUCKETS.length + 2);
    expect(total(samples, `${NAME}_count`)).toBe(SCRIPT_BUCKETS.length + 2);
  });

  it('without labels: exported from the start, as prom-client does', async () => {
    const p = pair([], SCRIPT_BUCKETS);
    await expectSame(p);
    const c = p.child();
    for (const v of values(SCRIPT_BUCKETS, 11, 200)) c.observe(v);
    await expectSame(p);
    p.reference.resetMetrics();
    p.plain.resetMetrics();
    await expectSame(p);
    c.observe(0.003);
    await expectSame(p);
  });

  it('after a reset, label sets are gone until observed again, in the new order; children stay valid', async () => {
    const p = pair(['grpc_method'], MS_BUCKETS);
    const a = p.child('A');
    const b = p.child('B');
    for (const v of values(MS_BUCKETS, 3, 100)) {
      a.observe(v);
      b.observe(v / 2);
    }
    await expectSame(p);
    p.reference.resetMetrics();
    p.plain.resetMetrics();
    expect(await expectSame(p)).not.toContain('grpc_method');
    b.observe(3);
    a.observe(700);
    b.observe(1);
    await expectSame(p);
  });

  it('with the registry default labels', async () => {
    const p = pair(['script', 'node'], SCRIPT_BUCKETS);
    for (const r of [p.reference, p.plain]) r.setDefaultLabels({ instance: 'w1', node: 'default' });
    const a = p.child('fixed_window', 'a:1');
    for (const v of values(SCRIPT_BUCKETS, 5, 100)) a.observe(v);
    await expectSame(p);
  });

  it('the same label values give the same child; a wrong number of values is refused', () => {
    const h = new PlainHistogram({ name: NAME, help: HELP, labelNames: ['script', 'node'], buckets: SCRIPT_BUCKETS, registers: [] });
    expect(h.child('x', 'y')).toBe(h.child('x', 'y'));
    expect(h.child('x', 'y')).not.toBe(h.child('x', 'z'));
    expect(() => h.child('x')).toThrow(/2 label values expected/);
    expect(() => new PlainHistogram({ name: NAME, help: HELP, labelNames: [], buckets: [1, 1], registers: [] })).toThrow(/increasing/);
  });

  it('the cluster aggregation (WORKERS) sums two workers buckets as it does prom-client ones', async () => {
    const workers = [pair(['grpc_method'], MS_BUCKETS), pair(['grpc_method'], MS_BUCKETS)];
    workers.forEach((w, i) => {
      const c = w.child('ShouldRateLimit');
      for (const v of values(MS_BUCKETS, 100 + i, 500)) c.observe(v);
      if (i === 1) w.child('Other').observe(5);
    });
    const reference = AggregatorRegistry.aggregate(await Promise.all(workers.map((w) => w.reference.getMetricsAsJSON())));
    const plain = AggregatorRegistry.aggregate(await Promise.all(workers.map((w) => w.plain.getMetricsAsJSON())));
    const text = await plain.metrics();
    expect(text).toBe(await reference.metrics());
    const merged = parseScrape(text);
    const each = await Promise.all(workers.map(async (w) => parseScrape(await w.plain.metrics())));
    for (const le of ['0.5', '5', '250', '1000', '+Inf']) {
      const labels = { grpc_method: 'ShouldRateLimit', le };
      const sum = each.reduce((n, s) => n + total(s, `${NAME}_bucket`, labels), 0);
      expect(sum).toBeGreaterThan(0);
      expect(total(merged, `${NAME}_bucket`, labels)).toBe(sum);
    }
    expect(total(merged, `${NAME}_count`, { grpc_method: 'ShouldRateLimit' })).toBe(1000 + 2 * (MS_BUCKETS.length + 4));
    expect(total(merged, `${NAME}_count`, { grpc_method: 'Other' })).toBe(1);
  });
});
