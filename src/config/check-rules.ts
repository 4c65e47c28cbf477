import { excerpt } from './quote-excerpt';
import { parseAlgorithm, type Algorithm } from '../domain/algorithm';
import { keyValue } from '../domain/descriptor';
import type { PolicyConfig } from '../domain/policy-config';
import { parseUnit, UNIT_SECONDS, type Unit } from '../domain/units';
import { exactBoundsProblem } from './check-exact-bounds';

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

/** What a descriptor says besides its limits and children, the same before and after checking. */
interface DescriptorFields {
  readonly key: string;
  readonly value: string;
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly detailedMetric: boolean;
  readonly valueToMetric: boolean;
  readonly shareThreshold: boolean;
  /** Plain JSON-like data, as the source means it (each source converts its own form). */
  readonly metadata?: Readonly<Record<string, unknown>>;
}

/** One descriptor of a rule file, validated; `value` '' means any value of `key`. */
export interface DescriptorConfig extends DescriptorFields {
  /** The descriptor's limit; with `rateLimits`, the first of them. */
  readonly rateLimit?: RateLimitConfig;
  /** Ours (issue 21): two or more limits decided together; a one-entry list is a plain `rateLimit`. */
  readonly rateLimits?: readonly RateLimitConfig[];
  readonly descriptors: readonly DescriptorConfig[];
}

/** One rule file, validated. */
export interface DomainConfig {
  readonly fileName: string;
  readonly domain: string;
  readonly descriptors: readonly DescriptorConfig[];
  /** Ours: the domain's adaptive policy, when the file has a `policy` block. */
  readonly policy?: PolicyConfig;
}

/** One descriptor as its source gave it, fields typed but not yet checked. */
export interface RawDescriptor extends DescriptorFields {
  readonly rateLimit?: RawRateLimit;
  /** `rate_limits` as given (empty when the file's list is empty or null); absent without the key. */
  readonly rateLimits?: readonly RawRateLimit[];
  readonly descriptors: readonly RawDescriptor[];
}

export interface RawRateLimit {
  readonly requestsPerUnit?: number;
  readonly unit: string;
  readonly unlimited: boolean;
  readonly name: string;
  readonly replaces: readonly string[];
  readonly algorithm: string;
  readonly unitMultiplier?: number;
  readonly burst?: number;
}

export type Fail = (message: string) => never;

/**
 * The reference's checks of one rule file's rules, in file order, with its messages: a rule
 * file and an xDS RateLimitConfig resource both come here once their fields are typed, so the
 * two give the same rules and the same errors. `fail` throws with the source's name.
 */
export function checkRules(raw: { readonly domain: string; readonly descriptors: readonly RawDescriptor[] }, fail: Fail): DescriptorConfig[] {
  if (raw.domain === '') fail('config file cannot have empty domain');
  return buildLevel(raw.descriptors, `${raw.domain}.`, fail);
}

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
  const limits = raw.rateLimits && buildLimitList(raw, path, fail);
  const rateLimit = limits?.[0] ?? (raw.rateLimit && checkedLimit(raw.rateLimit, path, fail));
  if (raw.shareThreshold && !raw.value.includes('*')) {
    fail(`share_threshold can only be used with wildcard values (containing '*'), but found key '${excerpt(compositeKey)}'`);
  }
  return {
    key: raw.key,
    value: raw.value,
    ...(rateLimit && { rateLimit }),
    ...(limits !== undefined && limits.length > 1 && { rateLimits: limits }),
    descriptors: buildLevel(raw.descriptors, `${path}.`, fail),
    shadowMode: raw.shadowMode,
    quotaMode: raw.quotaMode,
    detailedMetric: raw.detailedMetric,
    valueToMetric: raw.valueToMetric,
    shareThreshold: raw.shareThreshold,
    ...(raw.metadata && { metadata: raw.metadata }),
  };
}

/** One limit, checked, within the exact bounds. */
function checkedLimit(raw: RawRateLimit, path: string, fail: Fail): RateLimitConfig {
  const limit = buildRateLimit(raw, fail);
  const outOfBounds = exactBoundsProblem(path, limit);
  if (outOfBounds !== undefined) fail(outOfBounds);
  return limit;
}

/**
 * The most limits one `rate_limits` list may hold (issue 26): each is a counter that every
 * matching descriptor counts, so a long list multiplies what one request makes Redis do (a
 * 2,000-limit list took a server to 1.09 GB). Distinct counters need distinct windows or
 * algorithms; a real list has a handful (a second, a minute, a day, a burst).
 */
export const MAX_LIMITS_PER_LIST = 16;

/**
 * `rate_limits` (ours, issue 21): one or more limits, each a `rate_limit`, never beside one.
 * Each limit needs a counter of its own (algorithm and window are the counter's identity, see
 * counter-key.ts) and a name of its own (metrics and headers tell the limits apart by it).
 */
function buildLimitList(raw: RawDescriptor, path: string, fail: Fail): RateLimitConfig[] {
  const raws = raw.rateLimits ?? [];
  if (raw.rateLimit !== undefined) fail(`descriptor '${path}' has both rate_limit and rate_limits: give one of them`);
  if (raws.length === 0) fail(`descriptor '${path}' has an empty rate_limits list: give at least one limit`);
  if (raws.length > MAX_LIMITS_PER_LIST) {
    fail(`descriptor '${path}' has ${raws.length} limits in its rate_limits list, more than the limit of ${MAX_LIMITS_PER_LIST}`);
  }
  // The list's names are the descriptor's: none of its entries may replace another.
  const names = new Set(raws.map((entry) => entry.name).filter((name) => name !== ''));
  const limits = raws.map((entry, i) => {
    const failEntry: Fail = (message) => fail(`rate_limits entry ${i + 1} of '${path}': ${message}`);
    if (entry.unlimited) failEntry('an unlimited limit cannot be in a rate_limits list');
    const limit = checkedLimit(entry, path, failEntry);
    if (entry.replaces.some((name) => names.has(name))) failEntry('replaces should not contain name of same descriptor');
    return limit;
  });
  limits.forEach((limit, j) => {
    for (let i = 0; i < j; i++) {
      const other = limits[i] as RateLimitConfig;
      const entries = `rate_limits entries ${i + 1} and ${j + 1} of '${path}'`;
      if (limit.name !== undefined && limit.name === other.name) fail(`${entries} have the same name '${limit.name}'`);
      const seconds = windowOf(limit);
      if (limit.algorithm === other.algorithm && seconds === windowOf(other)) {
        fail(`${entries} count one counter (${limit.algorithm} over ${seconds} s): give one another unit, unit_multiplier or algorithm`);
      }
    }
  });
  return limits;
}

/** A limit's window in seconds (no list holds an unlimited limit). */
function windowOf(limit: RateLimitConfig): number {
  return limit.unit === undefined ? 0 : UNIT_SECONDS[limit.unit] * limit.unitMultiplier;
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

/** Freezes a validated config and everything in it. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}
