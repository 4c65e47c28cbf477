import type { LimitSpec } from '../../domain/limit-spec';
import type { LimitResult } from '../limiter';

/** What every in-memory counter state carries, whatever the algorithm. */
export interface AlgorithmState {
  /** Epoch ms from which this state is indistinguishable from a fresh counter; swept then. */
  readonly expiresAt: number;
}

/** The outcome of one check against one counter. */
export interface Step<S extends AlgorithmState> {
  readonly result: LimitResult;
  /** The state to keep after this check; absent when the check changed nothing. */
  readonly next?: S;
}

/**
 * One algorithm over in-process state: a pure function of the state (undefined = fresh), the
 * rule, the hits and the clock. `charge` false evaluates without consuming (all-or-nothing).
 * Each mirrors its lua/<algorithm>.lua step for step, so both backends give the same answers.
 */
export interface MemoryAlgorithm<S extends AlgorithmState = AlgorithmState> {
  step(state: S | undefined, spec: LimitSpec, hits: number, now: number, charge: boolean): Step<S>;
}

/**
 * limit 0 (shared by the algorithms that only count admitted hits): every hit is denied, a peek
 * is allowed, no state is read or written. No wait helps, so reset and Retry-After are one
 * window: the rule's own unit is the natural back-off.
 */
export function zeroLimitResult(windowMs: number, hits: number): LimitResult {
  const denied = hits > 0;
  return { allowed: !denied, used: 0, remaining: 0, resetMs: windowMs, retryAfterMs: denied ? windowMs : 0 };
}
