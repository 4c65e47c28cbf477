import { zeroLimitResult, type AlgorithmState, type MemoryAlgorithm } from './memory-algorithm';

export interface SlidingWindowState extends AlgorithmState {
  /** Epoch ms at which the window of `curr` starts (a multiple of the window length). */
  readonly start: number;
  readonly curr: number;
  readonly prev: number;
}

/**
 * lua/sliding_window.lua in memory. Epoch-aligned windows; the estimate is
 * prev × (1 − elapsed/W) + curr, and a check is allowed iff estimate + hits ≤ limit. The
 * comparison is done scaled by W in integers (prev × (W − elapsed) + (curr + hits) × W ≤ L × W),
 * exactly as the script does, so both backends agree to the millisecond.
 */
export const slidingWindow: MemoryAlgorithm<SlidingWindowState> = {
  step(state, spec, hits, now, charge) {
    const limit = spec.limit;
    const w = spec.windowSeconds * 1000;
    if (limit === 0) return { result: zeroLimitResult(w, hits) };
    const start = now - (now % w);
    const elapsed = now - start;
    let curr = 0;
    let prev = 0;
    if (state !== undefined && state.start === start) {
      curr = state.curr;
      prev = state.prev;
    } else if (state !== undefined && state.start === start - w) {
      prev = state.curr;
    }
    const weighted = prev * (w - elapsed);
    const allowed = weighted + (curr + hits) * w <= limit * w;
    let next: SlidingWindowState | undefined;
    if (allowed && charge && hits > 0) {
      curr += hits;
      next = { start, curr, prev, expiresAt: start + 2 * w };
    }
    const used = Math.ceil((weighted + curr * w) / w);
    const resetMs = curr > 0 ? start + 2 * w - now : prev > 0 ? start + w - now : 0;
    let retryAfterMs = 0;
    if (!allowed) retryAfterMs = hits > limit ? Math.max(1, resetMs) : retryAfter(limit, w, elapsed, curr, prev, hits);
    const result = { allowed, used, remaining: Math.max(0, limit - used), resetMs, retryAfterMs };
    return next === undefined ? { result } : { result, next };
  },
};

/** Milliseconds until prev's decaying weight (this window) or curr's (the next) lets `hits` in. */
function retryAfter(limit: number, w: number, elapsed: number, curr: number, prev: number, hits: number): number {
  const room = limit - curr - hits;
  if (room >= 0 && prev > 0) {
    // First whole ms e of this window with prev × (W − e) ≤ room × W.
    const e = w - Math.floor((room * w) / prev);
    if (e < w) return e - elapsed;
  }
  // In the next window curr becomes prev: first e with curr × (W − e) ≤ (limit − hits) × W.
  const e = curr > 0 ? Math.max(0, w - Math.floor(((limit - hits) * w) / curr)) : 0;
  return w + e - elapsed;
}
