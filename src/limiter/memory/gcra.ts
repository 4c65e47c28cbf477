import { zeroLimitResult, type AlgorithmState, type MemoryAlgorithm } from './memory-algorithm';
import { bucketStep } from './token-bucket';

export interface GcraState extends AlgorithmState {
  /** lua/gcra.lua's one value "<at>;<debt>;<expiresAt>": the debt (tokens × W) as it stood at `at`. */
  readonly at: number;
  readonly debt: number;
}

/**
 * lua/gcra.lua in memory. Emission interval T = W / limit; allowed iff the theoretical arrival
 * time after the hits stays within burst × T. Computed scaled by `limit` (T × limit = W), which
 * makes it the token bucket's debt exactly: the two algorithms answer identically.
 */
export const gcra: MemoryAlgorithm<GcraState> = {
  countsEveryHit: false,
  step(input) {
    const { state, spec, now } = input;
    if (spec.limit === 0) return { result: zeroLimitResult(spec.windowSeconds * 1000, input.hits) };
    return bucketStep({
      ...input,
      debt: state?.debt ?? 0,
      at: state?.at ?? now,
      store: (debt, at, expiresAt) => ({ at, debt, expiresAt }),
    });
  },
};
