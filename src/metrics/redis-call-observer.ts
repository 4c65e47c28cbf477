/** What the Redis limiter tells an observer (operator metrics) about its calls; optional. */
export interface RedisCallObserver {
  /** One script call to `node` (`m|<node>` main, `s|<node>` per-second) finished, in seconds; `error` when it failed. */
  scriptCall(script: string, node: string, seconds: number, error?: unknown): void;
  /** A call was refused without reaching Redis (its circuit is open), or ran past its deadline. */
  refused(kind: 'breaker_open' | 'timeout'): void;
}

/** The state of one node's circuit breaker. */
export interface BreakerState {
  readonly node: string;
  readonly open: boolean;
}
