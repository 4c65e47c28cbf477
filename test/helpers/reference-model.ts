import type { Algorithm } from '../../src/domain/algorithm';
import type { LimitResult } from '../../src/limiter/limiter';

/**
 * The test oracle of the differential test: what every algorithm should answer, written from
 * its definition rather than from the product's code. Counts are kept per window in a map,
 * buckets as the debt they define, logs as the list of admitted times; every "time until"
 * (reset, Retry-After, blocked) is found by searching the first millisecond at which the
 * condition holds, instead of the closed formulas the scripts use. What the model shares with
 * the product is only the documented contract:
 *
 * - a call with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT looks at every check first (a counter
 *   that appears twice is judged with the hits of its earlier admitted occurrences pending,
 *   except fixed_window, which judges each occurrence on its own like the reference); when none
 *   is denied all are charged in order, else only the denied fixed_window checks are charged;
 *   a check that is not charged reports its counter as it stands (used = the count without its
 *   hits), as the reference reports a held-back key (the result of INCRBY 0); a held-back
 *   fixed_window check does so after the charges of the checks before it in the call, and is
 *   denied when that count is over its limit (the reference's one pipeline, in order);
 * - which state is kept, and until when (a state is gone once the clock has reached its
 *   expiry, for good): fixed_window and sliding_window keep the latest window written and the
 *   one before, until the window after the latest ends; a bucket keeps its debt until it would
 *   have drained at the limit of its last write, or of a later call under a lower limit (then
 *   its end moves, nothing else); a log keeps its entries until the newest has
 *   left the window; a counter's clock never goes back (buckets evaluate at the latest time
 *   they were written);
 * - the reported numbers (used, remaining, reset) are those of the README's algorithm table;
 * - a `rate_limits` list (issue 21, `callUnits`) is all or nothing: its checks are judged
 *   together and charged only when every one admits, else none is, a fixed window included;
 *   with STOP, a list is one more check that charges only admitted hits.
 */

export interface ModelCheck {
  /** The counter; the same key always comes with the same algorithm and window. */
  readonly key: string;
  readonly algorithm: Algorithm;
  readonly limit: number;
  readonly windowMs: number;
  readonly burst: number;
  readonly hits: number;
}

export type ModelResult = Required<Omit<LimitResult, 'fromLocalCache'>>;

interface WindowState {
  readonly kind: 'windows';
  /** Start of the latest window written. */
  readonly latest: number;
  /** Count per window start; only `latest` and `latest − W` are kept. */
  readonly counts: ReadonlyMap<number, number>;
  readonly expiresAt: number;
}

interface BucketState {
  readonly kind: 'bucket';
  readonly debt: number;
  readonly at: number;
  readonly expiresAt: number;
}

interface LogState {
  readonly kind: 'log';
  readonly times: readonly number[];
  readonly expiresAt: number;
}

type State = WindowState | BucketState | LogState;

interface Judged {
  readonly result: ModelResult;
  /** The state after charging; `null` = the charge is not kept; undefined = nothing charged. */
  readonly next?: State | null;
}

/** The first m in [lo, hi] with ok(m), for a predicate that stays true once it is; hi when none. */
function firstTrue(lo: number, hi: number, ok: (m: number) => boolean): number {
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (ok(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

const startOf = (t: number, w: number): number => t - (t % w);

function liveWindows(state: State | undefined, now: number): WindowState | undefined {
  return state?.kind === 'windows' && now < state.expiresAt ? state : undefined;
}

/** The counts after adding `hits` in window `ws`, keeping two windows; null when not kept. */
function addToWindow(live: WindowState | undefined, ws: number, w: number, hits: number): WindowState | null {
  if (live !== undefined && ws < live.latest - w) return null;
  const latest = live === undefined ? ws : Math.max(live.latest, ws);
  const counts = new Map<number, number>();
  for (const [start, count] of live?.counts ?? []) if (start >= latest - w) counts.set(start, count);
  counts.set(ws, (counts.get(ws) ?? 0) + hits);
  return { kind: 'windows', latest, counts, expiresAt: latest + 2 * w };
}

function fixedWindow(state: State | undefined, c: ModelCheck, now: number, charge: boolean): Judged {
  const w = c.windowMs;
  const ws = startOf(now, w);
  const live = liveWindows(state, now);
  const before = live?.counts.get(ws) ?? 0;
  const denied = before + c.hits > c.limit;
  const charged = charge && c.hits > 0;
  const used = charged ? before + c.hits : before;
  const reset = ws + w - now;
  const result: ModelResult = {
    allowed: !denied,
    used,
    remaining: Math.max(0, c.limit - used),
    resetMs: reset,
    retryAfterMs: denied ? reset : 0,
    blockedForMs: used >= c.limit ? reset : 0,
  };
  return charged ? { result, next: addToWindow(live, ws, w, c.hits) } : { result };
}

function zeroLimit(c: ModelCheck): Judged {
  const denied = c.hits > 0;
  return {
    result: { allowed: !denied, used: 0, remaining: 0, resetMs: c.windowMs, retryAfterMs: denied ? c.windowMs : 0, blockedForMs: c.windowMs },
  };
}

function slidingWindow(state: State | undefined, c: ModelCheck, now: number, pending: number, charge: boolean): Judged {
  const { limit, hits } = c;
  const w = c.windowMs;
  if (limit === 0) return zeroLimit(c);
  const ws = startOf(now, w);
  let live = liveWindows(state, now);
  const curr0 = live?.counts.get(ws) ?? 0;
  const prev = live?.counts.get(ws - w) ?? 0;
  // Whether `h` more hits fit m ms from now, the counts seen now moving on without more hits.
  const fitsIn = (m: number, curr: number, h: number): boolean => {
    const t = now + m;
    const e = t - startOf(t, w);
    const [c1, p1] = startOf(t, w) === ws ? [curr, prev] : startOf(t, w) === ws + w ? [0, curr] : [0, 0];
    return c1 + h <= limit && p1 * (w - e) + (c1 + h) * w <= limit * w;
  };
  const allowed = hits <= limit && fitsIn(0, curr0 + pending, hits);
  let curr = curr0;
  let next: State | null | undefined;
  if (allowed && charge && hits > 0) {
    curr += hits;
    next = addToWindow(live, ws, w, hits);
    if (next !== null) live = next;
  }
  const used = Math.ceil((prev * (w - (now - ws)) + curr * w) / w);
  let reset = 0;
  for (const [start, count] of live?.counts ?? []) if (count > 0) reset = Math.max(reset, start + 2 * w - now);
  let retry = 0;
  if (!allowed) retry = hits > limit ? Math.max(1, reset) : firstTrue(0, 2 * w, (m) => fitsIn(m, curr0 + pending, hits));
  const blocked = firstTrue(0, 2 * w, (m) => fitsIn(m, curr, 1));
  const result: ModelResult = {
    allowed,
    used,
    remaining: Math.max(0, limit - used),
    resetMs: reset,
    retryAfterMs: retry,
    blockedForMs: blocked,
  };
  return next === undefined ? { result } : { result, next };
}

function bucket(state: State | undefined, c: ModelCheck, now: number, pending: number, charge: boolean): Judged {
  const { limit, burst, hits } = c;
  const w = c.windowMs;
  if (limit === 0) return zeroLimit(c);
  const live = state?.kind === 'bucket' && now < state.expiresAt ? state : undefined;
  // The counter's own clock: never earlier than its last write.
  const tau = Math.max(now, live?.at ?? now);
  const ahead = tau - now;
  let debt = Math.max(0, (live?.debt ?? 0) - limit * (tau - (live?.at ?? now)));
  const capacity = burst * w;
  const debtIn = (m: number): number => Math.max(0, debt - limit * m);
  const fitsIn = (m: number, wanted: number): boolean => wanted <= burst && debtIn(m) + wanted * w <= capacity;
  const wanted = pending + hits;
  const allowed = fitsIn(0, wanted);
  let next: State | undefined;
  const drainsAt = (): number => tau + firstTrue(0, debt, (m) => debtIn(m) === 0);
  if (allowed && charge && hits > 0) {
    debt += hits * w;
    next = { kind: 'bucket', debt, at: tau, expiresAt: drainsAt() };
  } else if (live !== undefined && drainsAt() > live.expiresAt) {
    // Under a lower limit the debt drains later than the state would live: it lives until then.
    next = { ...live, expiresAt: drainsAt() };
  }
  const horizon = debt + capacity;
  const remaining = Math.max(0, Math.floor((capacity - debt) / w));
  const reset = debt > 0 ? ahead + firstTrue(0, horizon, (m) => debtIn(m) === 0) : 0;
  let retry = 0;
  if (!allowed) retry = wanted > burst ? Math.max(1, reset) : ahead + firstTrue(0, horizon, (m) => fitsIn(m, wanted));
  let blocked = 0;
  if (burst < 1) blocked = Math.max(1, reset);
  else if (!fitsIn(0, 1)) blocked = ahead + firstTrue(0, horizon, (m) => fitsIn(m, 1));
  const result: ModelResult = { allowed, used: burst - remaining, remaining, resetMs: reset, retryAfterMs: retry, blockedForMs: blocked };
  return next === undefined ? { result } : { result, next };
}

function slidingLog(state: State | undefined, c: ModelCheck, now: number, pending: number, charge: boolean): Judged {
  const { limit, hits } = c;
  const w = c.windowMs;
  if (limit === 0) return zeroLimit(c);
  const all = state?.kind === 'log' && now < state.expiresAt ? state.times : [];
  let live = all.filter((t) => t > now - w);
  // Entries (and `extra` pending ones at now) still in the window m ms from now.
  const liveIn = (m: number, extra: number): number => live.filter((t) => t > now + m - w).length + (m < w ? extra : 0);
  const wanted = pending + hits;
  const allowed = wanted <= limit && live.length + wanted <= limit;
  let next: State | undefined;
  if (allowed && charge && hits > 0) {
    live = [...live, ...Array.from({ length: hits }, () => now)].sort((a, b) => a - b);
    next = { kind: 'log', times: live, expiresAt: Math.max(...live) + w };
  }
  const count = live.length;
  const newest = count > 0 ? Math.max(...live) : now;
  const horizon = Math.max(w, newest + w - now);
  const reset = count > 0 ? newest + w - now : 0;
  let retry = 0;
  if (!allowed) retry = wanted > limit ? Math.max(1, reset) : firstTrue(0, horizon, (m) => liveIn(m, pending) + hits <= limit);
  const blocked = count >= limit ? firstTrue(0, horizon, (m) => liveIn(m, 0) + 1 <= limit) : 0;
  const result: ModelResult = {
    allowed,
    used: count,
    remaining: Math.max(0, limit - count),
    resetMs: reset,
    retryAfterMs: retry,
    blockedForMs: blocked,
  };
  return next === undefined ? { result } : { result, next };
}

/** Compile-time: every algorithm has a case above; at run time, a clear error for one that does not. */
function noModelFor(algorithm: never): never {
  throw new Error(`no model for ${String(algorithm)}`);
}

function judge(state: State | undefined, c: ModelCheck, now: number, pending: number, charge: boolean): Judged {
  switch (c.algorithm) {
    case 'fixed_window':
      return fixedWindow(state, c, now, charge);
    case 'sliding_window':
      return slidingWindow(state, c, now, pending, charge);
    case 'token_bucket':
    case 'gcra':
      return bucket(state, c, now, pending, charge);
    case 'sliding_log':
      return slidingLog(state, c, now, pending, charge);
    default:
      return noModelFor(c.algorithm);
  }
}

/** Every counter's state, and the one call protocol over it. */
export class ReferenceModel {
  private readonly states = new Map<string, State>();

  /**
   * @param fixedWindowKeys how a fixed window's counts are kept: 'latest two' (the memory
   * backend: the latest window written and the one before, in one state) or 'each window' (Redis,
   * lua/lib/fixed_window_step.lua: a key per window, as the reference's, each kept until the
   * clock reaches the end of the window after it). The two differ only when the clock steps
   * back: by two windows or more, 'latest two' keeps no count of the window stepped into, 'each
   * window' keeps it in that window's own key.
   */
  constructor(private readonly fixedWindowKeys: 'latest two' | 'each window' = 'latest two') {}

  /** The state `c` is judged against at `now`: its counter's, or with 'each window' its window's. */
  private stateKey(c: ModelCheck, now: number): string {
    return c.algorithm === 'fixed_window' && this.fixedWindowKeys === 'each window' ? `${c.key}@${startOf(now, c.windowMs)}` : c.key;
  }

  call(checks: readonly ModelCheck[], now: number, stop: boolean): ModelResult[] {
    this.expire(now);
    const charge = (c: ModelCheck): ModelResult => {
      const { result, next } = judge(this.states.get(this.stateKey(c, now)), c, now, 0, true);
      if (next === null) return result;
      if (next !== undefined) this.states.set(this.stateKey(c, now), next);
      return result;
    };
    if (!stop) return checks.map(charge);
    const looked = this.lookAt(checks, now);
    if (looked.every((r) => r.allowed)) return checks.map(charge);
    // In order, as the reference's one pipeline of INCRBY (hits or 0): a held-back fixed_window
    // check reports its counter as the charges before it left it, judged without its own hits.
    return looked.map((r, i) => {
      const c = checks[i]!;
      if (c.algorithm !== 'fixed_window') return r;
      return r.allowed ? judge(this.states.get(this.stateKey(c, now)), { ...c, hits: 0 }, now, 0, false).result : charge(c);
    });
  }

  /**
   * A call whose units are single checks (a unit of one) or `rate_limits` lists (two or more),
   * results flat in unit order. Without STOP each unit in turn: a single check is charged, a
   * list is looked at and charged only when every check of it admits. With STOP everything is
   * looked at first; when all admit all are charged, else a single fixed_window check is
   * charged when denied and, held back, reports its counter as the charges before it left it
   * (as `call`); a list is never charged, its checks report their look.
   */
  callUnits(units: readonly (readonly ModelCheck[])[], now: number, stop: boolean): ModelResult[] {
    this.expire(now);
    const charge = (c: ModelCheck): ModelResult => {
      const { result, next } = judge(this.states.get(this.stateKey(c, now)), c, now, 0, true);
      if (next) this.states.set(this.stateKey(c, now), next);
      return result;
    };
    if (!stop) {
      return units.flatMap((unit) => {
        if (unit.length === 1) return [charge(unit[0]!)];
        const looked = this.lookAt(unit, now);
        return looked.every((r) => r.allowed) ? unit.map(charge) : looked;
      });
    }
    const all = units.flat();
    const looked = this.lookAt(all, now);
    if (looked.every((r) => r.allowed)) return all.map(charge);
    const single = units.flatMap((unit) => unit.map(() => unit.length === 1));
    return looked.map((r, i) => {
      const c = all[i]!;
      if (!single[i] || c.algorithm !== 'fixed_window') return r;
      return r.allowed ? judge(this.states.get(this.stateKey(c, now)), { ...c, hits: 0 }, now, 0, false).result : charge(c);
    });
  }

  /** Judges every check with its hits and charges none: each reports its counter as it stands. */
  look(checks: readonly ModelCheck[], now: number): ModelResult[] {
    this.expire(now);
    return this.lookAt(checks, now);
  }

  /** The look-first pass: a counter that appears twice sees its earlier admitted hits pending. */
  private lookAt(checks: readonly ModelCheck[], now: number): ModelResult[] {
    const pending = new Map<string, number>();
    return checks.map((c) => {
      const { result, next } = judge(this.states.get(this.stateKey(c, now)), c, now, pending.get(c.key) ?? 0, false);
      // Nothing is charged; a bucket may only live longer (a lowered limit).
      if (next) this.states.set(this.stateKey(c, now), next);
      if (result.allowed && c.algorithm !== 'fixed_window') pending.set(c.key, (pending.get(c.key) ?? 0) + c.hits);
      return result;
    });
  }

  /**
   * Time passes for every counter: a state is gone once the clock reaches its expiry, also if
   * the clock later steps back before it (redis has removed the key by then).
   */
  private expire(now: number): void {
    for (const [key, state] of this.states) if (state.expiresAt <= now) this.states.delete(key);
  }
}
