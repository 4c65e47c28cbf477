import { counterIdentity } from './counter-key';
import type { CheckOptions, LimitCheck, LimitResult, Limiter } from './limiter';

// Rough per-entry cost: the key string (UTF-16) plus the Map entry and the number.
const ENTRY_OVERHEAD_BYTES = 64;

export interface OverLimitCacheOptions {
  /** LOCAL_CACHE_SIZE_IN_BYTES: the cache never holds more than this (estimated). */
  readonly maxBytes: number;
  readonly now?: () => number;
}

/**
 * LOCAL_CACHE_SIZE_IN_BYTES: a counter known to be over its limit until T is answered here
 * until T, without the backend. Over-limit traffic is then nearly free, which is exactly the
 * traffic that is largest during an abuse spike.
 */
export class OverLimitCache implements Limiter {
  /** identity → epoch ms until which the counter stays over. Insertion order = age. */
  private readonly overUntil = new Map<string, number>();
  private bytes = 0;
  private readonly now: () => number;

  constructor(
    private readonly inner: Limiter,
    private readonly options: OverLimitCacheOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  get size(): number {
    return this.overUntil.size;
  }

  get estimatedBytes(): number {
    return this.bytes;
  }

  async check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    const now = this.now();
    const results: (LimitResult | undefined)[] = new Array<LimitResult | undefined>(checks.length);
    const keys: string[] = new Array<string>(checks.length);
    let misses: LimitCheck[] | undefined;
    let missIndex: number[] | undefined;
    for (let i = 0; i < checks.length; i++) {
      const check = checks[i] as LimitCheck;
      const key = counterIdentity(check.counter, check.spec);
      keys[i] = key;
      const until = this.overUntil.get(key);
      if (until !== undefined && until > now) {
        results[i] = { allowed: false, used: check.spec.limit + check.hits, remaining: 0, resetMs: until - now, retryAfterMs: until - now, fromLocalCache: true };
        continue;
      }
      if (until !== undefined) this.forget(key);
      (misses ??= []).push(check);
      (missIndex ??= []).push(i);
    }
    if (misses === undefined || missIndex === undefined) return results as LimitResult[];
    if (options.stopIncrementWhenOverLimit && misses.length < checks.length) {
      // One counter is already over: the rest are only looked at, not charged.
      misses = misses.map((c) => ({ ...c, hits: 0 }));
    }
    const fresh = await this.inner.check(misses, options);
    for (let j = 0; j < fresh.length; j++) {
      const i = missIndex[j] as number;
      const result = fresh[j] as LimitResult;
      results[i] = result;
      if (!result.allowed && result.retryAfterMs > 0) this.remember(keys[i] as string, now + result.retryAfterMs);
    }
    return results as LimitResult[];
  }

  isHealthy(): boolean {
    return this.inner.isHealthy();
  }

  close(): Promise<void> {
    this.overUntil.clear();
    this.bytes = 0;
    return this.inner.close();
  }

  private remember(key: string, until: number): void {
    if (this.overUntil.has(key)) this.forget(key);
    const cost = key.length * 2 + ENTRY_OVERHEAD_BYTES;
    if (cost > this.options.maxBytes) return;
    // Evict the oldest entries (the soonest to expire, as a rule) until the new one fits.
    for (const old of this.overUntil.keys()) {
      if (this.bytes + cost <= this.options.maxBytes) break;
      this.forget(old);
    }
    this.overUntil.set(key, until);
    this.bytes += cost;
  }

  private forget(key: string): void {
    if (this.overUntil.delete(key)) this.bytes -= key.length * 2 + ENTRY_OVERHEAD_BYTES;
  }
}
