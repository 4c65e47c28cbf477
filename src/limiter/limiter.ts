import type { DescriptorEntry } from '../domain/descriptor';
import type { LimitSpec } from '../domain/limit-spec';

/** Who is counted: a domain and the descriptor entries that identify the counter. */
export interface CounterId {
  readonly domain: string;
  readonly entries: readonly DescriptorEntry[];
}

/** One counter to check: who, which rule, how much (hits 0 = peek without consuming). */
export interface LimitCheck {
  readonly counter: CounterId;
  readonly spec: LimitSpec;
  readonly hits: number;
  /**
   * The counter's identity (counterIdentity), memoised by identityOf on first use, so that the
   * layers that key a check (over-limit cache, Redis or memory) build the string once.
   */
  identity?: string;
}

/** What the algorithm decided, in milliseconds. */
export interface LimitResult {
  readonly allowed: boolean;
  /** Counter value after this call as the algorithm sees it (fixed window: hits counted so far). */
  readonly used: number;
  readonly remaining: number;
  /** Time until the counter is fully reset. */
  readonly resetMs: number;
  /** When denied: time until this request would be allowed; 0 when allowed. */
  readonly retryAfterMs: number;
  /**
   * How long, from now, the counter's state after this call denies every request with hits >= 1,
   * whatever its size (0 or absent: not guaranteed, for example because a smaller request would
   * still be admitted). Only this makes an answer safe for the local over-limit cache.
   */
  readonly blockedForMs?: number;
  /** True when the answer came from the local over-limit cache, without the backend. */
  readonly fromLocalCache?: boolean;
}

export interface CheckOptions {
  /** Epoch milliseconds by which the answer is needed. */
  readonly deadline: number;
  /**
   * STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: when any check would go over its limit, no counter
   * of this call is incremented.
   */
  readonly stopIncrementWhenOverLimit: boolean;
  /**
   * Judge every check with its hits but charge none: another counter of this request is already
   * known to be over (the over-limit cache in STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT mode).
   */
  readonly holdBack?: boolean;
}

/** The seam between the service and storage. Memory and Redis backends pass the same suite. */
export interface Limiter {
  /**
   * Results are in the same order as `checks`. Rejects with BackendUnavailableError or
   * DeadlineExceededError only when the backend cannot answer by `options.deadline`.
   */
  check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]>;
  /** False while the backend is unreachable as a whole. */
  isHealthy(): boolean;
  close(): Promise<void>;
}
