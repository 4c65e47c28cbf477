import { excerpt } from './quote-excerpt';
import { ConfigError } from '../errors';
import { parseAlgorithm, type Algorithm } from '../domain/algorithm';
import { keyValue } from '../domain/descriptor';
import { parseUnit, type Unit } from '../domain/units';
import { exactBoundsProblem } from './check-exact-bounds';
import type { PolicyConfig } from '../domain/policy-config';
import { DecodeYamlFields } from './decode-yaml-fields';
import { buildPolicy, decodePolicy, type RawPolicy } from './parse-policy-block';
import { validateYamlKeys } from './validate-yaml-keys';
import { goText, yamlTree, YamlSyntaxError, type YMap, type YNode } from './yaml-tree';

/** One `rate_limit` block, validated. */
export interface RateLimitConfig {
  readonly requestsPerUnit: number;
  /** Absent only when `unlimited`. */
  readonly unit?: Unit;
  readonly unlimited: boolean;
  readonly name?: string;
  readonly replaces: readonly string[];
  readonly algorithm: Algorithm;
  readonly unitMultiplier: number;
  readonly burst: number;
}

/** One descriptor of a rule file, validated; `value` '' means any value of `key`. */
export interface DescriptorConfig {
  readonly key: string;
  readonly value: string;
  readonly rateLimit?: RateLimitConfig;
  readonly descriptors: readonly DescriptorConfig[];
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly detailedMetric: boolean;
  readonly valueToMetric: boolean;
  readonly shareThreshold: boolean;
  readonly metadata?: Readonly<Record<string, unknown>>;
}

/** One rule file, validated. */
export interface DomainConfig {
  readonly fileName: string;
  readonly domain: string;
  readonly descriptors: readonly DescriptorConfig[];
  /** Ours: the domain's adaptive policy, when the file has a `policy` block. */
  readonly policy?: PolicyConfig;
}

/**
 * Far above any real rule file (a few KiB; 512 KiB holds some 10,000 descriptors), low enough
 * that parsing one, synchronously on the event loop, cannot stall it for long.
 */
export const MAX_RULE_FILE_BYTES = 512 * 1024;

/**
 * Parses and validates one rule file. Throws ConfigError `<fileName>: <message>` with the
 * reference's messages, checked in the reference's order: YAML syntax, keys, field types,
 * then the rules themselves in file order.
 */
export function parseRuleFile(fileName: string, text: string): DomainConfig {
  const fail = (message: string): never => {
    throw new ConfigError(`${fileName}: ${message}`);
  };
  // Parsing is synchronous on the event loop; a bound on the input bounds the stall.
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_RULE_FILE_BYTES) fail(`error loading config file: ${bytes} bytes, more than the limit of ${MAX_RULE_FILE_BYTES}`);
  const root = readRoot(text, fail);
  const keyProblem = validateYamlKeys(root);
  if (keyProblem !== undefined) fail(keyProblem);

  const decoder = new DecodeYamlFields();
  const raw = decodeRoot(root, decoder);
  const typeProblem = decoder.message();
  if (typeProblem !== undefined) fail(`error loading config file: ${typeProblem}`);

  if (raw.domain === '') fail('config file cannot have empty domain');
  const descriptors = buildLevel(raw.descriptors, `${raw.domain}.`, fail);
  const policy = raw.policy && buildPolicy(raw.domain, raw.policy, fail);
  return deepFreeze({ fileName, domain: raw.domain, descriptors, ...(policy && { policy }) });
}

function readRoot(text: string, fail: (message: string) => never): YMap {
  let tree: YNode | null;
  try {
    tree = yamlTree(text);
  } catch (err) {
    if (err instanceof YamlSyntaxError) fail(`error loading config file: ${err.message}`);
    throw err;
  }
  // An empty document is an empty map, which then has no domain (as in the reference).
  if (tree === null) return { kind: 'map', line: 1, entries: [] };
  if (tree.kind !== 'map') {
    const decoder = new DecodeYamlFields();
    decoder.map(tree, 'map[interface {}]interface {}');
    fail(`error loading config file: ${decoder.message() ?? ''}`);
  }
  return tree;
}

// ---- typed decoding: every wrong type is collected before any rule is checked ----

interface RawRoot {
  readonly domain: string;
  readonly descriptors: readonly RawDescriptor[];
  readonly policy?: RawPolicy;
}

interface RawDescriptor {
  readonly key: string;
  readonly value: string;
  readonly rateLimit?: RawRateLimit;
  readonly descriptors: readonly RawDescriptor[];
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly detailedMetric: boolean;
  readonly valueToMetric: boolean;
  readonly shareThreshold: boolean;
  readonly metadata?: YMap;
}

interface RawRateLimit {
  readonly requestsPerUnit?: number;
  readonly unit: string;
  readonly unlimited: boolean;
  readonly name: string;
  readonly replaces: readonly string[];
  readonly algorithm: string;
  readonly unitMultiplier?: number;
  readonly burst?: number;
}

// Type names as the reference's error messages print them.
const DESCRIPTORS_TYPE = '[]config.YamlDescriptor';

function decodeRoot(root: YMap, d: DecodeYamlFields): RawRoot {
  const f = d.fields(root);
  const policy = d.map(f.get('policy'), 'policy');
  return {
    domain: d.string(f.get('domain')),
    descriptors: decodeDescriptors(f.get('descriptors'), d),
    ...(policy && { policy: decodePolicy(policy, d) }),
  };
}

function decodeDescriptors(node: YNode | undefined, d: DecodeYamlFields): RawDescriptor[] {
  // Key validation already rejected list elements that are not maps.
  return d.list(node, DESCRIPTORS_TYPE).map((item) => decodeDescriptor(item as YMap, d));
}

function decodeDescriptor(map: YMap, d: DecodeYamlFields): RawDescriptor {
  const f = d.fields(map);
  const rateLimit = d.map(f.get('rate_limit'), 'config.YamlRateLimit');
  return {
    key: d.string(f.get('key')),
    value: d.string(f.get('value')),
    rateLimit: rateLimit && decodeRateLimit(rateLimit, d),
    descriptors: decodeDescriptors(f.get('descriptors'), d),
    shadowMode: d.bool(f.get('shadow_mode')),
    quotaMode: d.bool(f.get('quota_mode')),
    detailedMetric: d.bool(f.get('detailed_metric')),
    valueToMetric: d.bool(f.get('value_to_metric')),
    shareThreshold: d.bool(f.get('share_threshold')),
    metadata: d.map(f.get('metadata'), 'map[string]interface {}'),
  };
}

function decodeRateLimit(map: YMap, d: DecodeYamlFields): RawRateLimit {
  const f = d.fields(map);
  const replaces = d.list(f.get('replaces'), '[]config.yamlReplaces');
  return {
    requestsPerUnit: d.uint32(f.get('requests_per_unit')),
    unit: d.string(f.get('unit')),
    unlimited: d.bool(f.get('unlimited')),
    name: d.string(f.get('name')),
    replaces: replaces.map((entry) => d.string(d.fields(entry as YMap).get('name'))),
    algorithm: d.string(f.get('algorithm')),
    unitMultiplier: d.uint32(f.get('unit_multiplier')),
    burst: d.uint32(f.get('burst')),
  };
}

// ---- rule checks, in file order ----

type Fail = (message: string) => never;

function buildLevel(raws: readonly RawDescriptor[], parentPath: string, fail: Fail): DescriptorConfig[] {
  // The reference keys each level by `key` or `key_value`; two descriptors with the same
  // composite key cannot both be reached, so the file is rejected.
  const seen = new Set<string>();
  return raws.map((raw) => {
    if (raw.key === '') fail('descriptor has empty key');
    const compositeKey = keyValue(raw);
    const path = parentPath + compositeKey;
    if (seen.has(compositeKey)) fail(`duplicate descriptor composite key '${excerpt(path)}'`);
    seen.add(compositeKey);
    return buildDescriptor(raw, compositeKey, path, fail);
  });
}

function buildDescriptor(raw: RawDescriptor, compositeKey: string, path: string, fail: Fail): DescriptorConfig {
  const rateLimit = raw.rateLimit && buildRateLimit(raw.rateLimit, fail);
  const outOfBounds = rateLimit && exactBoundsProblem(path, rateLimit);
  if (outOfBounds !== undefined) fail(outOfBounds);
  if (raw.shareThreshold && !raw.value.includes('*')) {
    fail(`share_threshold can only be used with wildcard values (containing '*'), but found key '${excerpt(compositeKey)}'`);
  }
  return {
    key: raw.key,
    value: raw.value,
    ...(rateLimit && { rateLimit }),
    descriptors: buildLevel(raw.descriptors, `${path}.`, fail),
    shadowMode: raw.shadowMode,
    quotaMode: raw.quotaMode,
    detailedMetric: raw.detailedMetric,
    valueToMetric: raw.valueToMetric,
    shareThreshold: raw.shareThreshold,
    ...(raw.metadata && { metadata: metadataToPlain(raw.metadata) }),
  };
}

function buildRateLimit(raw: RawRateLimit, fail: Fail): RateLimitConfig {
  const unit = checkUnit(raw, fail);
  for (const name of raw.replaces) {
    if (name === '') fail('should not have an empty replaces entry');
    if (name === raw.name) fail('replaces should not contain name of same descriptor');
  }
  const requestsPerUnit = raw.requestsPerUnit ?? 0;
  return {
    requestsPerUnit,
    ...(unit && { unit }),
    unlimited: raw.unlimited,
    ...(raw.name !== '' && { name: raw.name }),
    replaces: raw.replaces,
    algorithm: checkAlgorithm(raw.algorithm, fail),
    unitMultiplier: checkPositive('unit_multiplier', raw.unitMultiplier, 1, fail),
    burst: checkPositive('burst', raw.burst, requestsPerUnit, fail),
  };
}

function checkUnit(raw: RawRateLimit, fail: Fail): Unit | undefined {
  const unit = parseUnit(raw.unit);
  if (raw.unlimited) {
    // Like the reference: an unlimited rule may not name a valid unit; anything else is ignored.
    if (unit !== undefined) fail('should not specify rate limit unit when unlimited');
    return undefined;
  }
  if (unit === undefined) fail(`invalid rate limit unit '${excerpt(raw.unit)}'`);
  return unit;
}

function checkAlgorithm(name: string, fail: Fail): Algorithm {
  if (name === '') return 'fixed_window';
  const algorithm = parseAlgorithm(name);
  if (algorithm === undefined) fail(`invalid rate limit algorithm '${excerpt(name)}'`);
  return algorithm;
}

function checkPositive(field: string, value: number | undefined, fallback: number, fail: Fail): number {
  if (value === undefined) return fallback;
  if (value <= 0) fail(`invalid rate limit ${field} '${value}': must be a positive integer`);
  return value;
}

/**
 * A rule's `metadata` as plain JSON-like values, keyed as the reference keys it: its top level
 * is a Go map[string]interface{}, filled with each key as written (`yes`, `0x10` and `010` stay
 * text; a null key is ''), while nested maps are map[interface{}]interface{}, whose keys are
 * YAML 1.1 values printed with %v (`yes` is "true", `0x10` is "16").
 */
function metadataToPlain(map: YMap): Record<string, unknown> {
  return plainMap(map, keyAsWritten);
}

function keyAsWritten(key: YNode): string {
  if (key.kind !== 'scalar') return goText(key);
  return key.type === 'null' ? '' : key.text;
}

/** Converts free-form YAML (nested metadata) to plain JSON-like values. */
function toPlain(node: YNode): unknown {
  if (node.kind === 'seq') return node.items.map(toPlain);
  if (node.kind === 'map') return plainMap(node, goText);
  if (node.type === 'int') {
    const n = node.value as bigint;
    // Metadata travels as JSON/protobuf Struct (doubles); beyond 2^53 keep the digits as text.
    return Number.isSafeInteger(Number(n)) ? Number(n) : node.text;
  }
  return node.value;
}

function plainMap(map: YMap, keyText: (key: YNode) => string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of map.entries) {
    // defineProperty, not assignment: a user key named `__proto__` must stay plain data. Two
    // keys with one text (`yes` and `on` nested): the later wins, as in the reference.
    Object.defineProperty(out, keyText(key), { value: toPlain(value), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}
