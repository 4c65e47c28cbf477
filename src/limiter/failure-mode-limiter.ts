import { BackendUnavailableError, DeadlineExceededError } from '../base/errors';
import type { CheckOptions, LimitCheck, LimitResult, Limiter } from './limiter';
import type { MemoryLimiter } from './memory/memory-limiter';

/** BACKEND_FAILURE_MODE: how a call is answered while the backend cannot answer. */
export type FailureMode = 'error' | 'allow' | 'deny' | 'local';

export interface FailureModeOptions {
  readonly mode: FailureMode;
  /** Counts per instance while the backend is away (mode `local`). */
  readonly local?: MemoryLimiter;
  /** Least part of the caller's budget kept back so the fallback answer still arrives in time. */
  readonly reserveMs?: number;
  /** Share of the remaining budget kept back, when that is more than `reserveMs`. */
  readonly reserveFraction?: number;
  readonly onFallback?: (mode: FailureMode, err: Error) => void;
}

function isBackendFailure(err: unknown): err is Error {
  return err instanceof BackendUnavailableError || err instanceof DeadlineExceededError;
}

function fixedAnswer(checks: readonly LimitCheck[], allowed: boolean): LimitResult[] {
  return checks.map((c) => {
    const windowMs = c.spec.windowSeconds * 1000;
    return {
      allowed,
      used: allowed ? 0 : c.spec.limit + c.hits,
      remaining: allowed ? c.spec.limit : 0,
      resetMs: windowMs,
      retryAfterMs: allowed ? 0 : windowMs,
    };
  });
}

/**
 * Decides what a call gets when the backend cannot answer in time (BACKEND_FAILURE_MODE):
 * the error itself (so Envoy's failure_mode_deny decides), OK, OVER_LIMIT, or a per-instance
 * count in memory until the backend is back.
 */
export class FailureModeLimiter implements Limiter {
  private readonly reserveMs: number;
  private readonly reserveFraction: number;

  constructor(
    private readonly inner: Limiter,
    private readonly options: FailureModeOptions,
  ) {
    if (options.mode === 'local' && options.local === undefined) throw new Error('failure mode local needs a memory limiter');
    this.reserveMs = options.mode === 'error' ? 0 : (options.reserveMs ?? 2);
    // The fallback answer still has to be built, sent and carried back before the caller's own
    // clock runs out, and that clock started before ours (the request was in transit), while
    // our timers fire late on a busy event loop. A fixed 2 ms was not enough: during a cluster
    // failover about one allow-mode call in six reached the client after its 100 ms deadline.
    // So a share of the budget is kept back too (5 ms of Envoy's default 20 ms).
    this.reserveFraction = options.mode === 'error' ? 0 : (options.reserveFraction ?? 0.25);
  }

  async check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    const reserve = Math.max(this.reserveMs, (options.deadline - Date.now()) * this.reserveFraction);
    try {
      return await this.inner.check(checks, { ...options, deadline: options.deadline - reserve });
    } catch (err) {
      if (!isBackendFailure(err) || this.options.mode === 'error') throw err;
      this.options.onFallback?.(this.options.mode, err);
      switch (this.options.mode) {
        case 'allow':
          return fixedAnswer(checks, true);
        case 'deny':
          return fixedAnswer(checks, false);
        case 'local':
          return (this.options.local as MemoryLimiter).checkNow(checks, options.stopIncrementWhenOverLimit);
      }
    }
  }

  isHealthy(): boolean {
    return this.inner.isHealthy();
  }

  async close(): Promise<void> {
    await Promise.all([this.inner.close(), this.options.local?.close()]);
  }
}
