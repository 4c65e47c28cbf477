import type { EntryStep, RateLimitRule, RuleSet } from '../config/rule-types';
import type { LimitCheck, LimitResult, Limiter } from '../limiter/limiter';
import { counterKey } from '../limiter/counter-key';
import { referenceKeyStem, type KeyLayout } from '../limiter/reference-key';
import { PrometheusMetrics } from '../metrics/metrics';
import { RateLimitService } from '../service/rate-limit-service';
import type { DescriptorEntry } from '../domain/descriptor';
import type { DescriptorStatus, RequestDescriptor } from '../service/types';
import { loadSettings } from '../settings/settings';
import { loadRulesLikeServer } from './check-command';
import { EXIT_OK, UsageError, parseArgs, stringOption, type CliIo } from './cli-io';

export const EXPLAIN_USAGE = `usage: floodgate explain <dir> <domain> k=v [k=v ...] [+ k=v ...] [--prefix P] [--json]

Says which rule of the rule files in <dir> a request descriptor matches and why: per entry
whether the file's exact value, a wildcard or the key alone matched; the limit, the algorithm,
the Redis key the counter uses (and the reference's key for the request, in which
REDIS_KEY_LAYOUT=reference counts), and whether shadow mode, quota mode or 'replaces' applies. A
bare '+' starts another descriptor of the same request (needed to see 'replaces' at work).

The request runs through the server's own matching and request code, with a counter that
counts nothing, so the answer is the server's.

  --prefix P   CACHE_KEY_PREFIX for the Redis key (default: $CACHE_KEY_PREFIX)
  --json       one JSON object instead of text
`;

/** What one descriptor of the request came to. */
export interface DescriptorExplanation {
  readonly entries: readonly DescriptorEntry[];
  readonly steps: readonly EntryStep[];
  /**
   * counted: a rule with a limit applies; unlimited: the rule says `unlimited`; no-limit: the
   * node matched has no rate_limit; no-match: no node matches; replaced: a rule matched but
   * another matched rule names it in `replaces`.
   */
  readonly outcome: 'counted' | 'unlimited' | 'no-limit' | 'no-match' | 'replaced';
  readonly rule?: RateLimitRule;
  /** The counter's Redis key; a fixed window's counts are in `<redisKey>:<window start, epoch s>`, one key per window. */
  readonly redisKey?: string;
  /**
   * The key the reference counts this request in, without its window start (`<prefix><domain>_
   * <key>_<value>_..._`, then `<window start, epoch s>`); only for a rule the reference can express
   * (issue 30). With REDIS_KEY_LAYOUT=reference floodgate counts there too (`layout`).
   */
  readonly referenceKey?: string;
  /** The layout in force for this counter: `reference` when it is counted in `referenceKey`. */
  readonly layout?: KeyLayout;
  /** A `rate_limits` list (ours): each limit and its counter's Redis key; `rule` and `redisKey` are the first's. */
  readonly limits?: readonly { readonly rule: RateLimitRule; readonly redisKey: string }[];
  /** Names of this request's other rules whose `replaces` drop this one. */
  readonly replacedBy?: readonly string[];
  readonly shadowMode?: boolean;
  /** Quota mode (the rule's `quota_mode` or QUOTA_MODE): over its limit, it denies only with every quota descriptor over. */
  readonly quotaMode?: boolean;
}

/** A limiter that records what the service would count and charges nothing. */
class RecordingLimiter implements Limiter {
  checks: LimitCheck[] = [];
  check(checks: readonly LimitCheck[]): Promise<LimitResult[]> {
    this.checks = [...checks];
    return Promise.resolve(
      checks.map((c) => ({
        allowed: true,
        used: c.hits,
        remaining: Math.max(0, c.spec.limit - c.hits),
        resetMs: c.spec.windowSeconds * 1000,
        retryAfterMs: 0,
      })),
    );
  }
  isHealthy(): boolean {
    return true;
  }
  async close(): Promise<void> {}
}

/** Runs `descriptors` through the server's RateLimitService and reads back what each came to. */
export async function explainRequest(
  rules: RuleSet,
  domain: string,
  descriptors: readonly RequestDescriptor[],
  prefix: string,
): Promise<DescriptorExplanation[]> {
  const settings = loadSettings();
  const layout = settings.redisKeyLayout;
  const limiter = new RecordingLimiter();
  const service = new RateLimitService({
    rules: () => rules,
    limiter,
    // A registry of its own that nobody reads: explain reports nothing.
    metrics: new PrometheusMetrics(),
    config: {
      shadowMode: settings.shadowMode,
      quotaMode: settings.quotaMode,
      stopIncrementWhenOverLimit: false,
      nearLimitRatio: settings.nearLimitRatio,
      responseDynamicMetadata: false,
      requestLimits: settings.requestLimits,
    },
  });
  const response = await service.shouldRateLimit({ domain, descriptors, hitsAddend: 1 }, Date.now() + 60_000);
  const matched = descriptors.map((d) => rules.match(domain, d.entries));
  let checkIndex = 0;
  return descriptors.map((d, i): DescriptorExplanation => {
    const steps = rules.trace(domain, d.entries);
    const match = matched[i];
    const status = response.statuses[i] as DescriptorStatus;
    const base = { entries: d.entries, steps };
    if (match === undefined) return { ...base, outcome: 'no-match' };
    const rule = match.rule;
    if (rule === undefined) return { ...base, outcome: 'no-limit' };
    if (status.currentLimit !== undefined) {
      const counted = (match.rules ?? [rule]).map((r) => {
        const check = limiter.checks[checkIndex++] as LimitCheck;
        return { rule: r, redisKey: counterKey(prefix, check.counter, check.spec) };
      });
      const first = limiter.checks[checkIndex - counted.length] as LimitCheck;
      const referenceKey = first.spec.shareable === true ? referenceKeyStem(prefix, first.counter) : undefined;
      return {
        ...base,
        outcome: 'counted',
        rule,
        redisKey: (counted[0] as { redisKey: string }).redisKey,
        ...(referenceKey !== undefined && { referenceKey, layout }),
        ...(match.rules !== undefined && { limits: counted }),
        shadowMode: rule.shadowMode || settings.shadowMode,
        quotaMode: rule.quotaMode || settings.quotaMode,
      };
    }
    const replacedBy = matched.flatMap((m, j) =>
      j !== i && m?.rule?.name && rule.name && m.rule.replaces.includes(rule.name) ? [m.rule.name] : [],
    );
    if (rule.unlimited && replacedBy.length === 0) return { ...base, outcome: 'unlimited', rule };
    return { ...base, outcome: 'replaced', rule, replacedBy };
  });
}

function parseDescriptors(words: readonly string[]): RequestDescriptor[] {
  const descriptors: RequestDescriptor[] = [];
  let entries: DescriptorEntry[] = [];
  for (const word of [...words, '+']) {
    if (word === '+') {
      if (entries.length === 0) throw new UsageError('every descriptor needs at least one k=v entry');
      descriptors.push({ entries });
      entries = [];
      continue;
    }
    const eq = word.indexOf('=');
    // `k` alone is an entry with an empty value, as Envoy sends for some actions.
    entries.push(eq < 0 ? { key: word, value: '' } : { key: word.slice(0, eq), value: word.slice(eq + 1) });
  }
  return descriptors;
}

function describeStep(s: EntryStep): string {
  const entry = `${s.key}=${s.value}`;
  if (s.matchedBy === 'exact') return `${entry}: exact value (${s.fullKey})`;
  if (s.matchedBy === 'wildcard') return `${entry}: wildcard '${s.fileValue}' (${s.fullKey})`;
  return `${entry}: key only, any value (${s.fullKey})`;
}

function describeRule(r: RateLimitRule): string {
  const shown = r.limitName ?? r.name;
  const name = shown ? ` '${shown}'` : '';
  if (r.unlimited) return `rule ${r.fullKey}${name}: unlimited`;
  return (
    `rule ${r.fullKey}${name}: ${r.requestsPerUnit} per ${r.windowSeconds} s (${r.unit ?? 'SECOND'}), algorithm ${r.algorithm}` +
    (r.algorithm === 'token_bucket' || r.algorithm === 'gcra' ? `, burst ${r.burst}` : '')
  );
}

/**
 * The Redis key an operator finds for `rule`'s counter `redisKey`: a fixed window keeps one key
 * per window, the counter's name plus `:<window start, epoch s>` (lua/lib/fixed_window_step.lua).
 */
function shownKey(rule: RateLimitRule, redisKey: string): string {
  return rule.algorithm === 'fixed_window' ? `${redisKey}:${WINDOW_START}` : redisKey;
}

const WINDOW_START = '<window start, epoch s>';

/** The limit (or each limit of a list) and its counter's Redis key. */
function describeCounted(e: DescriptorExplanation): string {
  const limits = e.limits ?? [{ rule: e.rule as RateLimitRule, redisKey: e.redisKey as string }];
  let out = '';
  if (e.limits !== undefined) {
    out += `  rate_limits: ${limits.length} limits, all or nothing (a hit is admitted when every limit admits it, and charged to all or none)\n`;
  }
  for (const l of limits) {
    out += `  ${describeRule(l.rule)}\n`;
    if (e.referenceKey === undefined) out += `  redis key: ${shownKey(l.rule, l.redisKey)}\n`;
    else if (e.layout === 'reference') out += `  redis key: ${e.referenceKey}${WINDOW_START} (the reference's: REDIS_KEY_LAYOUT=reference)\n`;
    else out += `  redis key: ${shownKey(l.rule, l.redisKey)}\n  reference's key: ${e.referenceKey}${WINDOW_START}\n`;
  }
  return out;
}

/** The text form: one block per descriptor. */
export function formatExplanation(list: readonly DescriptorExplanation[]): string {
  let out = '';
  list.forEach((e, i) => {
    out += `descriptor ${i + 1}: ${e.entries.map((x) => `${x.key}=${x.value}`).join(' ')}\n`;
    for (const s of e.steps) out += `  ${describeStep(s)}\n`;
    const r = e.rule;
    switch (e.outcome) {
      case 'no-match': {
        const stop = e.entries[e.steps.length] as DescriptorEntry;
        out += `  no rule: nothing matches ${stop.key}=${stop.value}\n`;
        break;
      }
      case 'no-limit':
        out += '  no limit: the matched descriptor has no rate_limit\n';
        break;
      case 'unlimited':
        out += `  ${describeRule(r as RateLimitRule)}\n`;
        break;
      case 'replaced':
        out += `  ${describeRule(r as RateLimitRule)}\n  replaced by ${(e.replacedBy ?? []).map((n) => `'${n}'`).join(', ')}: not evaluated\n`;
        break;
      case 'counted':
        out += describeCounted(e);
        out += `  shadow mode: ${e.shadowMode ? 'yes (over the limit is reported, not enforced)' : 'no'}\n`;
        out += `  quota mode: ${e.quotaMode ? 'yes (over its limit it denies the request only when every quota-mode descriptor of the request is over)' : 'no'}\n`;
        if ((r as RateLimitRule).replaces.length > 0) out += `  replaces: ${(r as RateLimitRule).replaces.map((n) => `'${n}'`).join(', ')}\n`;
        break;
    }
  });
  return out;
}

export async function explainCommand(args: readonly string[], io: CliIo): Promise<number> {
  const parsed = parseArgs(args, ['prefix'], ['json']);
  const [dir, domain, ...words] = parsed.positional;
  if (dir === undefined || domain === undefined || words.length === 0) throw new UsageError('explain needs <dir> <domain> and at least one k=v');
  const descriptors = parseDescriptors(words);
  const rules = await loadRulesLikeServer(dir);
  if (!rules.hasDomain(domain)) {
    io.err(`domain '${domain}' is not in ${dir} (domains: ${[...rules.rulesByDomain.keys()].sort().join(', ')})\n`);
    return 1;
  }
  const prefix = stringOption(parsed, 'prefix') ?? loadSettings().cacheKeyPrefix;
  const list = await explainRequest(rules, domain, descriptors, prefix);
  io.out(parsed.options.has('json') ? JSON.stringify({ domain, descriptors: list }, null, 2) + '\n' : formatExplanation(list));
  return EXIT_OK;
}
