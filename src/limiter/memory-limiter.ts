import { createHash } from 'node:crypto';
import type { CheckOptions, LimitCheck, LimitResult, Limiter } from './limiter';
import { counterIdentity } from './counter-key';
import { LruMap } from './memory/lru-map';
import type { AlgorithmState } from './memory/memory-algorithm';
import { memoryAlgorithms } from './memory/memory-algorithms';

export interface MemoryLimiterOptions {
  /** Clock in epoch ms; injectable for tests. */
  readonly now?: () => number;
  /** How often expired counters are swept, in ms. */
  readonly sweepIntervalMs?: number;
  /** Most counters kept (MEMORY_MAX_COUNTERS); beyond it the least recently used is dropped. */
  readonly maxCounters?: number;
  /** Called with the number of counters just evicted to make room. */
  readonly onEvict?: (count: number) => void;
}

/** Counters kept when no bound is given: some tens of MB at most. */
export const DEFAULT_MAX_COUNTERS = 100_000;

// A key is up to 32 entries of 4 KiB values: longer ones are kept as a digest, so a counter
// costs the same small key whatever the request carried. SHA-256 keeps distinct descriptors
// distinct; the `#` cannot start an identity (those start with `{`).
const MAX_PLAIN_KEY_LENGTH = 128;

function storageKey(identity: string): string {
  return identity.length <= MAX_PLAIN_KEY_LENGTH ? identity : '#' + createHash('sha256').update(identity).digest('base64');
}

/**
 * In-process limiter: the same algorithms as lua/*.lua (one module per algorithm under
 * memory/), exact under concurrency because a check runs synchronously on the event loop, and
 * bounded in memory: every state is dropped once it is equal to a fresh counter, there are at
 * most `maxCounters` of them (the least recently used is evicted and starts again from zero),
 * and long keys are stored as digests.
 */
export class MemoryLimiter implements Limiter {
  private readonly states: LruMap<AlgorithmState>;
  private readonly now: () => number;
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(options: MemoryLimiterOptions = {}) {
    this.now = options.now ?? Date.now;
    this.states = new LruMap(options.maxCounters ?? DEFAULT_MAX_COUNTERS, options.onEvict);
    this.sweepTimer = setInterval(() => this.sweep(), options.sweepIntervalMs ?? 1000);
    this.sweepTimer.unref();
  }

  /** Number of live counters (for tests and the debug page). */
  get size(): number {
    return this.states.size;
  }

  check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    return Promise.resolve(this.checkNow(checks, options.stopIncrementWhenOverLimit));
  }

  /** Synchronous core, also used by the `local` failure mode. */
  checkNow(checks: readonly LimitCheck[], stopIncrementWhenOverLimit: boolean): LimitResult[] {
    const now = this.now();
    const keys = checks.map((c) => storageKey(counterIdentity(c.counter, c.spec)));
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
    this.states.deleteWhere((state) => state.expiresAt <= now);
  }

  private step(key: string, check: LimitCheck, now: number, charge: boolean): LimitResult {
    let state = this.states.get(key);
    if (state !== undefined && state.expiresAt <= now) state = undefined;
    const algorithm = memoryAlgorithms[check.spec.algorithm];
    // Unreachable for loaded rules: checkAlgorithms refuses an algorithm that is not implemented.
    if (algorithm === undefined) throw new Error(`rate limit algorithm '${check.spec.algorithm}' is not implemented`);
    const { result, next } = algorithm.step(state, check.spec, check.hits, now, charge);
    if (next !== undefined) this.states.set(key, next);
    return result;
  }
}
