import { STATE_CELLS, type StateCodec } from './counter-table';
import type { AlgorithmState, MemoryAlgorithm } from './memory-algorithm';

export interface FixedWindowState extends AlgorithmState {
  /** Start (epoch ms) of the latest window counted in, its count, and the window before's. */
  readonly start: number;
  readonly count: number;
  readonly prev: number;
}

/**
 * lua/fixed_window.lua in memory: epoch-aligned windows, the window kept in the state so a call
 * at T counts in the window containing T (one window back, too, when the clock steps back: the
 * state lives until the window after its latest one ends);
 * every charged hit is counted, also over the limit (the reference's behaviour); over when
 * count + hits > limit.
 */
export const fixedWindow: MemoryAlgorithm<FixedWindowState> = {
  countsEveryHit: true,
  codec: windowCodec<FixedWindowState>((start, count, prev, expiresAt) => ({ start, count, prev, expiresAt }), ['start', 'count', 'prev']),
  step({ state, spec, hits, now, charge }) {
    const w = spec.windowSeconds * 1000;
    const start = now - (now % w);
    let count = countIn(state, start, w);
    const denied = count + hits > spec.limit;
    let next: FixedWindowState | undefined;
    if (charge && hits > 0) {
      count += hits;
      next = charged(state, start, w, count);
    }
    const resetMs = start + w - now;
    const result = {
      allowed: !denied,
      used: count,
      remaining: Math.max(0, spec.limit - count),
      resetMs,
      retryAfterMs: denied ? resetMs : 0,
      blockedForMs: count >= spec.limit ? resetMs : 0,
    };
    return next === undefined ? { result } : { result, next };
  },
};

/** The count of the window starting at `start`: the state's latest window, or the one before it. */
function countIn(state: FixedWindowState | undefined, start: number, w: number): number {
  if (state?.start === start) return state.count;
  if (state?.start === start + w) return state.prev;
  return 0;
}

/** The state after charging the window at `start` up to `count`; undefined when it is not kept. */
function charged(state: FixedWindowState | undefined, start: number, w: number, count: number): FixedWindowState | undefined {
  // One window behind the state (the clock stepped back): the count goes into its `prev`.
  if (state !== undefined && state.start === start + w) return { ...state, prev: count };
  // More than one window behind the state: not kept (the script does the same).
  if (state !== undefined && state.start > start) return undefined;
  return { start, count, prev: previousCount(state, start, w), expiresAt: start + 2 * w };
}

/** The count of the window before the one at `start`, as far as the state knows it. */
function previousCount(state: FixedWindowState | undefined, start: number, w: number): number {
  if (state?.start === start) return state.prev;
  if (state?.start === start - w) return state.count;
  return 0;
}

/**
 * A state of three numbers and its expiry, kept in a table slot's cells in the order `fields`
 * names them (fixed_window and sliding_window).
 */
export function windowCodec<S extends AlgorithmState>(
  make: (a: number, b: number, c: number, expiresAt: number) => S,
  fields: readonly [keyof S, keyof S, keyof S],
): StateCodec<S> {
  const [a, b, c] = fields;
  return {
    load(cells, slot, expiresAt) {
      const at = slot * STATE_CELLS;
      const v = cells.values;
      return make(v[at] as number, v[at + 1] as number, v[at + 2] as number, expiresAt);
    },
    save(state, cells, slot) {
      const at = slot * STATE_CELLS;
      cells.values[at] = state[a] as number;
      cells.values[at + 1] = state[b] as number;
      cells.values[at + 2] = state[c] as number;
    },
    extraBytes: () => 0,
  };
}
