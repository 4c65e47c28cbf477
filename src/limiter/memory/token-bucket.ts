import type { LimitResult } from '../limiter';
import { zeroLimitResult, type AlgorithmState, type MemoryAlgorithm, type Step, type StepInput } from './memory-algorithm';

export interface TokenBucketState extends AlgorithmState {
  /** What was used: tokens taken × window ms, as it stood at `at`. */
  readonly debt: number;
  /** Epoch ms of that debt; never moves back. */
  readonly at: number;
}

/**
 * lua/token_bucket.lua in memory. Capacity `burst`, refilled `limit` tokens per window,
 * continuously. The debt (tokens × W ms) is kept, so a changed limit or burst applies to what
 * was used, and the refill of `dt` ms is exactly `limit × dt` units.
 */
export const tokenBucket: MemoryAlgorithm<TokenBucketState> = {
  countsEveryHit: false,
  step(input) {
    const { state, spec, now } = input;
    if (spec.limit === 0) return { result: zeroLimitResult(spec.windowSeconds * 1000, input.hits) };
    return bucketStep({
      ...input,
      debt: state?.debt ?? 0,
      at: state?.at ?? now,
      store: (debt, at, expiresAt) => ({ debt, at, expiresAt }),
    });
  },
};

/** What the bucket decision needs: a step's input and the bucket's debt as it stood at `at`. */
export interface BucketStepInput<S extends AlgorithmState> extends StepInput<S> {
  readonly debt: number;
  readonly at: number;
  /** Builds the charged state; called only when the hits are admitted and charged. */
  readonly store: (debt: number, at: number, expiresAt: number) => S;
}

/**
 * lua/lib/bucket_step.lua: the decision shared by token_bucket and gcra, over the bucket's debt
 * (tokens × W ms): the two algorithms differ in what they store, never in what they answer. A
 * counter's clock never goes back: the state is evaluated at max(now, at), and times are
 * reported from now. Exact while burst × W and limit × W stay below 2^53 (enforced at rule load).
 */
export function bucketStep<S extends AlgorithmState>(input: BucketStepInput<S>): Step<S> {
  const { spec, hits, now, pending, charge, at } = input;
  const { limit, burst } = spec;
  const w = spec.windowSeconds * 1000;
  const tau = Math.max(now, at);
  const ahead = tau - now;
  let debt = input.debt - Math.min(input.debt, limit * Math.min(tau - at, Math.ceil(input.debt / limit)));
  const capacity = burst * w;
  const wanted = pending + hits;
  const fits = wanted <= burst && debt + wanted * w <= capacity;
  let next: S | undefined;
  if (fits && charge && hits > 0) {
    debt += hits * w;
    next = input.store(debt, tau, tau + Math.ceil(debt / limit));
  }
  const remaining = Math.max(0, Math.floor((capacity - debt) / w));
  const resetMs = debt > 0 ? ahead + Math.ceil(debt / limit) : 0;
  let blockedForMs = 0;
  if (burst < 1) blockedForMs = Math.max(1, resetMs);
  else if (debt + w > capacity) blockedForMs = ahead + Math.ceil((debt + w - capacity) / limit);
  let retryAfterMs = 0;
  // More than the capacity never fits: the caller is told to come back when the bucket is full.
  if (!fits) retryAfterMs = wanted > burst ? Math.max(1, resetMs) : ahead + Math.ceil((debt + wanted * w - capacity) / limit);
  const result: LimitResult = { allowed: fits, used: burst - remaining, remaining, resetMs, retryAfterMs, blockedForMs };
  return next === undefined ? { result } : { result, next };
}
