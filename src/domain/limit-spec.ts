import type { Algorithm } from './algorithm';

/** How a counter is counted. The limit is not part of a counter's identity; algorithm and window are. */
export interface LimitSpec {
  readonly algorithm: Algorithm;
  readonly limit: number;
  readonly windowSeconds: number;
  /** Capacity for token_bucket / gcra. */
  readonly burst: number;
  /**
   * The reference (envoyproxy/ratelimit) can express this limit: a fixed window of exactly one
   * unit (no unit_multiplier), outside a `rate_limits` list. With REDIS_KEY_LAYOUT=reference the
   * Redis backend counts it in the reference's own key (limiter/reference-key.ts); false (or
   * absent) for every other limit, which keeps floodgate's keys. The service's plan always sets
   * it (descriptor-plan.ts), so that every spec it builds has one shape.
   */
  readonly shareable?: boolean;
}
