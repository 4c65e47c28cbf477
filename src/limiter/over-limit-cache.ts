import { performance } from 'node:perf_hooks';
import { identityOf } from './counter-key';
import { forEachUnit, type CheckOptions, type LimitCheck, type LimitResult, type Limiter } from './limiter';

// What one entry costs on the heap besides its key's characters: the Map slot, the entry object
// with its three boxed doubles, and the key string's header. Measured with process.memoryUsage()
// over 100,000 entries (test/unit/limiter/over-limit-cache.test.ts prints the figures).
const ENTRY_OVERHEAD_BYTES = 272;

/** One counter known to deny every request until `until`, with the counter's own answer. */
interface Entry {
  readonly key: string;
  /** Monotonic ms until which the counter denies every request with hits >= 1. */
  readonly until: number;
  /** Monotonic ms at which the counter is fully reset / this request would be allowed. */
  readonly resetAt: number;
  readonly retryAt: number;
  readonly used: number;
  /** Set when the counter's answer is the same at every moment (limit 0): answered as of then. */
  readonly standingSince: number | undefined;
  /** Neighbours in recency order (older / newer). */
  older: Entry | undefined;
  newer: Entry | undefined;
}

export interface OverLimitCacheOptions {
  /** LOCAL_CACHE_SIZE_IN_BYTES: the cache never holds more than this (estimated). */
  readonly maxBytes: number;
  /** Monotonic clock in ms (default performance.now): a wall-clock step must not move entries. */
  readonly now?: () => number;
  /** Called for each check answered from the cache (operator metrics). */
  readonly onHit?: () => void;
  /**
   * REDIS_KEY_LAYOUT=reference (issue 30): in STOP mode, a request with a counter known over is
   * answered as the reference answers it (src/redis/fixed_cache_impl.go getHitsAddend): the known
   * counters from here, every other one judged without being charged (CheckOptions.holdBack), so
   * that floodgate's and the reference's pods count and answer alike in one fleet. Without it
   * (floodgate's own layout) such a request goes whole to the backend's STOP rule (issue 27).
   */
  readonly holdBackBesideCached?: boolean;
}

/**
 * LOCAL_CACHE_SIZE_IN_BYTES: a counter that denies every request until T is answered here until
 * T, without the backend. Over-limit traffic is then nearly free, which is exactly the traffic
 * that is largest during an abuse spike.
 *
 * The cache's answer is always the one the counter itself would give, so it keeps only denials
 * whose `blockedForMs` says the counter stays closed to requests of every size (a Retry-After
 * alone is about one request's hits: a smaller request may still fit), for exactly that long.
 * An entry answers only the request it was made for: the same counter, limit, burst and hits
 * (the Retry-After depends on the hits). Peeks always go to the backend. Entries are timed on a
 * monotonic clock and evicted least recently used first, in O(1).
 *
 * A request's answer never depends on the cache (issue 27): it answers a unit (a check or a whole
 * `rate_limits` list) only when it knows all of it, and in STOP mode a request only when it knows
 * all of it; the rest goes to the backend as asked. The one effect left is the cache's purpose: a
 * counter it answers is not charged by the requests it answers. The one exception is the shared
 * layout's STOP mode (holdBackBesideCached), where the reference's own rule is kept instead.
 */
export class OverLimitCache implements Limiter {
  private readonly entries = new Map<string, Entry>();
  /** Least and most recently used ends of the recency list. */
  private oldest: Entry | undefined;
  private newest: Entry | undefined;
  private bytes = 0;
  private readonly now: () => number;

  constructor(
    private readonly inner: Limiter,
    private readonly options: OverLimitCacheOptions,
  ) {
    this.now = options.now ?? (() => performance.now());
  }

  get size(): number {
    return this.entries.size;
  }

  get estimatedBytes(): number {
    return this.bytes;
  }

  /**
   * Not an async function: the common answer here, every check from the cache, is then one
   * resolved promise, without an async function's frame and register file on the heap.
   */
  check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    const now = this.now();
    // An empty cache answers nothing: no key is built then but for an answer worth keeping.
    if (this.entries.size === 0) return this.checkAndKeep(checks, options, now);
    const out: Misses = {
      results: new Array<LimitResult | undefined>(checks.length),
      keys: new Array<string | undefined>(checks.length),
      misses: [],
      missIndex: [],
    };
    let anyCached: boolean;
    try {
      anyCached = this.answerFromCache(checks, now, out);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    if (out.misses.length === 0) return Promise.resolve(out.results as LimitResult[]);
    if (anyCached && options.stopIncrementWhenOverLimit) {
      // In the shared layout, as the reference: a counter known over stops every other counter of
      // the request from being charged; they are judged by their counts as they stand.
      if (this.options.holdBackBesideCached === true) return this.checkMisses(out, { ...options, holdBack: true }, now);
      // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: a request's answer is decided across all of its
      // counters (the backend looks with the hits, charges the denied checks that count every hit,
      // holds back the others), so a cached denial cannot be taken out of it: the whole request goes
      // to the backend's own STOP path, as without the cache, in the one call the misses would take
      // (issue 27). The cache saves the call when it answers every check.
      return this.checkAndKeep(checks, options, now, out.keys);
    }
    return this.checkMisses(out, options, now);
  }

  /** Every check to the backend; the denials worth keeping are kept. */
  private async checkAndKeep(
    checks: readonly LimitCheck[],
    options: CheckOptions,
    now: number,
    keys?: readonly (string | undefined)[],
  ): Promise<LimitResult[]> {
    const fresh = await this.inner.check(checks, options);
    for (let i = 0; i < fresh.length; i++) this.keepIfDenying(checks[i] as LimitCheck, fresh[i] as LimitResult, now, keys?.[i]);
    return fresh;
  }

  /**
   * Answers what the cache can into `out`, and lists the rest there; returns whether it answered
   * any. A unit, a single check or a whole `rate_limits` list, is answered here only as a whole.
   */
  private answerFromCache(checks: readonly LimitCheck[], now: number, out: Misses): boolean {
    let anyCached = false;
    forEachUnit(checks, (first, size) => {
      if (this.unitFromCache(checks, first, size, now, out)) {
        anyCached = true;
        return;
      }
      for (let i = first; i < first + size; i++) {
        out.misses.push(checks[i] as LimitCheck);
        out.missIndex.push(i);
      }
    });
    return anyCached;
  }

  /**
   * The unit of `size` checks at `first` answered from the cache into `out.results`, when every
   * one of its checks has a live entry; else nothing is answered and false returned. A list with
   * only some members cached goes to the backend whole, as asked: the backend refuses it (a member
   * is known to deny every request) and gives every member its look with its hits, the list's own
   * answer (issue 27: a limit that would deny those hits must say so, with its own remaining,
   * reset and Retry-After, which may be longer than the cached one's).
   */
  private unitFromCache(checks: readonly LimitCheck[], first: number, size: number, now: number, out: Misses): boolean {
    const entries = new Array<Entry>(size);
    for (let i = first; i < first + size; i++) {
      const check = checks[i] as LimitCheck;
      // Peeks always go to the backend.
      if (check.hits === 0) return false;
      const key = (out.keys[i] = entryKey(check));
      const entry = this.lookup(key, now);
      if (entry === undefined) return false;
      entries[i - first] = entry;
    }
    for (let j = 0; j < size; j++) {
      this.options.onHit?.();
      out.results[first + j] = answer(entries[j] as Entry, now);
    }
    return true;
  }

  /** The checks the cache could not answer, from the backend as asked, merged into `out.results`. */
  private async checkMisses(out: Misses, options: CheckOptions, now: number): Promise<LimitResult[]> {
    const { results, keys, misses, missIndex } = out;
    const fresh = await this.inner.check(misses, options);
    for (let j = 0; j < fresh.length; j++) {
      const i = missIndex[j] as number;
      results[i] = fresh[j];
      this.keepIfDenying(misses[j] as LimitCheck, fresh[j] as LimitResult, now, keys[i]);
    }
    return results as LimitResult[];
  }

  /** Keeps `result` when it denies every request for a known time (see deniesEveryRequest). */
  private keepIfDenying(check: LimitCheck, result: LimitResult, now: number, key?: string): void {
    if (check.hits > 0 && deniesEveryRequest(result)) this.remember(key ?? entryKey(check), now, result, answersAlikeAtEveryMoment(check));
  }

  isHealthy(): boolean {
    return this.inner.isHealthy();
  }

  close(): Promise<void> {
    this.entries.clear();
    this.oldest = this.newest = undefined;
    this.bytes = 0;
    return this.inner.close();
  }

  /** The live entry of `key`, made the most recently used; an expired one is dropped. */
  private lookup(key: string, now: number): Entry | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.until <= now) {
      this.forget(entry);
      return undefined;
    }
    if (entry !== this.newest) {
      this.unlink(entry);
      this.append(entry);
    }
    return entry;
  }

  /** `now` is taken before the backend was asked, so an entry never outlives the counter's state. */
  private remember(key: string, now: number, result: LimitResult, standing: boolean): void {
    const old = this.entries.get(key);
    if (old !== undefined) this.forget(old);
    const cost = entryBytes(key);
    if (cost > this.options.maxBytes) return;
    while (this.oldest !== undefined && this.bytes + cost > this.options.maxBytes) this.forget(this.oldest);
    const entry: Entry = {
      key,
      until: now + (result.blockedForMs as number),
      resetAt: now + result.resetMs,
      retryAt: now + result.retryAfterMs,
      used: result.used,
      standingSince: standing ? now : undefined,
      older: undefined,
      newer: undefined,
    };
    this.entries.set(key, entry);
    this.append(entry);
    this.bytes += cost;
  }

  private forget(entry: Entry): void {
    this.entries.delete(entry.key);
    this.unlink(entry);
    this.bytes -= entryBytes(entry.key);
  }

  private append(entry: Entry): void {
    entry.older = this.newest;
    entry.newer = undefined;
    if (this.newest !== undefined) this.newest.newer = entry;
    else this.oldest = entry;
    this.newest = entry;
  }

  private unlink(entry: Entry): void {
    if (entry.older !== undefined) entry.older.newer = entry.newer;
    else this.oldest = entry.newer;
    if (entry.newer !== undefined) entry.newer.older = entry.older;
    else this.newest = entry.older;
    entry.older = entry.newer = undefined;
  }
}

/** Where `check` collects what the cache answered and what goes on to the backend. */
interface Misses {
  readonly results: (LimitResult | undefined)[];
  readonly keys: (string | undefined)[];
  readonly misses: LimitCheck[];
  readonly missIndex: number[];
}

/**
 * Everything that decides the answer: the counter (domain, entries, algorithm, window), the
 * limit and burst (an override with another limit is another answer) and the hits (the
 * Retry-After of a denial depends on them).
 */
function entryKey(check: LimitCheck): string {
  const { spec } = check;
  // Joined into one sequential string: a key built by `+` is a tree of partial strings, which
  // would cost the heap several times its length for as long as the entry lives, and which
  // the Map's lookup, on every call, hashes more slowly than a flat one (and Number(key), the
  // flattening trick used before, did not flatten it once optimized: ~100 ns a lookup).
  return [identityOf(check), spec.limit, spec.burst, check.hits].join('|');
}

/** Only such an answer may be kept: the counter denies every request, whatever its size, for a known time. */
function deniesEveryRequest(result: LimitResult): boolean {
  return !result.allowed && result.blockedForMs !== undefined && result.blockedForMs > 0;
}

/**
 * A counter with limit 0 denies every request without state, "for a window" from any moment
 * (lua/lib/run_call.lua), except fixed_window, whose windows lie on the clock's grid: its
 * answer does not count down.
 */
function answersAlikeAtEveryMoment(check: LimitCheck): boolean {
  return check.spec.limit === 0 && check.spec.algorithm !== 'fixed_window';
}

// Any character above U+00FF (the range starts at U+0100, so no control character is named).
const TWO_BYTE = /[\u0100-\uffff]/;

/** V8 stores a string with a character above U+00FF in two bytes per character. */
function entryBytes(key: string): number {
  return (TWO_BYTE.test(key) ? 2 * key.length : key.length) + ENTRY_OVERHEAD_BYTES;
}

/** The counter's answer `entry` holds, as of `time`: still denied, its times counting down (unless standing). */
function answer(entry: Entry, time: number): LimitResult {
  const now = entry.standingSince ?? time;
  return {
    allowed: false,
    used: entry.used,
    remaining: 0,
    resetMs: Math.max(0, Math.ceil(entry.resetAt - now)),
    retryAfterMs: Math.max(0, Math.ceil(entry.retryAt - now)),
    blockedForMs: Math.ceil(entry.until - now),
    fromLocalCache: true,
  };
}
