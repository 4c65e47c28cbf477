import type { LimitResult } from '../limiter';
import { zeroLimitResult, type AlgorithmState, type MemoryAlgorithm, type Step } from './memory-algorithm';

export interface TokenBucketState extends AlgorithmState {
  /** Tokens × window ms: refilling `limit` tokens per window adds exactly `limit` per ms. */
  readonly units: number;
  /** Epoch ms of the last write. */
  readonly at: number;
}

/**
 * lua/token_bucket.lua in memory. Capacity `burst`, refill `limit` tokens per window,
 * continuously. Tokens are kept as integers scaled by the window length (tokens × W ms), so
 * the refill of `dt` ms is exactly `limit × dt` units and no fraction is ever rounded away.
 */
export const tokenBucket: MemoryAlgorithm<TokenBucketState> = {
  step(state, spec, hits, now, charge) {
    const { limit, burst } = spec;
    const w = spec.windowSeconds * 1000;
    if (limit === 0) return { result: zeroLimitResult(w, hits) };
    const capacity = burst * w;
    const units = state === undefined ? capacity : Math.min(capacity, state.units + limit * Math.max(0, now - state.at));
    return bucketStep(capacity - units, spec.limit, burst, w, hits, now, charge, (debt, expiresAt) => ({
      units: capacity - debt,
      at: now,
      expiresAt,
    }));
  },
};

/**
 * The decision shared by token_bucket and gcra, over the bucket's debt (capacity − tokens, in
 * tokens × W ms): the two algorithms differ in what they store, never in what they answer.
 * Exact while burst × W stays below 2^53 (a day window: burst up to about 10^8).
 */
export function bucketStep<S extends AlgorithmState>(
  debt: number,
  limit: number,
  burst: number,
  w: number,
  hits: number,
  now: number,
  charge: boolean,
  store: (debt: number, expiresAt: number) => S,
): Step<S> {
  const capacity = burst * w;
  const need = hits * w;
  const allowed = debt + need <= capacity;
  let next: S | undefined;
  if (allowed && charge && hits > 0) {
    debt += need;
    next = store(debt, now + Math.ceil(debt / limit));
  }
  const remaining = Math.max(0, Math.floor((capacity - debt) / w));
  const resetMs = Math.ceil(debt / limit);
  let retryAfterMs = 0;
  // More hits than the capacity never fit: the caller is told to come back when the bucket is full.
  if (!allowed) retryAfterMs = hits > burst ? Math.max(1, resetMs) : Math.ceil((debt + need - capacity) / limit);
  const result: LimitResult = { allowed, used: burst - remaining, remaining, resetMs, retryAfterMs };
  return next === undefined ? { result } : { result, next };
}
