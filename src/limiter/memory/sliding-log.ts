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
    let live = liveTimes(state, now - w);
    const wanted = pending + hits;
    const allowed = wanted <= limit && live.length + wanted <= limit;
    let next: SlidingLogState | undefined;
    if (allowed && charge && hits > 0) {
      live = withHits(live, hits, now);
      next = { times: live, expiresAt: (live[live.length - 1] as number) + w };
    }
    const count = live.length;
    const resetMs = count > 0 ? (live[count - 1] as number) + w - now : 0;
    const blockedForMs = count >= limit ? (live[count - limit] as number) + w - now : 0;
    const retryAfterMs = allowed ? 0 : retryAfter({ live, limit, w, now, pending, wanted, resetMs });
    const result = { allowed, used: count, remaining: Math.max(0, limit - count), resetMs, retryAfterMs, blockedForMs };
    return next === undefined ? { result } : { result, next };
  },
};

/** The logged times still in the window (after `cutoff`). */
function liveTimes(state: SlidingLogState | undefined, cutoff: number): readonly number[] {
  const live = state?.times ?? [];
  let first = 0;
  while (first < live.length && (live[first] as number) <= cutoff) first++;
  return first > 0 ? live.slice(first) : live;
}

/** The live times plus `hits` entries at `now`, in order. */
function withHits(live: readonly number[], hits: number, now: number): number[] {
  const times = [...live];
  for (let k = 0; k < hits; k++) times.push(now);
  // A clock that stepped back: keep the order the sorted set keeps.
  if (live.length > 0 && (live[live.length - 1] as number) > now) times.sort((a, b) => a - b);
  return times;
}

/** A refused request: the live log (uncharged) and what was asked. */
interface Refusal {
  readonly live: readonly number[];
  readonly limit: number;
  readonly w: number;
  readonly now: number;
  readonly pending: number;
  /** pending + hits */
  readonly wanted: number;
  readonly resetMs: number;
}

function retryAfter({ live, limit, w, now, pending, wanted, resetMs }: Refusal): number {
  if (wanted > limit) return Math.max(1, resetMs);
  // The n-th oldest of the live entries and the pending ones (at now) must leave the window.
  const n = live.length + wanted - limit;
  const notLater = live.filter((t) => t <= now).length;
  if (n <= notLater) return (live[n - 1] as number) + w - now;
  if (n <= notLater + pending) return w;
  return (live[n - pending - 1] as number) + w - now;
}
