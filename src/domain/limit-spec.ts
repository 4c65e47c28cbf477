import type { Algorithm } from './algorithm';

/** How a counter is counted. The limit is not part of a counter's identity; algorithm and window are. */
export interface LimitSpec {
  readonly algorithm: Algorithm;
  readonly limit: number;
  readonly windowSeconds: number;
  /** Capacity for token_bucket / gcra. */
  readonly burst: number;
}
