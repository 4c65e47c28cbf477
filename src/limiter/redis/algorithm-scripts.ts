import type { Algorithm } from '../../domain/algorithm';
import type { LimitCheck, LimitResult } from '../limiter';
import { loadLuaScript, type LuaScript } from './lua-script';

/** What one script call of a request is for. */
export type CallPass =
  /** Charge: per key (count) or all-or-nothing within the call (stop). */
  | 'count'
  | 'stop'
  /** First pass when one all-or-nothing request spans several calls: charge nothing. */
  | 'peek';

/** Decorates a script once, when the table is built (tracing wraps each call in a span); identity otherwise. */
export type WrapScript = (script: LuaScript, name: string) => LuaScript;

/** How the Redis limiter talks to one algorithm's script: arguments in, results out. */
export interface AlgorithmScript {
  readonly script: LuaScript;
  /** Integers per key in the reply. */
  readonly replyWidth: number;
  /**
   * Count-mode calls of concurrent requests may be merged into one call: the script treats each
   * key on its own, one after another, so a merged call answers as separate ones would.
   */
  readonly coalescible: boolean;
  /** ARGV[1] of the call. */
  mode(pass: CallPass): number;
  /** Appends the ARGV of one check. */
  pushArgs(args: (number | string)[], check: LimitCheck, pass: CallPass): void;
  /** Whether key j of the reply was denied. */
  denied(reply: readonly number[], j: number): boolean;
  /**
   * The result of key j. `heldBack`: nothing of this call was charged although hits were asked
   * (the peek pass, or an all-or-nothing call that one of its keys denied).
   */
  decode(reply: readonly number[], j: number, check: LimitCheck, pass: CallPass, heldBack: boolean): LimitResult;
}

// lua/fixed_window.lua: ARGV [mode, (hits, limit, window) × n], 4 integers per key.
function fixedWindowScript(wrap: WrapScript): AlgorithmScript {
  const width = 4;
  return {
    script: wrap(loadLuaScript('fixed_window'), 'fixed_window'),
    replyWidth: width,
    // Each key is one INCRBY (and its expiry) in turn: a key that appears twice counts twice.
    coalescible: true,
    // The peek pass sends hits 0 and judges the hits here, from the count.
    mode: (pass) => (pass === 'stop' ? 1 : 0),
    pushArgs(args, c, pass) {
      args.push(pass === 'peek' ? 0 : c.hits, c.spec.limit, c.spec.windowSeconds);
    },
    denied: (reply, j) => reply[j * width + 3] === 1,
    decode(reply, j, c, pass, heldBack) {
      const count = reply[j * width] as number;
      const resetMs = reply[j * width + 2] as number;
      const over = reply[j * width + 3] === 1 || (pass === 'peek' && count + c.hits > c.spec.limit);
      // Held back, the count did not move: report what this request would have reached.
      const used = heldBack ? count + c.hits : count;
      return { allowed: !over, used, remaining: Math.max(0, c.spec.limit - used), resetMs, retryAfterMs: over ? resetMs : 0 };
    },
  };
}

// The scripts that count only admitted hits share one layout: ARGV [mode, (hits, limit,
// window, burst) × n] and 5 integers per key [used, remaining, reset_ms, retry_after_ms, denied].
const MODES: Readonly<Record<CallPass, number>> = { count: 0, stop: 1, peek: 2 };

function admittedHitsScript(name: Algorithm, wrap: WrapScript): AlgorithmScript {
  const width = 5;
  return {
    script: wrap(loadLuaScript(name), name),
    replyWidth: width,
    // Not merged: these scripts are not written for one key appearing twice in a call.
    coalescible: false,
    mode: (pass) => MODES[pass],
    pushArgs(args, c) {
      args.push(c.hits, c.spec.limit, c.spec.windowSeconds, c.spec.burst);
    },
    denied: (reply, j) => reply[j * width + 4] === 1,
    decode(reply, j) {
      const at = j * width;
      return {
        allowed: reply[at + 4] !== 1,
        used: reply[at] as number,
        remaining: reply[at + 1] as number,
        resetMs: reply[at + 2] as number,
        retryAfterMs: reply[at + 3] as number,
      };
    },
  };
}

/**
 * The script of every algorithm, loaded once (one table per limiter). The table is total: a new
 * Algorithm does not compile until it has an entry here and one in memory/memory-algorithms.ts.
 */
export function algorithmScripts(wrap: WrapScript = (script) => script): Readonly<Record<Algorithm, AlgorithmScript>> {
  return {
    fixed_window: fixedWindowScript(wrap),
    sliding_window: admittedHitsScript('sliding_window', wrap),
    token_bucket: admittedHitsScript('token_bucket', wrap),
    gcra: admittedHitsScript('gcra', wrap),
    sliding_log: admittedHitsScript('sliding_log', wrap),
  };
}
