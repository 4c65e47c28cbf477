import type { LimitResult } from '../limiter';
import { STATE_CELLS, type StateCodec } from './counter-table';
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
  codec: bucketCodec(),
  step(input) {
    const { state, spec, now } = input;
    if (spec.limit === 0) return { result: zeroLimitResult(spec.windowSeconds * 1000, input.hits) };
    // The input is passed on as it is, with the debt beside it (no copy of the input per call).
    return bucketStep(input, state?.debt ?? 0, state?.at ?? now);
  },
};

/**
 * The state kept: the charged debt when the hits are admitted and charged; else, under a limit
 * lowered since the last write, the same debt with a later end (see bucketStep).
 */
function stored(debt: number, at: number, expiresAt: number): TokenBucketState {
  return { debt, at, expiresAt };
}

/**
 * lua/lib/bucket_step.lua: the decision shared by token_bucket and gcra, over the bucket's debt
 * (tokens × W ms): the two algorithms differ in what they store, never in what they answer. A
 * counter's clock never goes back: the state is evaluated at max(now, at), and times are
 * reported from now. Exact while burst × W and limit × W stay below 2^53 (enforced at rule load).
 */
export function bucketStep(input: StepInput<TokenBucketState>, debtAt: number, at: number): Step<TokenBucketState> {
  const { spec, hits, now, pending, charge } = input;
  const { limit, burst } = spec;
  const w = spec.windowSeconds * 1000;
  const tau = Math.max(now, at);
  const ahead = tau - now;
  let debt = debtAt - Math.min(debtAt, limit * Math.min(tau - at, Math.ceil(debtAt / limit)));
  const capacity = burst * w;
  const wanted = pending + hits;
  const fits = wanted <= burst && debt + wanted * w <= capacity;
  let next: TokenBucketState | undefined;
  const expiresAt = input.state?.expiresAt;
  if (fits && charge && hits > 0) {
    debt += hits * w;
    next = stored(debt, tau, tau + Math.ceil(debt / limit));
  } else if (expiresAt !== undefined && debt > 0 && tau + Math.ceil(debt / limit) > expiresAt) {
    // A limit lowered since the last write drains the debt later than the state would live:
    // the state lives until then (what was used is kept; no time reported outlives it).
    next = stored(debtAt, at, tau + Math.ceil(debt / limit));
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

/** The bucket's debt and its time in a table slot's cells (token_bucket and gcra). */
export function bucketCodec<S extends TokenBucketState>(): StateCodec<S> {
  return {
    load(cells, slot, expiresAt) {
      const at = slot * STATE_CELLS;
      return { debt: cells.values[at] as number, at: cells.values[at + 1] as number, expiresAt } as S;
    },
    save(state, cells, slot) {
      const at = slot * STATE_CELLS;
      cells.values[at] = state.debt;
      cells.values[at + 1] = state.at;
    },
    extraBytes: () => 0,
  };
}
