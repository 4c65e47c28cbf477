import { parse } from 'yaml';
import { SettingsError } from '../base/errors';

/**
 * A statsd_exporter mapping file (PROMETHEUS_MAPPER_YAML), as the reference's Prometheus sink
 * applies it to its stat names: glob mappings first (the first in file order wins), then regex
 * mappings in file order; `name` and `labels` may use `$1`/`${1}`; `match_metric_type`
 * (counter, gauge, observer), `action: drop`, `observer_type`/`timer_type` (histogram or summary),
 * `buckets`/`histogram_options.buckets`, `quantiles`/`summary_options.quantiles`, `scale`, and
 * `defaults` for match_type, observer_type, buckets and quantiles.
 */
export type StatType = 'counter' | 'gauge' | 'observer';

export interface Observer {
  readonly type: 'histogram' | 'summary';
  readonly buckets: readonly number[];
  readonly quantiles: readonly number[];
}

export interface Mapped {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly scale: number;
  readonly observer: Observer;
}

interface CompiledMapping {
  readonly glob: boolean;
  readonly pattern: RegExp;
  readonly metricType?: StatType;
  readonly drop: boolean;
  readonly name: string;
  readonly labels: readonly (readonly [string, string])[];
  readonly scale: number;
  readonly observer: Observer;
}

// Prometheus' DefBuckets and the exporter's default quantiles.
const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const DEFAULT_QUANTILES = [0.5, 0.9, 0.99];
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function bad(path: string, why: string): SettingsError {
  return new SettingsError(`invalid value for PROMETHEUS_MAPPER_YAML: ${path}: ${why}`);
}

function numbers(v: unknown, what: string, path: string): number[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'number')) throw bad(path, `${what} must be a list of numbers`);
  return v as number[];
}

function quantileList(v: unknown, path: string): number[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) throw bad(path, 'quantiles must be a list');
  return v.map((q: unknown) => {
    const value = isObj(q) ? q['quantile'] : q;
    if (typeof value !== 'number') throw bad(path, 'a quantile must be a number');
    return value;
  });
}

function observerType(v: unknown, path: string): 'histogram' | 'summary' | undefined {
  if (v === undefined || v === '') return undefined;
  if (v === 'histogram' || v === 'summary') return v;
  throw bad(path, `observer_type must be histogram or summary, not '${shown(v)}'`);
}

/** A YAML value in an error message: a string as it is, anything else as JSON. */
function shown(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** A glob as the exporter's FSM reads it: `*` stands for (part of) one dot-separated field. */
function globToRegExp(glob: string): RegExp {
  const fields = glob.split('.').map((f) =>
    f
      .split('*')
      .map((part) => part.replace(/[\\^$+?.()|[\]{}]/g, '\\$&'))
      .join('([^.]*)'),
  );
  return new RegExp(`^${fields.join('\\.')}$`);
}

/** `$1`, `${1}`: the capture; anything else (a name, an index out of range) is empty, as in the exporter. */
function expand(template: string, captures: readonly (string | undefined)[]): string {
  return template.replace(/\$\{?([a-zA-Z0-9_$]+)\}?/g, (_, ref: string) => {
    if (!/^\d+$/.test(ref)) return '';
    const i = Number(ref);
    return i >= 1 && i < captures.length ? (captures[i] ?? '') : '';
  });
}

/** What `defaults` gives every mapping that does not say otherwise. */
interface MappingDefaults {
  readonly matchType: 'glob' | 'regex';
  readonly observer: Observer['type'] | undefined;
  readonly buckets: readonly number[];
  readonly quantiles: readonly number[];
}

function parseMappingFile(yamlText: string): Obj {
  let doc: unknown;
  try {
    doc = parse(yamlText);
  } catch (err) {
    throw bad('file', (err as Error).message.split('\n')[0] ?? 'not YAML');
  }
  return isObj(doc) ? doc : {};
}

function mappingDefaults(root: Obj): MappingDefaults {
  const defaults = isObj(root['defaults']) ? root['defaults'] : {};
  const matchType = defaults['match_type'] === 'regex' ? 'regex' : 'glob';
  const observer = observerType(defaults['observer_type'] ?? defaults['timer_type'], 'defaults');
  const histogram = isObj(defaults['histogram_options']) ? defaults['histogram_options'] : {};
  const summary = isObj(defaults['summary_options']) ? defaults['summary_options'] : {};
  const buckets = numbers(histogram['buckets'] ?? defaults['buckets'], 'buckets', 'defaults') ?? DEFAULT_BUCKETS;
  const quantiles = quantileList(summary['quantiles'] ?? defaults['quantiles'], 'defaults') ?? DEFAULT_QUANTILES;
  return { matchType, observer, buckets, quantiles };
}

function mappingPattern(match: string, glob: boolean, path: string): RegExp {
  try {
    return glob ? globToRegExp(match) : new RegExp(match);
  } catch (err) {
    throw bad(path, `invalid regex ${match}: ${(err as Error).message}`);
  }
}

function mappingLabels(m: Obj, path: string): [string, string][] {
  const labelsObj = isObj(m['labels']) ? m['labels'] : {};
  return Object.entries(labelsObj).map(([k, v]): [string, string] => {
    if (!LABEL_NAME.test(k)) throw bad(path, `invalid label key: ${k}`);
    return [k, String(v)];
  });
}

function matchMetricType(m: Obj, path: string): StatType | undefined {
  const metricType = m['match_metric_type'];
  if (metricType !== undefined && metricType !== 'counter' && metricType !== 'gauge' && metricType !== 'observer') {
    throw bad(path, `match_metric_type must be counter, gauge or observer, not '${shown(metricType)}'`);
  }
  return metricType;
}

function mappingScale(m: Obj, path: string): number {
  const scale = m['scale'];
  if (scale !== undefined && typeof scale !== 'number') throw bad(path, 'scale must be a number');
  return scale ?? 1;
}

function mappingObserver(m: Obj, path: string, defaults: MappingDefaults): Observer {
  const histogram = isObj(m['histogram_options']) ? m['histogram_options'] : {};
  const summary = isObj(m['summary_options']) ? m['summary_options'] : {};
  return {
    // The exporter's default observer is a summary.
    type: observerType(m['observer_type'] ?? m['timer_type'], path) ?? defaults.observer ?? 'summary',
    buckets: numbers(histogram['buckets'] ?? m['buckets'], 'buckets', path) ?? defaults.buckets,
    quantiles: quantileList(summary['quantiles'] ?? m['quantiles'], path) ?? defaults.quantiles,
  };
}

/** The required `match` and `name` of a mapping. */
function matchAndName(m: Obj, path: string): { match: string; name: string } {
  const match = m['match'];
  const name = m['name'];
  if (typeof match !== 'string' || match === '') throw bad(path, 'match is required');
  if (typeof name !== 'string' || name === '') throw bad(path, "metric mapping didn't set a metric name");
  return { match, name };
}

function compileMapping(m: unknown, i: number, defaults: MappingDefaults): CompiledMapping {
  const path = `mappings[${i}]`;
  if (!isObj(m)) throw bad(path, 'must be a map');
  const { match, name } = matchAndName(m, path);
  const glob = (m['match_type'] ?? defaults.matchType) !== 'regex';
  const pattern = mappingPattern(match, glob, path);
  // A name made of captures is checked once expanded; a literal one now.
  if (!name.includes('$') && !METRIC_NAME.test(name)) throw bad(path, `metric name '${name}' is not a valid Prometheus name`);
  const labels = mappingLabels(m, path);
  const metricType = matchMetricType(m, path);
  const scale = mappingScale(m, path);
  return {
    glob,
    pattern,
    ...(metricType !== undefined ? { metricType: metricType } : {}),
    drop: m['action'] === 'drop',
    name,
    labels,
    scale,
    observer: mappingObserver(m, path, defaults),
  };
}

export class StatsdMapping {
  private readonly globs: CompiledMapping[];
  private readonly regexes: CompiledMapping[];
  /** Per literal metric name, every label name its mappings give it (see labelNamesOf). */
  private readonly labelUnion = new Map<string, string[]>();

  constructor(yamlText: string) {
    const root = parseMappingFile(yamlText);
    const defaults = mappingDefaults(root);
    const mappings = root['mappings'] ?? [];
    if (!Array.isArray(mappings)) throw bad('mappings', 'must be a list');
    const compiled = mappings.map((m: unknown, i) => compileMapping(m, i, defaults));
    for (const c of compiled) {
      if (c.drop || c.name.includes('$')) continue;
      const names = new Set([...(this.labelUnion.get(c.name) ?? []), ...c.labels.map(([k]) => k)]);
      this.labelUnion.set(c.name, [...names].sort());
    }
    this.globs = compiled.filter((c) => c.glob);
    this.regexes = compiled.filter((c) => !c.glob);
  }

  /**
   * The label names of every mapping that names this metric literally, united: the exporter lets
   * one name carry different label sets (the reference's default mapping gives total_hits
   * {domain,key1} and {domain,key1,key2}); one Prometheus metric with the union, the missing ones
   * empty, exposes the same series (an empty label is an absent one).
   */
  labelNamesOf(metricName: string): readonly string[] | undefined {
    return this.labelUnion.get(metricName);
  }

  /** The series a stat goes to; `drop` when a mapping drops it; undefined when none matches. */
  map(statName: string, type: StatType): Mapped | 'drop' | undefined {
    for (const list of [this.globs, this.regexes]) {
      for (const m of list) {
        if (m.metricType !== undefined && m.metricType !== type) continue;
        const captures = m.pattern.exec(statName);
        if (captures === null) continue;
        if (m.drop) return 'drop';
        const labels: Record<string, string> = {};
        for (const [k, v] of m.labels) labels[k] = expand(v, captures);
        return { name: expand(m.name, captures), labels, scale: m.scale, observer: m.observer };
      }
    }
    return undefined;
  }
}

/** The exporter's name for an unmapped stat: every character outside [a-zA-Z0-9_] becomes `_`. */
export function escapeMetricName(name: string): string {
  const escaped = name.replace(/[^a-zA-Z0-9_]/g, '_');
  return /^[0-9]/.test(escaped) ? `_${escaped}` : escaped;
}
