import type { AlgorithmState, MemoryAlgorithm } from './memory-algorithm';

export interface FixedWindowState extends AlgorithmState {
  count: number;
}

/**
 * lua/fixed_window.lua in memory: epoch-aligned windows; every charged hit is counted, also
 * over the limit (the reference's behaviour); over when count > limit.
 */
export const fixedWindow: MemoryAlgorithm<FixedWindowState> = {
  step(state, spec, hits, now, charge) {
    const windowMs = spec.windowSeconds * 1000;
    const windowEnd = (Math.floor(now / windowMs) + 1) * windowMs;
    let next: FixedWindowState | undefined;
    let used: number;
    if (!charge || hits === 0) {
      // A peek, or a held-back all-or-nothing call, reports the count this request would reach.
      used = (state?.count ?? 0) + hits;
    } else {
      used = (state?.count ?? 0) + hits;
      next = { count: used, expiresAt: state?.expiresAt ?? windowEnd };
    }
    const allowed = used <= spec.limit;
    const resetMs = windowEnd - now;
    const result = { allowed, used, remaining: Math.max(0, spec.limit - used), resetMs, retryAfterMs: allowed ? 0 : resetMs };
    return next === undefined ? { result } : { result, next };
  },
};
