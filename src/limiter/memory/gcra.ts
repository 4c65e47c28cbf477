import type { AlgorithmState, MemoryAlgorithm } from './memory-algorithm';
import { bucketCodec, tokenBucket } from './token-bucket';

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
  codec: bucketCodec<GcraState>(),
  // The same state and the same arithmetic as the token bucket; only the script's storage differs.
  step: (input) => tokenBucket.step(input),
};
