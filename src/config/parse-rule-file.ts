import { ConfigError } from '../base/errors';
import { checkRules, deepFreeze, type DomainConfig, type RawDescriptor, type RawRateLimit } from './check-rules';
import { DecodeYamlFields } from './decode-yaml-fields';
import { buildPolicy, decodePolicy, type RawPolicy } from './parse-policy-block';
import { validateYamlKeys } from './validate-yaml-keys';
import { goText, yamlTree, YamlSyntaxError, type YMap, type YNode } from './yaml-tree';

export type { DescriptorConfig, DomainConfig, RateLimitConfig } from './check-rules';

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

  const descriptors = checkRules(raw, fail);
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

// Type names as the reference's error messages print them.
const DESCRIPTORS_TYPE = '[]config.YamlDescriptor';
const RATE_LIMITS_TYPE = '[]config.YamlRateLimit';

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
  const metadata = d.map(f.get('metadata'), 'map[string]interface {}');
  return {
    key: d.string(f.get('key')),
    value: d.string(f.get('value')),
    rateLimit: rateLimit && decodeRateLimit(rateLimit, d),
    // Present (even null or empty, which checkRules refuses) whenever the file has the key.
    ...(f.has('rate_limits') && { rateLimits: d.list(f.get('rate_limits'), RATE_LIMITS_TYPE).map((item) => decodeRateLimit(item as YMap, d)) }),
    descriptors: decodeDescriptors(f.get('descriptors'), d),
    shadowMode: d.bool(f.get('shadow_mode')),
    quotaMode: d.bool(f.get('quota_mode')),
    detailedMetric: d.bool(f.get('detailed_metric')),
    valueToMetric: d.bool(f.get('value_to_metric')),
    shareThreshold: d.bool(f.get('share_threshold')),
    ...(metadata && { metadata: metadataToPlain(metadata) }),
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
  if (node.type === 'int') return metadataInteger(node.value as bigint, node.text);
  return node.value;
}

const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;

/**
 * A YAML integer as the reference's metadata carries it: Go's YAML reader makes it an int64 or a
 * uint64, past those a float64 read from its decimal digits, and the Struct holds each as a
 * double (rounded past 2^53, as the reference sends it). Only what no float reading takes (a huge
 * hex, octal-prefixed or binary literal, or digits past the double range) stays text, as Go's
 * reader leaves it a string.
 */
function metadataInteger(n: bigint, text: string): number | string {
  if (n >= INT64_MIN && n <= UINT64_MAX) return Number(n);
  const digits = text.replace(/_/g, '');
  const asDouble = Number(digits);
  return /^[-+]?[0-9]+$/.test(digits) && Number.isFinite(asDouble) ? asDouble : text;
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
