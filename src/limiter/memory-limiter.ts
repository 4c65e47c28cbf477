import type { CheckOptions, LimitCheck, LimitResult, Limiter } from './limiter';
import { counterIdentity } from './counter-key';

interface WindowCounter {
  count: number;
  /** Epoch ms at which this window ends and the counter is dropped. */
  expiresAt: number;
}

export interface MemoryLimiterOptions {
  /** Clock in epoch ms; injectable for tests. */
  readonly now?: () => number;
  /** How often expired counters are swept, in ms. */
  readonly sweepIntervalMs?: number;
}

/**
 * In-process limiter: the same fixed-window semantics as lua/fixed_window.lua, exact under
 * concurrency because a check runs synchronously on the event loop, and bounded in memory
 * because every counter is dropped when its window ends.
 */
export class MemoryLimiter implements Limiter {
  private readonly counters = new Map<string, WindowCounter>();
  private readonly now: () => number;
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(options: MemoryLimiterOptions = {}) {
    this.now = options.now ?? Date.now;
    this.sweepTimer = setInterval(() => this.sweep(), options.sweepIntervalMs ?? 1000);
    this.sweepTimer.unref();
  }

  /** Number of live counters (for tests and the debug page). */
  get size(): number {
    return this.counters.size;
  }

  check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    return Promise.resolve(this.checkNow(checks, options.stopIncrementWhenOverLimit));
  }

  /** Synchronous core, also used by the `local` failure mode. */
  checkNow(checks: readonly LimitCheck[], stopIncrementWhenOverLimit: boolean): LimitResult[] {
    const now = this.now();
    const keys = checks.map((c) => counterIdentity(c.counter, c.spec));
    let commit = true;
    if (stopIncrementWhenOverLimit) {
      commit = checks.every((c, i) => this.current(keys[i] as string, now) + c.hits <= c.spec.limit);
    }
    return checks.map((c, i) => this.apply(keys[i] as string, c, now, commit));
  }

  isHealthy(): boolean {
    return true;
  }

  close(): Promise<void> {
    clearInterval(this.sweepTimer);
    this.counters.clear();
    return Promise.resolve();
  }

  /** Drops every counter whose window has ended. */
  sweep(): void {
    const now = this.now();
    for (const [key, counter] of this.counters) {
      if (counter.expiresAt <= now) this.counters.delete(key);
    }
  }

  private current(key: string, now: number): number {
    const counter = this.counters.get(key);
    return counter !== undefined && counter.expiresAt > now ? counter.count : 0;
  }

  private apply(key: string, check: LimitCheck, now: number, commit: boolean): LimitResult {
    const windowMs = check.spec.windowSeconds * 1000;
    const windowEnd = (Math.floor(now / windowMs) + 1) * windowMs;
    let counter = this.counters.get(key);
    if (counter !== undefined && counter.expiresAt <= now) counter = undefined;
    let used: number;
    if (!commit || check.hits === 0) {
      // A peek, or a refused all-or-nothing call, reports the count this request would reach.
      used = (counter?.count ?? 0) + check.hits;
    } else if (counter === undefined) {
      this.counters.set(key, { count: check.hits, expiresAt: windowEnd });
      used = check.hits;
    } else {
      counter.count += check.hits;
      used = counter.count;
    }
    const allowed = used <= check.spec.limit;
    const resetMs = windowEnd - now;
    return { allowed, used, remaining: Math.max(0, check.spec.limit - used), resetMs, retryAfterMs: allowed ? 0 : resetMs };
  }
}
