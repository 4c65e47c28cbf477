import { ALGORITHMS, type Algorithm } from '../../domain/algorithm';
import { fixedWindowKey } from '../counter-key';
import type { LimitCheck, LimitResult } from '../limiter';
import { loadLuaScript, type LuaScript } from './lua-script';

/**
 * What one script call of a request is for, by the name every script in lua/ takes as ARGV[1]
 * (lua/lib/read_mode.lua; what each does: lua/lib/run_call.lua, lua/fixed_window.lua).
 */
export const CALL_PASSES = [
  /** Each key in turn is judged and charged. */
  'count',
  /** STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT within one call: look first, then charge. */
  'stop',
  /** Judge only, charge nothing: the first pass when one STOP request spans several calls. */
  'look',
] as const;
export type CallPass = (typeof CALL_PASSES)[number];

/**
 * After a pass's name in ARGV[1]: the call names its counters in ARGV, each before its arguments
 * (a Redis Cluster node's merged call, whose counters may be of all the node's slots), KEYS[1]
 * only routing it. lua/lib/read_mode.lua reads it.
 */
export const NAMED = ':named';

/** ARGV[1] of a script call: its pass, and whether its counters are named in ARGV. */
export type CallMode = CallPass | `${CallPass}${typeof NAMED}`;

/** ARGV[1] for `pass`, with the counters named in ARGV when `named`. */
export function callMode(pass: CallPass, named = false): CallMode {
  return named ? `${pass}${NAMED}` : pass;
}

/** denied in a lib/run_call.lua-shaped reply: the node does not serve this counter's slot (a named call only). */
const NOT_SERVED_HERE = 2;

/** Integers per key in a lib/run_call.lua-shaped reply: used, remaining, reset, retry, denied, blocked. */
export const REPLY_WIDTH = 6;

/** Integers per key in lua/fixed_window.lua's reply: count, reset. */
export const FIXED_WINDOW_REPLY_WIDTH = 2;

/** Decorates a script once, when the table is built (tracing wraps each call in a span); identity otherwise. */
export type WrapScript = (script: LuaScript, name: string) => LuaScript;

/** How the Redis limiter talks to one algorithm's script: arguments in, results out. */
export interface AlgorithmScript {
  readonly script: LuaScript;
  /** Integers per key in the reply. */
  readonly replyWidth: number;
  /**
   * Count-mode calls of concurrent requests may be merged into one call: the script treats each
   * part on its own, one after another (a key; for limit_list, a list), so a merged call
   * answers as separate ones would.
   */
  readonly coalescible: boolean;
  /** Charges hits also when they are denied (fixed_window, like the reference). */
  readonly countsEveryHit: boolean;
  /**
   * ARGV[1] of a Redis Cluster node's merged call for `pass`, whose counters may be of all the
   * node's slots, each named in ARGV; undefined when the script has none for that pass.
   */
  namedMode(pass: CallPass): CallMode | undefined;
  /** ARGV[1] of the call. */
  mode(pass: CallPass): CallMode;
  /**
   * Appends what comes before a group's per-check ARGV in a call for `pass`: a list script's key
   * count, and fixed_window's in a stop pass (a unit of one request's counters), so that each
   * list or unit carries its own header and merged calls are a plain append; nothing otherwise.
   */
  pushGroupHeader(args: (number | string)[], size: number, pass: CallPass): void;
  /** Appends the ARGV of one check. */
  pushArgs(args: (number | string)[], check: LimitCheck): void;
  /**
   * The key a call declares for `check`'s counter `counterKey` at `nowMs` (the caller's clock):
   * where the counter's state lives, so that a Redis Cluster routes the call (also while its
   * slot migrates) to the node that holds it. A fixed window's is its window's key.
   */
  declaredKey(counterKey: string, check: LimitCheck, nowMs: number): string;
  /** The result of key j of the reply, for `check` sent in a call for `pass`. */
  decode(reply: readonly number[], j: number, check: LimitCheck, pass: CallPass): LimitResult;
  /** True when counter j of a node's merged call (a named mode) was not served by the node the call went to. */
  notServedAt(reply: readonly number[], j: number): boolean;
}

/** A script of lib/read_call.lua's protocol: its reply says the whole judgement, six integers a key. */
function algorithmScript(name: Algorithm | 'limit_list', wrap: WrapScript): AlgorithmScript {
  return {
    script: wrap(loadLuaScript(name), name),
    replyWidth: REPLY_WIDTH,
    // Could be merged too, but stay one call per request (fixed_window and limit_list merge).
    coalescible: false,
    countsEveryHit: false,
    namedMode: () => undefined,
    mode: (pass) => pass,
    pushGroupHeader() {},
    pushArgs(args, c) {
      args.push(c.hits, c.spec.limit, c.spec.windowSeconds, c.spec.burst);
    },
    declaredKey: (counterKey) => counterKey,
    decode: (reply, j) => runCallResult(reply, j),
    notServedAt: runCallNotServedAt,
  };
}

/** Key j of a lib/run_call.lua-shaped reply: six integers a key, the whole judgement. */
function runCallResult(reply: readonly number[], j: number): LimitResult {
  const at = j * REPLY_WIDTH;
  return {
    allowed: reply[at + 4] !== 1,
    used: reply[at] as number,
    remaining: reply[at + 1] as number,
    resetMs: reply[at + 2] as number,
    retryAfterMs: reply[at + 3] as number,
    blockedForMs: reply[at + 5],
  };
}

function runCallNotServedAt(reply: readonly number[], j: number): boolean {
  return reply[j * REPLY_WIDTH + 4] === NOT_SERVED_HERE;
}

/**
 * lua/fixed_window.lua, whose lean protocol (issue 20) sends hits, limit and window a counter and
 * answers the window's count and reset: the judgement the other scripts make in Lua is made
 * here, from the count. Each key is one INCRBY in turn, a key that appears twice counts twice,
 * so concurrent count-mode calls merge, also across a cluster node's slots (named).
 */
function fixedWindowScript(wrap: WrapScript, name: 'fixed_window' | 'reference_window' = 'fixed_window'): AlgorithmScript {
  return {
    script: wrap(loadLuaScript(name), name),
    replyWidth: FIXED_WINDOW_REPLY_WIDTH,
    coalescible: true,
    countsEveryHit: true,
    namedMode: (pass) => callMode(pass, true),
    mode: (pass) => pass,
    pushGroupHeader(args, size, pass) {
      if (pass === 'stop') args.push(size);
    },
    pushArgs(args, c) {
      args.push(c.hits, c.spec.limit, c.spec.windowSeconds);
    },
    declaredKey: fixedWindowDeclaredKey,
    decode(reply, j, check, pass) {
      const used = reply[j * FIXED_WINDOW_REPLY_WIDTH] as number;
      const resetMs = reply[j * FIXED_WINDOW_REPLY_WIDTH + 1] as number;
      const limit = check.spec.limit;
      // A look charged nothing: its hits come on top of the count.
      return fixedWindowResult(used, resetMs, limit, (pass === 'look' ? used + check.hits : used) > limit);
    },
    notServedAt: fixedWindowNotServedAt,
  };
}

/**
 * lua/reference_window.lua (REDIS_KEY_LAYOUT=reference, issue 30): a fixed window the reference
 * can express, counted in the reference's own key, in fixed_window.lua's lean protocol with one
 * more ARGV a counter, the key's expiry: the unit's seconds plus `jitter()` (EXPIRATION_JITTER_MAX_SECONDS,
 * drawn per hit as the reference draws it). The caller declares the key (reference-key.ts), so
 * declaredKey is never asked here.
 */
export function referenceWindowScript(wrap: WrapScript = (script) => script, jitter: () => number = () => 0): AlgorithmScript {
  return {
    ...fixedWindowScript(wrap, 'reference_window'),
    pushArgs(args, c) {
      args.push(c.hits, c.spec.limit, c.spec.windowSeconds, c.spec.windowSeconds + jitter());
    },
    declaredKey: (counterKey) => counterKey,
  };
}

/** Draws the jitter the reference adds to a key's expiry: a whole number of seconds in [0, max), 0 when max is 0. */
export function expirationJitter(maxSeconds: number): () => number {
  return maxSeconds > 0 ? () => Math.floor(Math.random() * maxSeconds) : () => 0;
}

/** A fixed window's declared key: its window's key by this process' clock (lib/fixed_window_step.lua). */
const fixedWindowDeclaredKey: AlgorithmScript['declaredKey'] = (counterKey, c, nowMs) => fixedWindowKey(counterKey, c.spec.windowSeconds, nowMs);

/** A fixed window's judgement from its count (`used`) and the ms until its window ends. */
export function fixedWindowResult(used: number, resetMs: number, limit: number, denied: boolean): LimitResult {
  return {
    allowed: !denied,
    used,
    remaining: used < limit ? limit - used : 0,
    resetMs,
    retryAfterMs: denied ? resetMs : 0,
    blockedForMs: used >= limit ? resetMs : 0,
  };
}

/** In lua/fixed_window.lua's reply (and fixed_window_list.lua's), count -1: the node does not serve that counter. */
function fixedWindowNotServedAt(reply: readonly number[], j: number): boolean {
  return reply[j * FIXED_WINDOW_REPLY_WIDTH] === -1;
}

/**
 * The script of every algorithm, loaded once (one table per limiter). The table is total: a new
 * Algorithm does not compile until it has an entry here and one in memory/memory-algorithms.ts.
 */
export function algorithmScripts(wrap: WrapScript = (script) => script): Readonly<Record<Algorithm, AlgorithmScript>> {
  return {
    fixed_window: fixedWindowScript(wrap),
    sliding_window: algorithmScript('sliding_window', wrap),
    token_bucket: algorithmScript('token_bucket', wrap),
    gcra: algorithmScript('gcra', wrap),
    sliding_log: algorithmScript('sliding_log', wrap),
  };
}

/**
 * How both list scripts are called: each list led by its key count, so that concurrent lists
 * merge as a plain append; a list never charges a denied hit, so its stop pass is a count (and
 * merges as one, also per cluster node).
 */
const LIST_CALLS: Pick<AlgorithmScript, 'coalescible' | 'countsEveryHit' | 'namedMode' | 'mode' | 'pushGroupHeader'> = {
  coalescible: true,
  countsEveryHit: false,
  namedMode: (pass) => (pass === 'look' ? undefined : callMode('count', true)),
  mode: (pass) => (pass === 'look' ? 'look' : 'count'),
  pushGroupHeader(args, size) {
    args.push(size);
  },
};

/** lua/limit_list.lua's number for each algorithm (the first of its five ARGV per key). */
const LIST_ALGORITHM = Object.fromEntries(ALGORITHMS.map((a, i) => [a, i + 1])) as Readonly<Record<Algorithm, number>>;

/**
 * lua/limit_list.lua: `rate_limits` lists (issue 21), each decided all or nothing (count) or
 * only looked at (look), one after another. A group is one list, its ARGV led by its key
 * count, so the count-mode calls of concurrent requests merge as other scripts' do: a merged
 * call decides each list in turn, as separate calls in that order would. It never charges a
 * denied hit, so STOP mode holds it back like an admitted-hits algorithm.
 */
export function limitListScript(
  wrap: WrapScript = (script) => script,
  scripts: Readonly<Record<Algorithm, AlgorithmScript>> = algorithmScripts(wrap),
): AlgorithmScript {
  const decodeAs = algorithmScript('limit_list', wrap);
  return {
    ...decodeAs,
    ...LIST_CALLS,
    pushArgs(args, c) {
      args.push(LIST_ALGORITHM[c.spec.algorithm], c.hits, c.spec.limit, c.spec.windowSeconds, c.spec.burst);
    },
    // Each counter of a list is kept as its algorithm's script keeps it.
    declaredKey: (counterKey, c, nowMs) => scripts[c.spec.algorithm].declaredKey(counterKey, c, nowMs),
  };
}

/**
 * lua/fixed_window_list.lua: a `rate_limits` list whose every limit is a fixed window (issue 21),
 * decided all or nothing in fixed_window.lua's lean protocol: hits, limit and window a counter,
 * the window's count and reset back, the reset negative when the list was refused or looked at
 * (nothing charged). Each key is judged here from that: it denies when the list was not admitted
 * and its count and hits go over its limit. Groups are lists, each led by its key count, merged as
 * limit_list's.
 */
export function fixedWindowListScript(wrap: WrapScript = (script) => script): AlgorithmScript {
  return {
    script: wrap(loadLuaScript('fixed_window_list'), 'fixed_window_list'),
    replyWidth: FIXED_WINDOW_REPLY_WIDTH,
    ...LIST_CALLS,
    pushArgs(args, c) {
      args.push(c.hits, c.spec.limit, c.spec.windowSeconds);
    },
    declaredKey: fixedWindowDeclaredKey,
    decode(reply, j, check) {
      const used = reply[j * FIXED_WINDOW_REPLY_WIDTH] as number;
      const reset = reply[j * FIXED_WINDOW_REPLY_WIDTH + 1] as number;
      const limit = check.spec.limit;
      const admitted = reset > 0;
      const resetMs = admitted ? reset : -reset;
      return fixedWindowResult(used, resetMs, limit, !admitted && used + check.hits > limit);
    },
    notServedAt: fixedWindowNotServedAt,
  };
}

/** lua/stop_request.lua's number for a reference-layout window (lib/reference_window_step.lua), after the algorithms'. */
const REFERENCE_WINDOW_ALGORITHM = ALGORITHMS.length + 1;

/** lua/stop_request.lua's mode for units whose counters are KEYS (one slot, or one Redis server). */
export const STOP_REQUEST_MODE = callMode('stop');
/** lua/stop_request.lua's mode for units whose counters are named in ARGV (a Redis Cluster node's, of any of its slots). */
export const STOP_REQUEST_NAMED_MODE = callMode('stop', true);

/**
 * lua/stop_request.lua (issue 27): a STOP-mode request whose counters would take several calls,
 * decided whole in one atomic call, whatever their algorithms and lists; the units of concurrent
 * requests merge, each led by its key count. Its reply is lib/run_call.lua's, six integers a
 * counter (denied 2: not served by the node, nothing written).
 */
export interface StopRequestScript {
  readonly script: LuaScript;
  /**
   * Appends one counter's ARGV: its list (`part`: 0 for a counter of its own), algorithm, hits,
   * limit, window, burst. `expirySeconds`: the counter is a reference-layout window
   * (lua/reference_window.lua), algorithm 6, whose burst slot carries its key's expiry.
   */
  pushArgs(args: (number | string)[], part: number, check: LimitCheck, expirySeconds?: number): void;
  decode(reply: readonly number[], j: number): LimitResult;
  notServedAt(reply: readonly number[], j: number): boolean;
}

export function stopRequestScript(wrap: WrapScript = (script) => script): StopRequestScript {
  return {
    script: wrap(loadLuaScript('stop_request'), 'stop_request'),
    pushArgs(args, part, c, expirySeconds) {
      if (expirySeconds === undefined)
        args.push(part, LIST_ALGORITHM[c.spec.algorithm], c.hits, c.spec.limit, c.spec.windowSeconds, c.spec.burst);
      else args.push(part, REFERENCE_WINDOW_ALGORITHM, c.hits, c.spec.limit, c.spec.windowSeconds, expirySeconds);
    },
    decode: runCallResult,
    notServedAt: runCallNotServedAt,
  };
}
