import { forEachUnit, hasLists, type CheckOptions, type LimitCheck, type LimitResult, type Limiter } from '../limiter';
import { compactIdentity, identityOf } from '../counter-key';
import { CounterTable } from './counter-table';
import type { MemoryAlgorithm } from './memory-algorithm';
import { memoryAlgorithms } from './memory-algorithms';

export interface MemoryLimiterOptions {
  /** Clock in epoch ms; injectable for tests. */
  readonly now?: () => number;
  /** How often expired counters are swept, in ms. */
  readonly sweepIntervalMs?: number;
  /** Most counters kept (MEMORY_MAX_COUNTERS); beyond it the least recently used is dropped. Default: no bound but the bytes. */
  readonly maxCounters?: number;
  /** Most bytes the counters may take (MEMORY_MAX_BYTES, see counter-table.ts COUNTER_BYTES); beyond it the least recently used is dropped. */
  readonly maxBytes?: number;
  /** Called with the number of counters just evicted to make room. */
  readonly onEvict?: (count: number) => void;
}

/**
 * Bytes the counters may take when no bound is given: 64 MiB, about 330,000 counters of
 * ordinary keys, well inside the shipped pod's 256 Mi beside the rest of the process.
 */
export const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

/** A counter's key in the map: a long identity is kept as a digest (compactIdentity). */
function storageKey(check: LimitCheck): string {
  return compactIdentity(identityOf(check));
}

/**
 * In-process limiter: the same algorithms as lua/*.lua (one module per algorithm under
 * memory/), exact under concurrency because a check runs synchronously on the event loop, and
 * bounded in memory: every state is dropped once it is equal to a fresh counter, they take at
 * most `maxBytes` (and there are at most `maxCounters` of them; beyond either bound the least
 * recently used is evicted and starts again from zero), each counter is a few numbers in typed
 * arrays (counter-table.ts), and long keys are stored as digests.
 */
export class MemoryLimiter implements Limiter {
  private readonly states: CounterTable;
  private readonly now: () => number;
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(options: MemoryLimiterOptions = {}) {
    this.now = options.now ?? Date.now;
    this.states = new CounterTable({
      maxCounters: options.maxCounters ?? Infinity,
      maxBytes: options.maxBytes ?? DEFAULT_MAX_BYTES,
      ...(options.onEvict ? { onEvict: options.onEvict } : {}),
    });
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

  /**
   * Synchronous core, also used by the `local` failure mode. The call protocol of the scripts
   * (lua/lib/run_call.lua): each check in turn; with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT,
   * look at every check first (a counter that appears twice is judged with the hits of its
   * earlier admitted occurrences pending); when none is denied charge them all, else charge
   * only the denied checks of an algorithm that counts every hit (the reference's rule) and
   * answer its others with the count the charges before them left; checks of other algorithms
   * get their look. A `rate_limits` list (LimitCheck.listSize) is one unit: its checks are
   * looked at together and charged all or none, and a refused or held-back list is never
   * charged, whatever its algorithms: its checks get their look.
   */
  checkNow(checks: readonly LimitCheck[], stopIncrementWhenOverLimit: boolean): LimitResult[] {
    const now = this.now();
    const keys = checks.map(storageKey);
    const charge = (i: number): LimitResult => this.step(keys[i] as string, checks[i] as LimitCheck, now, 0, true);
    const lists = hasLists(checks);
    if (!stopIncrementWhenOverLimit) return lists ? this.countUnits(checks, keys, now) : checks.map((_, i) => charge(i));
    const looked = this.look(checks, keys, now);
    if (looked.every((r) => r.allowed)) return checks.map((_, i) => charge(i));
    // In order, as the reference's one pipeline of INCRBY: a held-back check of an algorithm that
    // counts every hit is answered with the count the charges before it left, without its own hits.
    const listed = lists ? listMembers(checks) : undefined;
    return looked.map((r, i) => {
      const check = checks[i] as LimitCheck;
      if (listed?.[i] === true || !this.algorithm(check).countsEveryHit) return r;
      return r.allowed ? this.step(keys[i] as string, { ...check, hits: 0 }, now, 0, false) : charge(i);
    });
  }

  /** Count mode with lists: each unit in turn; a list is charged only when all of it is admitted. */
  private countUnits(checks: readonly LimitCheck[], keys: readonly string[], now: number): LimitResult[] {
    const out = new Array<LimitResult>(checks.length);
    forEachUnit(checks, (first, size) => {
      const end = first + size;
      let admitted = true;
      for (let i = first; i < end; i++) {
        // Without the charge: the members' counters are distinct (rule files refuse a list whose
        // two limits share one), so no pending hits are in play.
        const result = this.step(keys[i] as string, checks[i] as LimitCheck, now, 0, size === 1);
        out[i] = result;
        admitted &&= result.allowed;
      }
      if (size === 1 || !admitted) return;
      for (let i = first; i < end; i++) out[i] = this.step(keys[i] as string, checks[i] as LimitCheck, now, 0, true);
    });
    return out;
  }

  /** Judges every check without charging; a counter that appears twice sees its earlier admitted hits pending. */
  private look(checks: readonly LimitCheck[], keys: readonly string[], now: number): LimitResult[] {
    const pending = new Map<string, number>();
    return checks.map((c, i) => {
      const key = keys[i] as string;
      const result = this.step(key, c, now, pending.get(key) ?? 0, false);
      if (result.allowed && !this.algorithm(c).countsEveryHit) pending.set(key, (pending.get(key) ?? 0) + c.hits);
      return result;
    });
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
    this.states.removeExpired(now);
  }

  private algorithm(check: LimitCheck): MemoryAlgorithm {
    return memoryAlgorithms[check.spec.algorithm];
  }

  private step(key: string, check: LimitCheck, now: number, pending: number, charge: boolean): LimitResult {
    const algorithm = this.algorithm(check);
    let slot = this.states.find(key);
    if (slot !== -1 && this.states.expiresAt(slot) <= now) {
      // Gone for good, as redis removes an expired key: a clock that steps back must not revive it.
      this.states.remove(slot);
      slot = -1;
    }
    const state = slot === -1 ? undefined : this.states.load(slot, algorithm.codec);
    const { result, next } = algorithm.step({ state, spec: check.spec, hits: check.hits, now, pending, charge });
    if (next !== undefined) this.states.store(key, slot, next, algorithm.codec);
    return result;
  }
}

/** Per check, whether it belongs to a `rate_limits` list. */
function listMembers(checks: readonly LimitCheck[]): boolean[] {
  const listed = new Array<boolean>(checks.length).fill(false);
  forEachUnit(checks, (first, size) => {
    if (size > 1) listed.fill(true, first, first + size);
  });
  return listed;
}
