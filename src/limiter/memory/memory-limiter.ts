import type { CheckOptions, LimitCheck, LimitResult, Limiter } from '../limiter';
import { counterIdentity } from '../counter-key';
import type { AlgorithmState } from './memory-algorithm';
import { memoryAlgorithms } from './memory-algorithms';

export interface MemoryLimiterOptions {
  /** Clock in epoch ms; injectable for tests. */
  readonly now?: () => number;
  /** How often expired counters are swept, in ms. */
  readonly sweepIntervalMs?: number;
}

/**
 * In-process limiter: the same algorithms as lua/*.lua (one module per algorithm under
 * memory/), exact under concurrency because a check runs synchronously on the event loop, and
 * bounded in memory because every state is dropped once it is equal to a fresh counter.
 */
export class MemoryLimiter implements Limiter {
  private readonly states = new Map<string, AlgorithmState>();
  private readonly now: () => number;
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(options: MemoryLimiterOptions = {}) {
    this.now = options.now ?? Date.now;
    this.sweepTimer = setInterval(() => this.sweep(), options.sweepIntervalMs ?? 1000);
    this.sweepTimer.unref();
  }

  /** Number of live counters (for tests and the debug page). */
  get size(): number {
    return this.states.size;
  }

  check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    if (options.holdBack === true) {
      const now = this.now();
      return Promise.resolve(checks.map((c) => this.step(counterIdentity(c.counter, c.spec), c, now, false)));
    }
    return Promise.resolve(this.checkNow(checks, options.stopIncrementWhenOverLimit));
  }

  /** Synchronous core, also used by the `local` failure mode. */
  checkNow(checks: readonly LimitCheck[], stopIncrementWhenOverLimit: boolean): LimitResult[] {
    const now = this.now();
    const keys = checks.map((c) => counterIdentity(c.counter, c.spec));
    if (stopIncrementWhenOverLimit) {
      // All or nothing: look at every counter first; one denial charges none of them.
      const looked = checks.map((c, i) => this.step(keys[i] as string, c, now, false));
      if (looked.some((r) => !r.allowed)) return looked;
    }
    return checks.map((c, i) => this.step(keys[i] as string, c, now, true));
  }

  isHealthy(): boolean {
    return true;
  }

  close(): Promise<void> {
    clearInterval(this.sweepTimer);
    this.states.clear();
    return Promise.resolve();
  }

  /** Drops every state that has become equal to a fresh counter. */
  sweep(): void {
    const now = this.now();
    for (const [key, state] of this.states) {
      if (state.expiresAt <= now) this.states.delete(key);
    }
  }

  private step(key: string, check: LimitCheck, now: number, charge: boolean): LimitResult {
    let state = this.states.get(key);
    if (state !== undefined && state.expiresAt <= now) state = undefined;
    const algorithm = memoryAlgorithms[check.spec.algorithm];
    const { result, next } = algorithm.step(state, check.spec, check.hits, now, charge);
    if (next !== undefined) this.states.set(key, next);
    return result;
  }
}
