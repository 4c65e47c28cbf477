import { excerpt } from './quote-excerpt';
import type { PolicyConfig } from '../domain/policy-config';
import { DecodeYamlFields } from './decode-yaml-fields';
import { goText, type YMap, type YNode } from './yaml-tree';

/** Keys of a `policy` block (ours: the reference has no policy), and of its nested maps. */
const POLICY_KEYS: ReadonlySet<string> = new Set([
  'client',
  'route',
  'fingerprint',
  'window_seconds',
  'weights',
  'thresholds',
  'limit_percent',
  'blocked_seconds',
  'quiet_seconds',
  'shadow_mode',
]);
const NESTED_KEYS: Readonly<Record<string, ReadonlySet<string>>> = {
  weights: new Set(['requests', 'repeats', 'routes', 'denials']),
  thresholds: new Set(['elevated', 'suspicious', 'blocked']),
  limit_percent: new Set(['elevated', 'suspicious']),
};

const DEFAULTS = {
  windowSeconds: 10,
  weights: { requests: 1, repeats: 2, routes: 4, denials: 5 },
  thresholds: { elevated: 50, suspicious: 100, blocked: 200 },
  limitPercent: { elevated: 50, suspicious: 10 },
  blockedSeconds: 300,
  quietSeconds: 60,
};

/** The first unknown key of a `policy` block, in the rule-file error style; undefined when fine. */
export function policyKeyProblem(node: YNode): string | undefined {
  if (node.kind !== 'map') return undefined; // the type error is reported by decoding
  for (const { key, value } of node.entries) {
    const name = goText(key);
    if (!POLICY_KEYS.has(name)) return `config error, unknown policy key '${excerpt(name)}'`;
    const nested = NESTED_KEYS[name];
    if (nested === undefined || value.kind !== 'map') continue;
    for (const inner of value.entries) {
      const innerName = goText(inner.key);
      if (!nested.has(innerName)) return `config error, unknown policy key '${excerpt(`${name}.${innerName}`)}'`;
    }
  }
  return undefined;
}

/** The `policy` block as read, before its values are checked. */
export interface RawPolicy {
  readonly client: string;
  readonly route: string;
  readonly fingerprint: string;
  readonly windowSeconds?: number;
  readonly weights: Partial<Record<'requests' | 'repeats' | 'routes' | 'denials', number>>;
  readonly thresholds: Partial<Record<'elevated' | 'suspicious' | 'blocked', number>>;
  readonly limitPercent: Partial<Record<'elevated' | 'suspicious', number>>;
  readonly blockedSeconds?: number;
  readonly quietSeconds?: number;
  readonly shadowMode: boolean;
}

function uintFields<K extends string>(map: YMap | undefined, names: readonly K[], d: DecodeYamlFields): Partial<Record<K, number>> {
  const out: Partial<Record<K, number>> = {};
  if (map === undefined) return out;
  const f = d.fields(map);
  for (const name of names) {
    const v = d.uint32(f.get(name));
    if (v !== undefined) out[name] = v;
  }
  return out;
}

/** Typed decoding; wrong types are collected by `d` like every other field's. */
export function decodePolicy(map: YMap, d: DecodeYamlFields): RawPolicy {
  const f = d.fields(map);
  return {
    client: d.string(f.get('client')),
    route: d.string(f.get('route')),
    fingerprint: d.string(f.get('fingerprint')),
    windowSeconds: d.uint32(f.get('window_seconds')),
    weights: uintFields(d.map(f.get('weights'), 'policy.weights'), ['requests', 'repeats', 'routes', 'denials'], d),
    thresholds: uintFields(d.map(f.get('thresholds'), 'policy.thresholds'), ['elevated', 'suspicious', 'blocked'], d),
    limitPercent: uintFields(d.map(f.get('limit_percent'), 'policy.limit_percent'), ['elevated', 'suspicious'], d),
    blockedSeconds: d.uint32(f.get('blocked_seconds')),
    quietSeconds: d.uint32(f.get('quiet_seconds')),
    shadowMode: d.bool(f.get('shadow_mode')),
  };
}

function positive(name: string, value: number | undefined, fallback: number, fail: (m: string) => never): number {
  if (value === undefined) return fallback;
  if (value <= 0) fail(`invalid policy ${name} '${value}': must be a positive integer`);
  return value;
}

/** Checks the values of a decoded `policy` block and fills in the defaults. */
export function buildPolicy(domain: string, raw: RawPolicy, fail: (message: string) => never): PolicyConfig {
  if (raw.client === '') fail('policy needs a client: the descriptor key that identifies the client');
  const thresholds = { ...DEFAULTS.thresholds, ...raw.thresholds };
  if (!(thresholds.elevated >= 1 && thresholds.elevated < thresholds.suspicious && thresholds.suspicious < thresholds.blocked)) {
    fail(
      `invalid policy thresholds: need 1 <= elevated < suspicious < blocked, got ${thresholds.elevated}, ${thresholds.suspicious}, ${thresholds.blocked}`,
    );
  }
  const limitPercent = { ...DEFAULTS.limitPercent, ...raw.limitPercent };
  if (limitPercent.elevated > 100 || limitPercent.suspicious > limitPercent.elevated) {
    fail(`invalid policy limit_percent: need 100 >= elevated >= suspicious, got ${limitPercent.elevated}, ${limitPercent.suspicious}`);
  }
  for (const [name, key] of [
    ['route', raw.route],
    ['fingerprint', raw.fingerprint],
  ] as const) {
    if (key !== '' && key === raw.client) fail(`policy ${name} '${excerpt(key)}' is the client key`);
  }
  return {
    domain,
    client: raw.client,
    ...(raw.route !== '' && { route: raw.route }),
    ...(raw.fingerprint !== '' && { fingerprint: raw.fingerprint }),
    windowSeconds: positive('window_seconds', raw.windowSeconds, DEFAULTS.windowSeconds, fail),
    weights: { ...DEFAULTS.weights, ...raw.weights },
    thresholds,
    limitPercent,
    blockedSeconds: positive('blocked_seconds', raw.blockedSeconds, DEFAULTS.blockedSeconds, fail),
    quietSeconds: positive('quiet_seconds', raw.quietSeconds, DEFAULTS.quietSeconds, fail),
    shadowMode: raw.shadowMode,
  };
}
