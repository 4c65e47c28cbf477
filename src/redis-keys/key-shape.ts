import type { Algorithm } from '../domain/algorithm';

/** The Redis type each algorithm's script stores its counter in. */
const TYPE_OF: Readonly<Record<Algorithm, string>> = {
  fixed_window: 'string',
  gcra: 'string',
  sliding_window: 'hash',
  token_bucket: 'hash',
  sliding_log: 'zset',
};

/** What a key written by floodgate says about itself: a counter, or one of a client's policy keys. */
export type CounterKeyShape = AlgorithmKeyShape | PolicyKeyShape;

export interface AlgorithmKeyShape {
  readonly algorithm: Algorithm;
  readonly windowSeconds: number;
}

/** `<prefix>rl:{<domain>:<clientKey>=<client>}:policy:<part>` (limiter/counter-key.ts policyKeys). */
export interface PolicyKeyShape {
  readonly policyPart: 'state' | 'routes' | 'prints';
}

/** The Redis type lua/policy.lua keeps each policy key in. */
const POLICY_TYPE_OF: Readonly<Record<PolicyKeyShape['policyPart'], string>> = { state: 'hash', routes: 'set', prints: 'set' };

// One request part as limiter/counter-key.ts escapeKeyPart writes it: `%`, `{`, `}`, `:` and `=`
// appear only as their escapes, a lone surrogate as `%uD800`...`%uDFFF`. The alternatives start
// with different characters, so matching stays linear in the key's length.
const PART = String.raw`(?:[^%{}:=]|%(?:25|7B|7D|3A|3D|uD[89A-F][0-9A-F]{2}))`;
// The hash tag: `{<domain>(:<key>=<value>)*}` (counterIdentity), or one client for a policy key.
const COUNTER_TAG = String.raw`\{${PART}+(?::${PART}*=${PART}*)*\}`;
const POLICY_TAG = String.raw`\{${PART}+:${PART}*=${PART}*\}`;
const POLICY_SHAPE = new RegExp(String.raw`^rl:${POLICY_TAG}:policy:(state|routes|prints)$`);
// `<prefix>rl:{<tag>}:<algorithm>:<windowSeconds>` (see limiter/counter-key.ts): the whole key, so
// `rl:session:alice` or `rl:{session:alice}:fixed_window:60` (no `=`) of another application
// sharing the `rl:` namespace (CACHE_KEY_PREFIX is empty by default) is never taken for ours.
// A fixed window keeps one key per window, the counter's name plus `:<window start, epoch s>`
// (lua/lib/fixed_window_step.lua, issue 20); the counter's own name without it is where an older
// floodgate kept it, which a rolling upgrade may leave behind: both are ours. No other algorithm's
// key takes that suffix (checked in counterKeyShape).
const SHAPE = new RegExp(String.raw`^rl:${COUNTER_TAG}:(fixed_window|gcra|sliding_window|token_bucket|sliding_log):([1-9]\d{0,9})(:\d{1,12})?$`);

/** The pattern SCAN matches for every key floodgate may write under `prefix`. */
export function counterKeyPattern(prefix: string): string {
  return prefix.replace(/[*?[\]\\]/g, '\\$&') + 'rl:*';
}

/**
 * The shape of `key` when it is one floodgate writes under `prefix` and holds the Redis type
 * its algorithm uses; undefined otherwise ("unknown shape").
 */
export function counterKeyShape(prefix: string, key: string, redisType: string): CounterKeyShape | undefined {
  if (!key.startsWith(prefix)) return undefined;
  const rest = key.slice(prefix.length);
  const policy = POLICY_SHAPE.exec(rest);
  if (policy !== null) {
    const policyPart = policy[1] as PolicyKeyShape['policyPart'];
    return POLICY_TYPE_OF[policyPart] === redisType ? { policyPart } : undefined;
  }
  const m = SHAPE.exec(rest);
  if (m === null) return undefined;
  const algorithm = m[1] as Algorithm;
  if (m[3] !== undefined && algorithm !== 'fixed_window') return undefined;
  if (TYPE_OF[algorithm] !== redisType) return undefined;
  return { algorithm, windowSeconds: Number(m[2]) };
}

/**
 * The TTL `--fix` gives a counter without one: two of its windows cover every algorithm's
 * state (sliding_window reads the previous window), after which the counter starts afresh.
 * A policy key's lifetime comes from its domain's policy, which the key does not name:
 * undefined, and the caller uses its TTL for keys of unknown shape.
 */
export function repairTtlSeconds(shape: CounterKeyShape): number | undefined {
  return 'windowSeconds' in shape ? shape.windowSeconds * 2 : undefined;
}

/**
 * A key of the reference's layout (limiter/reference-key.ts, REDIS_KEY_LAYOUT=reference or the
 * reference itself): `<prefix><domain>_(<key>_<value>_)+<window start, epoch s>`, a plain count.
 * The unit is not in the key; the longest of the reference's units its window start is a
 * multiple of bounds it (a window of an hour starts on a whole hour, maybe a whole day).
 */
export interface ReferenceKeyShape {
  readonly windowStart: number;
  readonly longestWindowSeconds: number;
}

/**
 * What tells a reference counter from another application's key under the same prefix (with the
 * default empty CACHE_KEY_PREFIX, the whole database): the domains of the loaded rules, each with
 * the windows (seconds) of its rules the reference can express; an empty list: any of the
 * reference's units (a domain named by `floodgate keys --domain`).
 */
export type ReferenceDomains = ReadonlyMap<string, readonly number[]>;

// After `<domain>_`: at least one entry (Envoy sends none without), then the window start.
// Nothing is escaped in these keys: any character may sit between the underscores.
const REFERENCE_REST = /^[^]*_[^]*_(\d{1,12})$/;
/** The reference's units, longest first (src/utils/utilities.go UnitToDivider). */
const REFERENCE_UNITS_DESC = [31_536_000, 2_592_000, 604_800, 86_400, 3600, 60, 1] as const;
/** A window start this far ahead of our clock is still taken for one (clock offsets between hosts). */
const FUTURE_SKEW_SECONDS = 60;

/**
 * The reference's key shape of `key`, a string under `prefix`; undefined otherwise. A key is the
 * reference's only when its domain is one of `domains` and its window start could be a window of
 * that domain's units that is in progress or ended within the longest of them (a year): not in
 * the future, not older. `orders_2024_11_30` of another application is never one.
 */
export function referenceKeyShape(
  prefix: string,
  key: string,
  redisType: string,
  domains: ReferenceDomains,
  nowMs: number,
): ReferenceKeyShape | undefined {
  if (redisType !== 'string' || !key.startsWith(prefix)) return undefined;
  const rest = key.slice(prefix.length);
  for (const [domain, windows] of domains) {
    if (!rest.startsWith(domain + '_')) continue;
    const m = REFERENCE_REST.exec(rest.slice(domain.length + 1));
    if (m === null) continue;
    const windowStart = Number(m[1]);
    if (!plausibleStart(windowStart, windows, nowMs)) continue;
    const longestWindowSeconds = REFERENCE_UNITS_DESC.find((u) => windowStart % u === 0) ?? 1;
    return { windowStart, longestWindowSeconds };
  }
  return undefined;
}

/**
 * A window start aligned to one of `windows` (any reference unit when empty), not ahead of now
 * and at most a year old: a counter the reference left without a TTL (its EXPIRE lost) stays
 * visible for a year, and an arbitrary number at the end of another application's key rarely
 * passes both tests.
 */
function plausibleStart(windowStart: number, windows: readonly number[], nowMs: number): boolean {
  const nowS = Math.floor(nowMs / 1000);
  if (windowStart > nowS + FUTURE_SKEW_SECONDS || nowS - windowStart > REFERENCE_UNITS_DESC[0]) return false;
  const units = windows.length > 0 ? windows : REFERENCE_UNITS_DESC;
  return units.some((w) => windowStart % w === 0);
}

/** Each domain of `rules` with the windows of its rules the reference can express (REDIS_KEY_LAYOUT=reference). */
export function referenceDomainsOf(
  rulesByDomain: ReadonlyMap<string, readonly { readonly shareable?: true; readonly windowSeconds: number }[]>,
): ReferenceDomains {
  const domains = new Map<string, number[]>();
  for (const [domain, rules] of rulesByDomain) {
    const windows = [...new Set(rules.filter((r) => r.shareable === true).map((r) => r.windowSeconds))];
    if (windows.length > 0) domains.set(domain, windows);
  }
  return domains;
}

/**
 * The TTL `--fix` gives a reference key without one: until one window of its longest possible
 * unit after that window ends (the reference's own EXPIRE is one unit from the first hit), at
 * least 1 s (a window long past goes at once).
 */
export function repairReferenceTtlSeconds(shape: ReferenceKeyShape, nowMs: number): number {
  const end = shape.windowStart + 2 * shape.longestWindowSeconds;
  return Math.max(1, end - Math.floor(nowMs / 1000));
}
