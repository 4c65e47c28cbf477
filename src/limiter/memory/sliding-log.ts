import { zeroLimitResult, type AlgorithmState, type MemoryAlgorithm } from './memory-algorithm';

export interface SlidingLogState extends AlgorithmState {
  /** Epoch ms of every admitted hit still in the window, ascending (the script's sorted set). */
  readonly times: readonly number[];
}

/**
 * lua/sliding_log.lua in memory: exact. A hit admitted at t counts while now − t < W. Allowed
 * iff live + hits ≤ limit; each admitted hit is one entry, so a log holds at most `limit`.
 */
export const slidingLog: MemoryAlgorithm<SlidingLogState> = {
  step(state, spec, hits, now, charge) {
    const limit = spec.limit;
    const w = spec.windowSeconds * 1000;
    if (limit === 0) return { result: zeroLimitResult(w, hits) };
    const cutoff = now - w;
    let live = state?.times ?? [];
    let first = 0;
    while (first < live.length && (live[first] as number) <= cutoff) first++;
    if (first > 0) live = live.slice(first);
    let count = live.length;
    const allowed = count + hits <= limit;
    let next: SlidingLogState | undefined;
    if (allowed && charge && hits > 0) {
      const times = [...live];
      for (let k = 0; k < hits; k++) times.push(now);
      // A clock that stepped back: keep the order the sorted set keeps.
      if (count > 0 && (live[count - 1] as number) > now) times.sort((a, b) => a - b);
      live = times;
      count = times.length;
      next = { times, expiresAt: now + w };
    }
    const resetMs = count > 0 ? (live[count - 1] as number) + w - now : 0;
    let retryAfterMs = 0;
    if (!allowed) {
      // Enough of the oldest entries must leave the window to make room for `hits`.
      retryAfterMs = hits > limit ? Math.max(1, resetMs) : (live[count + hits - limit - 1] as number) + w - now;
    }
    const result = { allowed, used: count, remaining: Math.max(0, limit - count), resetMs, retryAfterMs };
    return next === undefined ? { result } : { result, next };
  },
};
