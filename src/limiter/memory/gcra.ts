import { zeroLimitResult, type AlgorithmState, type MemoryAlgorithm } from './memory-algorithm';
import { bucketStep } from './token-bucket';

export interface GcraState extends AlgorithmState {
  /** The theoretical arrival time is tatMs + rem / limit (0 ≤ rem < limit): exact, no floats. */
  readonly tatMs: number;
  readonly rem: number;
}

/**
 * lua/gcra.lua in memory. Emission interval T = W / limit; allowed iff
 * max(TAT, now) + hits × T − now ≤ burst × T; then TAT = max(TAT, now) + hits × T. Computed
 * scaled by `limit` (T × limit = W), which makes it the token bucket's debt exactly: the two
 * algorithms answer identically for the same hits.
 */
export const gcra: MemoryAlgorithm<GcraState> = {
  step(state, spec, hits, now, charge) {
    const { limit, burst } = spec;
    const w = spec.windowSeconds * 1000;
    if (limit === 0) return { result: zeroLimitResult(w, hits) };
    const debt = state === undefined ? 0 : Math.max(0, limit * (state.tatMs - now) + state.rem);
    return bucketStep(debt, limit, burst, w, hits, now, charge, (after, expiresAt) => {
      const whole = Math.floor(after / limit);
      return { tatMs: now + whole, rem: after - whole * limit, expiresAt };
    });
  },
};
