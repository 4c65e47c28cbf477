import { excerpt } from './quote-excerpt';
import { ConfigError } from '../base/errors';
import { UNIT_SECONDS } from '../domain/units';
import { keyValue, type DescriptorEntry } from '../domain/descriptor';
import type { DescriptorConfig, DomainConfig, RateLimitConfig } from './check-rules';
import type { EntryStep, RateLimitRule, RuleMatch, RuleSet } from './rule-types';
import type { PolicyConfig } from '../domain/policy-config';
import { WildcardPattern } from './wildcard-pattern';

/** How a node is reached from its request entry. */
type NodeKind = 'exact' | 'wildcard' | 'any';

/** One compiled descriptor. Immutable after compilation. */
interface RuleNode {
  readonly kind: NodeKind;
  readonly key: string;
  /** The file's value: a literal, a `*` pattern, or '' (any). */
  readonly value: string;
  readonly pattern?: WildcardPattern;
  readonly rule?: RateLimitRule;
  /** A `rate_limits` list; `rule` is its first limit. */
  readonly rules?: readonly RateLimitRule[];
  readonly children?: Level;
  /** `domain.key_value...` as written in the file; also the metric key when nothing is dynamic. */
  readonly fullKey: string;
  readonly metadata?: Readonly<Record<string, unknown>>;
  readonly valueToMetric: boolean;
  readonly detailedMetric: boolean;
  /** A share_threshold wildcard: all matching values count as the pattern. */
  readonly shared: boolean;
  /** Some node on the path (this one included) shares a counter: counterEntries must be rebuilt. */
  readonly dynamicCounter: boolean;
  /** The metric key depends on request values (detailed_metric / value_to_metric on the path). */
  readonly dynamicMetric: boolean;
}

/** The children of a node (or a domain's top level) for one entry key. */
interface KeyGroup {
  /** By value: the exact nodes, and the wildcard nodes by their literal text. */
  readonly exact: Map<string, RuleNode>;
  /** In file order: the first matching pattern wins. */
  readonly wildcards: RuleNode[];
  any?: RuleNode;
}

type Level = Map<string, KeyGroup>;

interface DomainTree {
  readonly level: Level;
  policy?: PolicyConfig;
  /** Composite keys (`key` or `key_value`) of the top level, to reject duplicates across merged files. */
  readonly compositeKeys: Set<string>;
}

/**
 * Compiles validated rule files into an immutable RuleSet whose `match` is a few map lookups
 * per entry. Throws ConfigError for a domain defined twice (unless merging) and for a
 * descriptor that another merged file already defines.
 */
export function compileRules(configs: readonly DomainConfig[], options: { mergeDomainConfig: boolean }): RuleSet {
  const builder = new RuleSetBuilder(options);
  for (const config of configs) builder.add(config);
  return builder.build();
}

/**
 * `compileRules` one file at a time, for a caller that spreads a large rule set over several
 * turns of the event loop (xDS). `add` throws what compileRules would for that file; `build`
 * is O(domains).
 */
export class RuleSetBuilder {
  private readonly domains = new Map<string, DomainTree>();
  private readonly rules: RateLimitRule[] = [];
  private readonly byDomain = new Map<string, RateLimitRule[]>();

  constructor(private readonly options: { readonly mergeDomainConfig: boolean }) {}

  add(config: DomainConfig): void {
    let tree = this.domains.get(config.domain);
    if (tree !== undefined && !this.options.mergeDomainConfig) {
      throw new ConfigError(`${config.fileName}: duplicate domain '${excerpt(config.domain)}' in config file`);
    }
    if (tree === undefined) {
      tree = { level: new Map(), compositeKeys: new Set() };
      this.domains.set(config.domain, tree);
    }
    const first = this.rules.length;
    if (config.policy !== undefined) {
      // Merged files of one domain may declare its policy once.
      if (tree.policy !== undefined) throw new ConfigError(`${config.fileName}: duplicate policy for domain '${excerpt(config.domain)}'`);
      tree.policy = config.policy;
    }
    addTopLevel(tree, config, this.rules);
    let domainRules = this.byDomain.get(config.domain);
    if (domainRules === undefined) this.byDomain.set(config.domain, (domainRules = []));
    for (let i = first; i < this.rules.length; i++) domainRules.push(this.rules[i] as RateLimitRule);
  }

  build(): RuleSet {
    return ruleSet(this.domains, Object.freeze([...this.rules]), this.byDomain);
  }
}

function addTopLevel(tree: DomainTree, config: DomainConfig, rules: RateLimitRule[]): void {
  for (const descriptor of config.descriptors) {
    const composite = keyValue(descriptor);
    if (tree.compositeKeys.has(composite)) {
      throw new ConfigError(`${config.fileName}: duplicate descriptor composite key '${excerpt(`${config.domain}.${composite}`)}'`);
    }
    tree.compositeKeys.add(composite);
    addNode(tree.level, descriptor, `${config.domain}.`, { shared: false, valueToMetric: false }, rules);
  }
}

interface PathFlags {
  readonly shared: boolean;
  readonly valueToMetric: boolean;
}

function addNode(level: Level, d: DescriptorConfig, parentKey: string, path: PathFlags, rules: RateLimitRule[]): void {
  const fullKey = parentKey + keyValue(d);
  const kind: NodeKind = d.value === '' ? 'any' : d.value.includes('*') ? 'wildcard' : 'exact';
  const shared = kind === 'wildcard' && d.shareThreshold;
  // value_to_metric only changes the key where the file's text differs from the request's value.
  const flags: PathFlags = {
    shared: path.shared || shared,
    valueToMetric: path.valueToMetric || (d.valueToMetric && kind !== 'exact'),
  };
  const { rule, list } = compileLimits(d, fullKey, rules);
  const children = compileChildren(d.descriptors, `${fullKey}.`, flags, rules);
  const node: RuleNode = Object.freeze({
    kind,
    key: d.key,
    value: d.value,
    ...(kind === 'wildcard' && { pattern: wildcardPattern(d.value) }),
    ...(rule && { rule }),
    ...(list && { rules: list }),
    ...(children && { children }),
    fullKey,
    ...(d.metadata && { metadata: d.metadata }),
    valueToMetric: d.valueToMetric,
    detailedMetric: d.detailedMetric,
    shared,
    dynamicCounter: flags.shared,
    dynamicMetric: flags.valueToMetric || d.detailedMetric,
  });
  insert(level, node);
}

function compileChildren(
  descriptors: readonly DescriptorConfig[],
  parentKey: string,
  path: PathFlags,
  rules: RateLimitRule[],
): Level | undefined {
  if (descriptors.length === 0) return undefined;
  const level: Level = new Map();
  for (const child of descriptors) addNode(level, child, parentKey, path, rules);
  return level;
}

function insert(level: Level, node: RuleNode): void {
  let group = level.get(node.key);
  if (group === undefined) {
    group = { exact: new Map(), wildcards: [] };
    level.set(node.key, group);
  }
  if (node.kind === 'exact') group.exact.set(node.value, node);
  else if (node.kind === 'wildcard') {
    // Also by its literal text, as the reference's `key_value` map holds it: a request value
    // written with the same `*`s picks this node before any pattern is tried.
    group.exact.set(node.value, node);
    group.wildcards.push(node);
  } else group.any = node;
}

/** The descriptor's limit, or its `rate_limits` list (`rule` its first), each added to `rules`. */
function compileLimits(d: DescriptorConfig, fullKey: string, rules: RateLimitRule[]): { rule?: RateLimitRule; list?: readonly RateLimitRule[] } {
  if (d.rateLimits !== undefined) {
    const list = Object.freeze(d.rateLimits.map((limit) => compileRule(d, limit, fullKey, generatedName(limit))));
    rules.push(...list);
    return { rule: list[0], list };
  }
  const rule = d.rateLimit && compileRule(d, d.rateLimit, fullKey);
  if (rule !== undefined) rules.push(rule);
  return rule === undefined ? {} : { rule };
}

/** A list limit's name in metrics and headers: its own, or `<unit>[_x<multiplier>][_<algorithm>]`. */
function generatedName(limit: RateLimitConfig): string {
  if (limit.name !== undefined) return limit.name;
  const multiplier = limit.unitMultiplier > 1 ? `_x${limit.unitMultiplier}` : '';
  const algorithm = limit.algorithm === 'fixed_window' ? '' : `_${limit.algorithm}`;
  return (limit.unit ?? 'unlimited').toLowerCase() + multiplier + algorithm;
}

function compileRule(d: DescriptorConfig, limit: RateLimitConfig, fullKey: string, limitName?: string): RateLimitRule {
  return Object.freeze({
    fullKey,
    ...(limit.name !== undefined && { name: limit.name }),
    requestsPerUnit: limit.requestsPerUnit,
    ...(limit.unit !== undefined && { unit: limit.unit }),
    unlimited: limit.unlimited,
    algorithm: limit.algorithm,
    windowSeconds: limit.unit === undefined ? 0 : UNIT_SECONDS[limit.unit] * limit.unitMultiplier,
    burst: limit.burst,
    shadowMode: d.shadowMode,
    quotaMode: d.quotaMode,
    replaces: Object.freeze([...limit.replaces]),
    ...(limitName !== undefined && { limitName }),
    ...(isShareable(limit, limitName) && { shareable: true as const }),
  });
}

/**
 * Whether the reference can express `limit` (RateLimitRule.shareable): its fixed window of one
 * unit, outside a list (`limitName` is set on a list's limits only).
 */
function isShareable(limit: RateLimitConfig, limitName: string | undefined): boolean {
  return (
    limitName === undefined && !limit.unlimited && limit.unit !== undefined && limit.algorithm === 'fixed_window' && limit.unitMultiplier === 1
  );
}

/** `*` matches any run of characters (also none), anywhere and any number of times. */
export function wildcardPattern(value: string): WildcardPattern {
  return new WildcardPattern(value);
}

// ---- matching ----

function ruleSet(
  domains: Map<string, DomainTree>,
  rules: readonly RateLimitRule[],
  byDomain: ReadonlyMap<string, readonly RateLimitRule[]>,
): RuleSet {
  const policies = Object.freeze([...domains.values()].flatMap((t) => (t.policy ? [t.policy] : [])));
  return Object.freeze({
    rules,
    policies,
    domainCount: domains.size,
    rulesByDomain: byDomain,
    trace: (domain: string, entries: readonly DescriptorEntry[]): EntryStep[] => {
      const tree = domains.get(domain);
      return tree === undefined ? [] : traceSteps(tree.level, entries);
    },
    hasDomain: (domain: string): boolean => domains.has(domain),
    policy: (domain: string): PolicyConfig | undefined => domains.get(domain)?.policy,
    match: (domain: string, entries: readonly DescriptorEntry[]): RuleMatch | undefined => {
      const tree = domains.get(domain);
      if (tree === undefined || entries.length === 0) return undefined;
      const node = walk(tree.level, entries);
      return node && toMatch(domain, node, tree.level, entries);
    },
  });
}

/** The node matched by the request's last entry, or undefined (depth must be equal). */
function walk(top: Level, entries: readonly DescriptorEntry[]): RuleNode | undefined {
  let level: Level | undefined = top;
  let node: RuleNode | undefined;
  for (const entry of entries) {
    if (level === undefined) return undefined;
    node = step(level, entry);
    if (node === undefined) return undefined;
    level = node.children;
  }
  return node;
}

/** `walk`, step by step, saying how each entry matched. */
function traceSteps(top: Level, entries: readonly DescriptorEntry[]): EntryStep[] {
  const steps: EntryStep[] = [];
  let level: Level | undefined = top;
  for (const entry of entries) {
    const node: RuleNode | undefined = level && step(level, entry);
    if (node === undefined) break;
    const matchedBy = node.kind === 'any' ? 'key-only' : node.kind;
    steps.push({ key: entry.key, value: entry.value, matchedBy, fileValue: node.value, fullKey: node.fullKey });
    level = node.children;
  }
  return steps;
}

/** Exact value first, then wildcards in file order, then the key alone. */
function step(level: Level, entry: DescriptorEntry): RuleNode | undefined {
  const group = level.get(entry.key);
  if (group === undefined) return undefined;
  const exact = group.exact.get(entry.value);
  if (exact !== undefined) return exact;
  for (const candidate of group.wildcards) {
    if ((candidate.pattern as WildcardPattern).test(entry.value)) return candidate;
  }
  return group.any;
}

function toMatch(domain: string, node: RuleNode, top: Level, entries: readonly DescriptorEntry[]): RuleMatch {
  if (!node.dynamicCounter && !node.dynamicMetric) {
    return Object.freeze({ rule: node.rule, rules: node.rules, counterEntries: entries, metricKey: node.fullKey, metadata: node.metadata });
  }
  // Rare path: walk again to learn which node matched each entry.
  const path = pathNodes(top, entries);
  return Object.freeze({
    rule: node.rule,
    rules: node.rules,
    counterEntries: node.dynamicCounter ? sharedEntries(path, entries) : entries,
    metricKey: node.dynamicMetric ? dynamicMetricKey(domain, node, path, entries) : node.fullKey,
    metadata: node.metadata,
  });
}

function pathNodes(top: Level, entries: readonly DescriptorEntry[]): RuleNode[] {
  const path: RuleNode[] = [];
  let level: Level | undefined = top;
  for (const entry of entries) {
    const node = step(level as Level, entry) as RuleNode;
    path.push(node);
    level = node.children;
  }
  return path;
}

/** The entries with every share_threshold wildcard's value replaced by its pattern. */
function sharedEntries(path: readonly RuleNode[], entries: readonly DescriptorEntry[]): readonly DescriptorEntry[] {
  return Object.freeze(
    entries.map((entry, i) => {
      const node = path[i] as RuleNode;
      return node.shared ? Object.freeze({ key: entry.key, value: node.value }) : entry;
    }),
  );
}

/**
 * The metric key as the reference builds it. detailed_metric (on the matched node): every
 * entry's runtime `key_value`. Otherwise per level: the file's text, except that
 * value_to_metric on a wildcard or key-only node shows the runtime value. A share_threshold
 * wildcard always shows its pattern.
 */
function dynamicMetricKey(domain: string, node: RuleNode, path: readonly RuleNode[], entries: readonly DescriptorEntry[]): string {
  const detailed = node.detailedMetric;
  const anyShared = detailed && path.some((n) => n.shared);
  const parts = entries.map((entry, i) => {
    const n = path[i] as RuleNode;
    if (n.shared) return keyValue({ key: entry.key, value: n.value });
    // The reference joins key and value with '_' even for an empty value here, unless
    // share_threshold is also in play; kept for identical metric names.
    if (detailed) return anyShared ? keyValue(entry) : `${entry.key}_${entry.value}`;
    if (n.kind === 'exact') return keyValue(n);
    if (n.valueToMetric) return keyValue(entry);
    return n.kind === 'wildcard' ? keyValue(n) : n.key;
  });
  return `${domain}.${parts.join('.')}`;
}
