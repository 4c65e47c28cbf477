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
   * Set on the first check of a `rate_limits` list only (issue 21): this check and the next
   * `listSize - 1` are one unit, all or nothing. The list is admitted when every one of them
   * admits its hits, and then all are charged; when any denies, none is charged (not even a
   * fixed window, which outside a list counts every hit). Every layer keeps a list's checks
   * together and in order.
   */
  readonly listSize?: number;
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
   * Judge every check but charge none (a check of an algorithm that counts every hit without its
   * hits, as the reference judges a key it increments by 0). Set only by the over-limit cache in
   * STOP mode with REDIS_KEY_LAYOUT=reference, for the rest of a request with a counter known over
   * (the reference's rule, issue 30); in floodgate's own layout such a request goes whole to the
   * backend's STOP rule (issue 27). Honoured by RedisLimiter only: createLimiter puts the cache in
   * front of Redis alone, never in front of the memory backend.
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

/**
 * Calls `each(first, size)` for every unit of `checks`, in order: a single check (size 1) or a
 * `rate_limits` list (see LimitCheck.listSize).
 */
export function forEachUnit(checks: readonly LimitCheck[], each: (first: number, size: number) => void): void {
  for (let i = 0; i < checks.length;) {
    const size = Math.max(1, Math.min((checks[i] as LimitCheck).listSize ?? 1, checks.length - i));
    each(i, size);
    i += size;
  }
}

/** Whether any check of `checks` starts a list (the common request has none: no unit walk then). */
export function hasLists(checks: readonly LimitCheck[]): boolean {
  for (const check of checks) if (check.listSize !== undefined && check.listSize > 1) return true;
  return false;
}
