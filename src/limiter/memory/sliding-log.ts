import type { StateCodec } from './counter-table';
import { zeroLimitResult, type AlgorithmState, type MemoryAlgorithm } from './memory-algorithm';

export interface SlidingLogState extends AlgorithmState {
  /**
   * One entry per admitted call, ascending by time (the script's sorted set): entry k is
   * `hits[k]` hits at epoch ms `times[k]`. A call costs one entry whatever its hits, so a log
   * holds at most `limit` entries (bounded at rule load).
   */
  readonly times: readonly number[];
  readonly hits: readonly number[];
}

/** The live part of a log: entries from `first` on, and their hits. */
interface LiveLog {
  readonly times: readonly number[];
  readonly hits: readonly number[];
  readonly first: number;
  readonly count: number;
}

const EMPTY: LiveLog = { times: [], hits: [], first: 0, count: 0 };

/** The log stays an object, kept by reference; its entries count 16 B each against MEMORY_MAX_BYTES. */
const logCodec: StateCodec<SlidingLogState> = {
  load: (cells, slot) => cells.refs[slot] as SlidingLogState,
  save(state, cells, slot) {
    cells.refs[slot] = state;
  },
  extraBytes: (state) => 96 + 16 * state.times.length,
};

/**
 * lua/sliding_log.lua in memory: exact. A hit admitted at t counts while now − t < W. Allowed
 * iff live + pending + hits ≤ limit; hits above the limit are refused before anything is
 * touched.
 */
export const slidingLog: MemoryAlgorithm<SlidingLogState> = {
  countsEveryHit: false,
  codec: logCodec,
  step({ state, spec, hits, now, pending, charge }) {
    const limit = spec.limit;
    const w = spec.windowSeconds * 1000;
    if (limit === 0) return { result: zeroLimitResult(w, hits) };
    let live = liveLog(state, now - w);
    const wanted = pending + hits;
    const allowed = wanted <= limit && live.count + wanted <= limit;
    let next: SlidingLogState | undefined;
    if (allowed && charge && hits > 0) {
      next = withCall(live, hits, now, w);
      live = { times: next.times, hits: next.hits, first: 0, count: live.count + hits };
    }
    const count = live.count;
    const resetMs = count > 0 ? (live.times[live.times.length - 1] as number) + w - now : 0;
    const blockedForMs = count >= limit ? nthOldest(live, count - limit + 1) + w - now : 0;
    const retryAfterMs = allowed ? 0 : retryAfter({ live, limit, w, now, pending, wanted, resetMs });
    const result = { allowed, used: count, remaining: Math.max(0, limit - count), resetMs, retryAfterMs, blockedForMs };
    return next === undefined ? { result } : { result, next };
  },
};

/** The entries still in the window (after `cutoff`), without copying them. */
function liveLog(state: SlidingLogState | undefined, cutoff: number): LiveLog {
  if (state === undefined) return EMPTY;
  const { times, hits } = state;
  let first = 0;
  while (first < times.length && (times[first] as number) <= cutoff) first++;
  let count = 0;
  for (let k = first; k < hits.length; k++) count += hits[k] as number;
  return { times, hits, first, count };
}

/** The live entries plus one of `h` hits at `now`, in the sorted set's order (after equal times). */
function withCall(live: LiveLog, h: number, now: number, w: number): SlidingLogState {
  const n = live.times.length - live.first;
  const times = new Array<number>(n + 1);
  const hits = new Array<number>(n + 1);
  // Usually at the end; before later entries when the clock stepped back.
  let at = n;
  while (at > 0 && (live.times[live.first + at - 1] as number) > now) at--;
  for (let k = 0, j = 0; k <= n; k++) {
    if (k === at) {
      times[k] = now;
      hits[k] = h;
      continue;
    }
    times[k] = live.times[live.first + j] as number;
    hits[k] = live.hits[live.first + j] as number;
    j++;
  }
  return { times, hits, expiresAt: (times[n] as number) + w };
}

/** The time of the n-th oldest live hit (1-based). */
function nthOldest(live: LiveLog, n: number): number {
  let seen = 0;
  for (let k = live.first; k < live.times.length; k++) {
    seen += live.hits[k] as number;
    if (seen >= n) return live.times[k] as number;
  }
  throw new RangeError(`no ${n}th hit in a log of ${seen}`);
}

/** A refused request: the live log (uncharged) and what was asked. */
interface Refusal {
  readonly live: LiveLog;
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
  // The n-th oldest of the live hits and the pending ones (at now) must leave the window.
  const n = live.count + wanted - limit;
  let notLater = 0;
  for (let k = live.first; k < live.times.length && (live.times[k] as number) <= now; k++) notLater += live.hits[k] as number;
  if (n <= notLater) return nthOldest(live, n) + w - now;
  if (n <= notLater + pending) return w;
  return nthOldest(live, n - pending) + w - now;
}
