import type { LimitSpec } from '../../domain/limit-spec';
import type { LimitResult } from '../limiter';
import type { StateCodec } from './counter-table';

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

/** What one step of an algorithm looks at. */
export interface StepInput<S extends AlgorithmState> {
  /** The counter's state; undefined = fresh (also once it has expired). */
  readonly state: S | undefined;
  readonly spec: LimitSpec;
  readonly hits: number;
  /** Epoch ms. */
  readonly now: number;
  /**
   * Hits that earlier occurrences of the same counter in this call would add (a look before
   * charging, lua/lib/run_call.lua): judged on top of the state, never charged. Always 0 for an
   * algorithm that counts every hit.
   */
  readonly pending: number;
  /** False evaluates without consuming. */
  readonly charge: boolean;
}

/**
 * One algorithm over in-process state: a pure function of the state, the rule, the hits and the
 * clock. Each mirrors its lua/<algorithm>.lua step for step, so both backends give the same
 * answers; the result's used, remaining, reset and blockedForMs describe the state after the
 * step, allowed and retryAfterMs judge the hits.
 */
export interface MemoryAlgorithm<S extends AlgorithmState = AlgorithmState> {
  /** Charges hits also when they are denied (fixed_window, like the reference). */
  readonly countsEveryHit: boolean;
  /** How its state is kept in the counter table (a few numbers, not an object). */
  readonly codec: StateCodec<S>;
  step(input: StepInput<S>): Step<S>;
}

/**
 * limit 0 (shared by the algorithms that only count admitted hits): every hit is denied, a peek
 * is allowed, no state is read or written. No wait helps, so reset, Retry-After and the block
 * are one window: the rule's own unit is the natural back-off.
 */
export function zeroLimitResult(windowMs: number, hits: number): LimitResult {
  const denied = hits > 0;
  return { allowed: !denied, used: 0, remaining: 0, resetMs: windowMs, retryAfterMs: denied ? windowMs : 0, blockedForMs: windowMs };
}
