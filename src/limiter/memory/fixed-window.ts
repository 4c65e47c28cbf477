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
  step({ state, spec, hits, now, charge }) {
    const w = spec.windowSeconds * 1000;
    const start = now - (now % w);
    let count = state?.start === start ? state.count : state?.start === start + w ? state.prev : 0;
    const denied = count + hits > spec.limit;
    let next: FixedWindowState | undefined;
    if (charge && hits > 0) {
      count += hits;
      if (state !== undefined && state.start === start + w) next = { ...state, prev: count };
      else if (state === undefined || state.start <= start) {
        const prev = state?.start === start ? state.prev : state?.start === start - w ? state.count : 0;
        next = { start, count, prev, expiresAt: start + 2 * w };
      }
      // More than one window behind the state: not kept (the script does the same).
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
