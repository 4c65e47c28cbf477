import { zeroLimitResult, type AlgorithmState, type MemoryAlgorithm } from './memory-algorithm';

export interface SlidingLogState extends AlgorithmState {
  /** Epoch ms of every admitted hit still in the window, ascending (the script's sorted set). */
  readonly times: readonly number[];
}

/**
 * lua/sliding_log.lua in memory: exact. A hit admitted at t counts while now − t < W. Allowed
 * iff live + pending + hits ≤ limit; each admitted hit is one entry, so a log holds at most
 * `limit` (bounded at rule load), and hits above it are refused before anything is touched.
 */
export const slidingLog: MemoryAlgorithm<SlidingLogState> = {
  countsEveryHit: false,
  step({ state, spec, hits, now, pending, charge }) {
    const limit = spec.limit;
    const w = spec.windowSeconds * 1000;
    if (limit === 0) return { result: zeroLimitResult(w, hits) };
    const cutoff = now - w;
    let live = state?.times ?? [];
    let first = 0;
    while (first < live.length && (live[first] as number) <= cutoff) first++;
    if (first > 0) live = live.slice(first);
    const wanted = pending + hits;
    const allowed = wanted <= limit && live.length + wanted <= limit;
    let next: SlidingLogState | undefined;
    if (allowed && charge && hits > 0) {
      const times = [...live];
      for (let k = 0; k < hits; k++) times.push(now);
      // A clock that stepped back: keep the order the sorted set keeps.
      if (live.length > 0 && (live[live.length - 1] as number) > now) times.sort((a, b) => a - b);
      live = times;
      next = { times, expiresAt: (times[times.length - 1] as number) + w };
    }
    const count = live.length;
    const resetMs = count > 0 ? (live[count - 1] as number) + w - now : 0;
    const blockedForMs = count >= limit ? (live[count - limit] as number) + w - now : 0;
    let retryAfterMs = 0;
    if (!allowed) {
      if (wanted > limit) retryAfterMs = Math.max(1, resetMs);
      else {
        // The n-th oldest of the live entries and the pending ones (at now) must leave the window.
        const n = count + wanted - limit;
        const notLater = live.filter((t) => t <= now).length;
        if (n <= notLater) retryAfterMs = (live[n - 1] as number) + w - now;
        else if (n <= notLater + pending) retryAfterMs = w;
        else retryAfterMs = (live[n - pending - 1] as number) + w - now;
      }
    }
    const result = { allowed, used: count, remaining: Math.max(0, limit - count), resetMs, retryAfterMs, blockedForMs };
    return next === undefined ? { result } : { result, next };
  },
};
