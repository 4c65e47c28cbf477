import type { Metric, Registry, RegistryContentType } from 'prom-client';

/*
 * Why not prom-client's Histogram: two histograms are observed on every request (the response
 * time, and each Redis script call), and prom-client's observe, even through a child from
 * labels(), builds a closure, validates the labels, hashes the label object into a string and
 * finds the bucket through a number-to-string object key on every call. Here a caller resolves a
 * child once per label set, and its observe is a loop over a few upper bounds, one array slot, a
 * sum and a count: no strings, no allocation. The cumulative buckets are built only when the
 * registry reads the metric (a scrape), in the shape prom-client's Histogram gives (label sets in
 * order of first observation and none never observed, `le` first and as the bound number, `+Inf`,
 * then _sum and _count), so /metrics, getMetricsAsJSON and the WORKERS AggregatorRegistry sum are
 * the same as before; test/unit/metrics/plain-histogram.test.ts compares them with prom-client's.
 * No exemplars, timers or collect hook: nothing here uses them.
 */

/** The counts of one label set, resolved once by PlainHistogram.child. */
export interface HistogramChild {
  /** `value` is a finite number (a duration): it is not checked, a NaN would stay in the sum. */
  observe(value: number): void;
}

type LabelSet = Readonly<Record<string, string>>;

/** One exported sample, as prom-client's Histogram writes it (field order included). */
type Sample =
  | { labels: Record<string, string | number>; sharedLabels: LabelSet; value: number; metricName: string; exemplar: null | undefined }
  | { value: number; metricName: string; exemplar: null | undefined; labels: Record<string, string | number> };

interface Snapshot {
  name: string;
  help: string;
  type: 'histogram';
  values: Sample[];
  aggregator: 'sum';
}

class Series implements HistogramChild {
  /** Observations per bucket, not cumulative; the last slot holds those above the last bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  /** In `exported` since its first observation (prom-client adds a label set when first observed). */
  exported = false;

  constructor(
    readonly labels: LabelSet,
    private readonly bounds: Float64Array,
    private readonly exportedList: Series[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    // prom-client's findBound: a value equal to a bound is in that bucket.
    while (i < bounds.length && !(value <= (bounds[i] as number))) i++;
    this.counts[i] = (this.counts[i] as number) + 1;
    this.sum += value;
    this.count++;
    if (!this.exported) {
      this.exported = true;
      this.exportedList.push(this);
    }
  }

  zero(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
    this.exported = false;
  }
}

export interface PlainHistogramConfiguration<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  /** Upper bounds, increasing. */
  readonly buckets: readonly number[];
  readonly registers: readonly Registry<RegistryContentType>[];
}

/** A histogram metric that counts in plain numbers and is read by prom-client's Registry on scrape. */
export class PlainHistogram<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  /** How the cluster AggregatorRegistry merges the workers' values (WORKERS). */
  readonly aggregator = 'sum';
  private readonly labelNames: readonly L[];
  private readonly buckets: readonly number[];
  private readonly bounds: Float64Array;
  private readonly children = new Map<string, Series>();
  /** Label sets observed since the start or the last reset, in order of first observation. */
  private readonly exported: Series[] = [];

  constructor(config: PlainHistogramConfiguration<L>) {
    this.name = config.name;
    this.help = config.help;
    this.labelNames = [...config.labelNames];
    this.buckets = [...config.buckets];
    this.bounds = Float64Array.from(this.buckets);
    if (this.labelNames.includes('le' as L)) throw new Error('le is a reserved label name');
    if (this.buckets.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= (this.buckets[i - 1] as number))))
      throw new Error(`${this.name}: buckets must be finite and increasing`);
    // prom-client exports a histogram without labels from the start, observed or not.
    if (this.labelNames.length === 0) {
      const s = this.series([]);
      s.exported = true;
      this.exported.push(s);
    }
    // The Registry reads only name, help, type, aggregator, get/getForPromString and reset; its
    // typings accept only prom-client's own classes.
    for (const registry of config.registers) registry.registerMetric(this as unknown as Metric);
  }

  /** The counts of one label set (values in labelNames order); resolve it once and keep it. */
  child(...labelValues: string[]): HistogramChild {
    if (labelValues.length !== this.labelNames.length) {
      throw new Error(`${this.name}: ${this.labelNames.length} label values expected, got ${labelValues.length}`);
    }
    return this.series(labelValues);
  }

  /** prom-client's Registry reads this for the text exposition. */
  getForPromString(): Promise<Snapshot> {
    return Promise.resolve(this.snapshot(false));
  }

  /** getMetricsAsJSON (and so the cluster aggregation) reads this: labels merged into one object. */
  get(): Promise<Snapshot> {
    return Promise.resolve(this.snapshot(true));
  }

  /** Registry.resetMetrics: every label set is forgotten until observed again; children stay valid. */
  reset(): void {
    for (const s of this.exported) s.zero();
    this.exported.length = 0;
  }

  private series(labelValues: readonly string[]): Series {
    const key = labelValues.join('\u0000');
    let s = this.children.get(key);
    if (s === undefined) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((name, i) => (labels[name] = labelValues[i] as string));
      s = new Series(Object.freeze(labels), this.bounds, this.exported);
      this.children.set(key, s);
    }
    return s;
  }

  /** prom-client's get / getForPromString of a Histogram (extractBucketValuesForExport, addSumAndCountForExport, splayLabels). */
  private snapshot(splay: boolean): Snapshot {
    const values: Sample[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const s of this.exported) {
      const shared = s.labels;
      const add = (labels: Record<string, string | number>, value: number, metricName: string, exemplar: null | undefined): void => {
        values.push(
          splay
            ? { value, metricName, exemplar, labels: { ...labels, ...shared } }
            : { labels, sharedLabels: shared, value, metricName, exemplar },
        );
      };
      let cumulative = 0;
      this.buckets.forEach((le, i) => {
        cumulative += s.counts[i] as number;
        add({ le }, cumulative, bucketName, null);
      });
      add({ le: '+Inf' }, s.count, bucketName, null);
      add({}, s.sum, `${this.name}_sum`, undefined);
      add({}, s.count, `${this.name}_count`, undefined);
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}
