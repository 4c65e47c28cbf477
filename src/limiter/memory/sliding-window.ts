import { windowCodec } from './fixed-window';
import { zeroLimitResult, type AlgorithmState, type MemoryAlgorithm } from './memory-algorithm';

export interface SlidingWindowState extends AlgorithmState {
  /** Start (epoch ms) of the latest window written, its admitted hits, and the window before's. */
  readonly start: number;
  readonly curr: number;
  readonly prev: number;
}

/**
 * lua/sliding_window.lua in memory. Epoch-aligned windows; the estimate is
 * prev × (1 − elapsed/W) + curr, and a check is allowed iff estimate + hits ≤ limit, compared
 * scaled by W in integers exactly as the script does. The state keeps two windows, so a clock
 * that steps back one window still finds its count there.
 */
export const slidingWindow: MemoryAlgorithm<SlidingWindowState> = {
  countsEveryHit: false,
  codec: windowCodec<SlidingWindowState>((start, curr, prev, expiresAt) => ({ start, curr, prev, expiresAt }), ['start', 'curr', 'prev']),
  step({ state, spec, hits, now, pending, charge }) {
    const limit = spec.limit;
    const w = spec.windowSeconds * 1000;
    if (limit === 0) return { result: zeroLimitResult(w, hits) };
    const start = now - (now % w);
    const elapsed = now - start;
    const counts = countsAt(state, start, w);
    const prev = counts.prev;
    let curr = counts.curr;
    const at: WindowAt = { limit, w, elapsed };
    const allowed = hits <= limit && waitFor(at, { curr: curr + pending, prev }, hits) === 0;
    let next: SlidingWindowState | undefined;
    if (allowed && charge && hits > 0) {
      curr += hits;
      next = charged(state, start, w, { curr, prev });
    }
    const used = Math.ceil((prev * (w - elapsed) + curr * w) / w);
    const resetMs = untilReset(next ?? state, now, w);
    let retryAfterMs = 0;
    if (!allowed) retryAfterMs = hits > limit ? Math.max(1, resetMs) : waitFor(at, { curr: curr + pending, prev }, hits);
    const result = { allowed, used, remaining: Math.max(0, limit - used), resetMs, retryAfterMs, blockedForMs: waitFor(at, { curr, prev }, 1) };
    return next === undefined ? { result } : { result, next };
  },
};

/** The limit, the window length (ms) and how far into the current window now is. */
interface WindowAt {
  readonly limit: number;
  readonly w: number;
  readonly elapsed: number;
}

interface Counts {
  readonly curr: number;
  readonly prev: number;
}

/** The admitted hits of the window at `start` and of the one before it, as far as the state knows them. */
function countsAt(state: SlidingWindowState | undefined, start: number, w: number): Counts {
  if (state?.start === start) return { curr: state.curr, prev: state.prev };
  // The clock stepped back one window: the state's older window is this one.
  if (state?.start === start + w) return { curr: state.prev, prev: 0 };
  if (state?.start === start - w) return { curr: 0, prev: state.curr };
  return { curr: 0, prev: 0 };
}

/** The state after charging the window at `start`; undefined when it is not kept. */
function charged(state: SlidingWindowState | undefined, start: number, w: number, { curr, prev }: Counts): SlidingWindowState | undefined {
  if (state !== undefined && state.start === start + w) return { ...state, prev: curr };
  // More than one window behind the state: not kept (the script does the same).
  if (state !== undefined && state.start > start) return undefined;
  return { start, curr, prev, expiresAt: start + 2 * w };
}

/** Fully reset when the last kept window with hits has decayed, two windows after it starts. */
function untilReset(kept: SlidingWindowState | undefined, now: number, w: number): number {
  if (kept === undefined) return 0;
  let resetMs = 0;
  if (kept.curr > 0) resetMs = Math.max(resetMs, kept.start + 2 * w - now);
  if (kept.prev > 0) resetMs = Math.max(resetMs, kept.start + w - now);
  return resetMs;
}

/** Milliseconds from now until `hits` more fit without more hits: prev decays, then curr does. */
function waitFor({ limit, w, elapsed }: WindowAt, { curr, prev }: Counts, hits: number): number {
  if (curr + hits <= limit && prev * (w - elapsed) + (curr + hits) * w <= limit * w) return 0;
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
