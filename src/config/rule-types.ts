import type { Algorithm } from '../domain/algorithm';
import type { DescriptorEntry } from '../domain/descriptor';
import type { Unit } from '../domain/units';
import type { PolicyConfig } from '../domain/policy-config';

/** One `rate_limit` block of a rule file, validated and frozen. */
export interface RateLimitRule {
  /** The rule's path as the reference prints it: `domain.key_value.key2` (value omitted when empty). */
  readonly fullKey: string;
  /** `rate_limit.name`; the target of other rules' `replaces`. */
  readonly name?: string;
  readonly requestsPerUnit: number;
  /** Absent only for `unlimited` rules without a unit. */
  readonly unit?: Unit;
  readonly unlimited: boolean;
  readonly algorithm: Algorithm;
  /** Unit seconds × `unit_multiplier` (default 1). */
  readonly windowSeconds: number;
  /** token_bucket / gcra capacity; defaults to requestsPerUnit. */
  readonly burst: number;
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  /** Names of rules this one removes from the request. */
  readonly replaces: readonly string[];
  /**
   * Set on each limit of a `rate_limits` list only: the limit's name, or one made from its unit,
   * unit_multiplier and algorithm (`minute_x5_token_bucket`); it tells the list's limits apart
   * in metric keys and headers.
   */
  readonly limitName?: string;
  /**
   * Set when the reference can express this limit (LimitSpec.shareable): a fixed window of one
   * unit, no unit_multiplier, not a limit of a `rate_limits` list. REDIS_KEY_LAYOUT=reference
   * counts it in the reference's key; every other rule keeps floodgate's own keys.
   */
  readonly shareable?: true;
}

/** What matching one request descriptor against a domain's tree found. */
export interface RuleMatch {
  /** The limit of the matched node; undefined when the node whitelists (no limit). */
  readonly rule?: RateLimitRule;
  /** A `rate_limits` list (two or more limits, decided together); `rule` is then its first. */
  readonly rules?: readonly RateLimitRule[];
  /**
   * The entries the counter is keyed by: the request's entries, except that a value matched
   * by a `share_threshold` wildcard is replaced by the wildcard pattern so all values share one counter.
   */
  readonly counterEntries: readonly DescriptorEntry[];
  /** Metric label path (`domain.key_value...`), honouring detailed_metric / value_to_metric. */
  readonly metricKey: string;
  /** The matched node's `metadata` map, if any. */
  readonly metadata?: Readonly<Record<string, unknown>>;
}

/** How one request entry reached its node: the file's exact value, a `*` pattern, or the key alone. */
export interface EntryStep {
  readonly key: string;
  readonly value: string;
  readonly matchedBy: 'exact' | 'wildcard' | 'key-only';
  /** The file's value for `wildcard` (the pattern); '' for `key-only`. */
  readonly fileValue: string;
  /** `domain.key_value...` of the node reached. */
  readonly fullKey: string;
}

/** An immutable, compiled set of rules. A reload builds a new one and swaps one reference. */
export interface RuleSet {
  hasDomain(domain: string): boolean;
  /** Matches one request descriptor; undefined when nothing matches (or the domain is unknown). */
  match(domain: string, entries: readonly DescriptorEntry[]): RuleMatch | undefined;
  /** All rules with a limit, in file order (each limit of a list on its own), for `/rlconfig`. */
  readonly rules: readonly RateLimitRule[];
  /** The domain's adaptive policy; undefined when its files declare none. */
  policy(domain: string): PolicyConfig | undefined;
  /** Every policy, in load order, for `/rlconfig`. */
  readonly policies: readonly PolicyConfig[];
  /** Number of domains loaded. */
  readonly domainCount: number;
  /** Each domain's rules with a limit, in file order (CLI, debug page, metrics). */
  readonly rulesByDomain: ReadonlyMap<string, readonly RateLimitRule[]>;
  /**
   * The nodes `match` walks through, entry by entry, with the same lookups; the steps up to the
   * first entry nothing matches (so a shorter list than `entries` means no match).
   */
  trace(domain: string, entries: readonly DescriptorEntry[]): EntryStep[];
}
