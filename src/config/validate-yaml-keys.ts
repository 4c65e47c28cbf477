import { excerpt } from './quote-excerpt';
import { policyKeyProblem } from './parse-policy-block';
import { goText, type YMap, type YNode } from './yaml-tree';

/**
 * Keys of the reference's rule files. Like the reference, the check is flat: a known key is
 * accepted at any level (and ignored where it means nothing), so every file the reference
 * loads, we load too.
 */
const REFERENCE_KEYS: ReadonlySet<string> = new Set([
  'domain',
  'key',
  'value',
  'descriptors',
  'rate_limit',
  'unit',
  'requests_per_unit',
  'unlimited',
  'shadow_mode',
  'quota_mode',
  'name',
  'replaces',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'metadata',
]);

/** Our extensions; being new, they are accepted only where they mean something: in a limit. */
const RATE_LIMIT_EXTENSION_KEYS: ReadonlySet<string> = new Set(['algorithm', 'unit_multiplier', 'burst']);

/** Ours: a descriptor's list of limits; each entry is a `rate_limit` (issue 21). */
const RATE_LIMITS_KEY = 'rate_limits';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * Checks every key of the document before any field is read, in the reference's words.
 * Returns the first problem's message, or undefined when the keys are fine.
 */
export function validateYamlKeys(root: YMap): string | undefined {
  return checkMap(root, false, true);
}

function checkMap(map: YMap, inRateLimit: boolean, isRoot = false): string | undefined {
  for (const { key, value } of map.entries) {
    if (key.kind !== 'scalar' || key.type !== 'str') {
      return `config error, key is not of type string: ${excerpt(goText(key))}`;
    }
    const name = key.text;
    // Our `policy` block belongs to the file's domain, so it is accepted at the top only.
    if (isRoot && name === 'policy') {
      const problem = policyKeyProblem(value);
      if (problem !== undefined) return problem;
      continue;
    }
    if (!REFERENCE_KEYS.has(name) && name !== RATE_LIMITS_KEY && !(inRateLimit && RATE_LIMIT_EXTENSION_KEYS.has(name))) {
      return `config error, unknown key '${excerpt(name)}'`;
    }
    // metadata is free-form by design: its keys are the user's, not ours.
    if (name === 'metadata') continue;
    const problem = checkValue(value, name === 'rate_limit', name === RATE_LIMITS_KEY);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function checkValue(value: YNode, isRateLimit: boolean, isLimitList: boolean): string | undefined {
  if (value.kind === 'map') return checkMap(value, isRateLimit);
  if (value.kind === 'seq') return checkList(value.items, isLimitList);
  // The reference's generic decode accepts strings, ints, bools and null as leaves; a float
  // (or an integer beyond int64) is none of those and fails with this terse message.
  if (value.type === 'float') return 'error checking config';
  if (value.type === 'int') {
    const n = value.value as bigint;
    if (n < INT64_MIN || n > INT64_MAX) return 'error checking config';
  }
  return undefined;
}

/** `limits`: the items are limits (of `rate_limits`), where the extension keys are accepted. */
function checkList(items: readonly YNode[], limits: boolean): string | undefined {
  for (const item of items) {
    if (item.kind !== 'map') {
      return `config error, yaml file contains list of type other than map: ${excerpt(goText(item))}`;
    }
    const problem = checkMap(item, limits);
    if (problem !== undefined) return problem;
  }
  return undefined;
}
