import { redisFailure } from './redis-failure';
import { createHash } from 'node:crypto';
import { BackendUnavailableError, DeadlineExceededError } from '../../base/errors';
import { UNIT_SECONDS } from '../../domain/units';
import { checkKey, compactIdentity, fixedWindowKey } from '../counter-key';
import { forEachUnit, type CheckOptions, type LimitCheck, type LimitResult, type Limiter } from '../limiter';
import { referenceWindowKey, referenceWindowStart } from '../reference-key';
import { BreakerCall, type CircuitBreaker } from './circuit-breaker';
import type { RedisClient } from './redis-client';
import { RedisLimiter } from './redis-limiter';

/** The circuit breaker of the node serving a key (RedisLimiter.breakerOfKey). */
export interface KeyBreakers {
  breakerOfKey(client: RedisClient, key: string): CircuitBreaker;
}

export interface ReferenceCarryOverOptions {
  readonly client: RedisClient;
  /** CACHE_KEY_PREFIX: both layouts' keys start with it. */
  readonly keyPrefix: string;
  /**
   * Epoch ms: only a window that began before this carries over (REDIS_KEY_LAYOUT_CARRY_OVER after
   * the process started). Later windows cost nothing here.
   */
  readonly carryUntil: number;
  /** This process' clock (epoch ms), as the Redis limiter's declared keys take it; tests pin it. */
  readonly now?: () => number;
  /**
   * Windows remembered exactly at most; past it the oldest are kept as 48-bit digests, up to
   * DIGESTS_PER_ENTRY times as many (a bound on memory: forgetting one costs one GET more).
   */
  readonly maxSettled?: number;
  /** The breakers the GET and SET NX ask first; by default the inner limiter's when it is the RedisLimiter. */
  readonly breakers?: KeyBreakers;
}

/**
 * REDIS_KEY_LAYOUT_CARRY_OVER's default: windows that begin in the first 15 minutes after start
 * still carry over, which covers a rolling update's overlap; the windows in progress at start
 * always do (when above 0).
 */
export const DEFAULT_CARRY_OVER_MS = 15 * 60_000;

/**
 * REDIS_KEY_LAYOUT_UNTIL's margin: the windows that began up to this long after T carry over too,
 * for a pod whose clock runs behind the others' (they counted in the reference's key until T by
 * their clocks).
 */
export const UNTIL_CLOCK_SKEW_MS = 5_000;

/**
 * The windows carried: the reference's units longer than a minute. A window of a minute or less
 * is over soon; as lua/lib/fixed_window_step.lua's carry from the older own layout, it costs no
 * GET before every first hit (per-second rules: every request), and during a direct rollout from
 * the reference to the own layout such a window may be counted apart once (the shared layout's
 * REDIS_KEY_LAYOUT_UNTIL path switches every pod at once: exact).
 */
const CARRIED_WINDOWS: ReadonlySet<number> = new Set(Object.values(UNIT_SECONDS).filter((w) => w > 60));
// Each exact entry is a key of at most 128 characters (compactIdentity) and a number: a few MB at most.
const DEFAULT_MAX_SETTLED = 20_000;
/** Digests kept per exact entry: a number and a number each, a tenth of an exact entry's bytes or less. */
const DIGESTS_PER_ENTRY = 10;
/** Ended windows are swept from a full memory at most this often. */
const SWEEP_EVERY_MS = 1000;

/** One window to carry over: where the reference counted it, and floodgate's own key for it. */
interface Carry {
  readonly client: RedisClient;
  readonly referenceKey: string;
  readonly windowKey: string;
  /** When floodgate's window key expires (lua/lib/fixed_window_step.lua: one window after its end). */
  readonly expireAtMs: number;
  readonly breakers: KeyBreakers | undefined;
}

/**
 * Leaving the shared key layout (REDIS_KEY_LAYOUT=reference, or the reference itself) without a
 * reset (issue 30): before a fixed window of a rule the reference can express is first counted
 * in floodgate's own key by this process, the count the reference's key holds for that window
 * becomes the own key's starting value, unless the own key already exists (SET NX: another pod
 * carried it, or counted in it, first; a count never goes back). The two keys lie in different
 * hash slots (the reference's has no hash tag), so no script could read both in a Redis
 * Cluster: the carry is a GET on the reference key's node and a SET NX on the window key's,
 * before the script call, once per window and process (the windows settled are remembered until
 * they end, within maxSettled exact entries and ten times as many digests), and only for windows
 * longer than a minute that began before `carryUntil`. Every later hit of a remembered window
 * costs a Map lookup (two, with a SHA-256 of its identity, once the exact entries are full). A
 * SET NX that finds the key is a no-op, so two pods (or two requests) that carry the same window
 * at once agree. The GET and SET NX ask the breaker of the node they go to, as script calls do.
 */
export class ReferenceCarryOver implements Limiter {
  /** compactIdentity(window key) → when the window ends (epoch ms): carried, nothing more to do. Oldest first. */
  private readonly settled = new Map<string, number>();
  /** The oldest settled windows past maxSettled, as 48-bit digests of their identity → end (epoch ms). */
  private readonly digests = new Map<number, number>();
  private nextSweepMs = 0;
  private readonly breakers: KeyBreakers | undefined;
  /** Carries in flight, by the same key: concurrent first hits of a window share one. */
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly now: () => number;
  private readonly maxSettled: number;

  constructor(
    private readonly inner: Limiter,
    private readonly options: ReferenceCarryOverOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.maxSettled = options.maxSettled ?? DEFAULT_MAX_SETTLED;
    this.breakers = options.breakers ?? (inner instanceof RedisLimiter ? inner : undefined);
  }

  async check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    const nowMs = this.now();
    if (nowMs - LONGEST_WINDOW_MS < this.options.carryUntil) {
      const waits = this.carries(checks, nowMs);
      if (waits.length > 0) await withDeadline(Promise.all(waits), options.deadline);
    }
    return this.inner.check(checks, options);
  }

  isHealthy(): boolean {
    return this.inner.isHealthy();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  /** The carries `checks` wait for: those in flight and those started now. */
  private carries(checks: readonly LimitCheck[], nowMs: number): Promise<void>[] {
    const waits: Promise<void>[] = [];
    forEachUnit(checks, (first, size) => {
      // A `rate_limits` list is no rule of the reference's: it never counted one.
      if (size !== 1) return;
      const check = checks[first] as LimitCheck;
      const w = check.spec.windowSeconds;
      // Only a limit the reference can express (LimitSpec.shareable) has a key of the reference's.
      if (check.spec.shareable !== true || check.spec.algorithm !== 'fixed_window' || !CARRIED_WINDOWS.has(w)) return;
      const startMs = referenceWindowStart(w, nowMs) * 1000;
      if (startMs >= this.options.carryUntil) return;
      const windowKey = fixedWindowKey(checkKey(this.options.keyPrefix, check), w, nowMs);
      const id = compactIdentity(windowKey);
      const endMs = startMs + w * 1000;
      if (this.isSettled(id, nowMs)) return;
      let wait = this.inFlight.get(id);
      if (wait === undefined) {
        const carry: Carry = {
          // Never a SECOND window (CARRIED_WINDOWS): REDIS_PERSECOND_URL's Redis is not read.
          client: this.options.client,
          referenceKey: referenceWindowKey(this.options.keyPrefix, check.counter, w, nowMs),
          windowKey,
          expireAtMs: endMs + w * 1000,
          breakers: this.breakers,
        };
        wait = carryOver(carry).then(
          () => {
            this.inFlight.delete(id);
            this.settle(id, endMs, nowMs);
          },
          (err: unknown) => {
            this.inFlight.delete(id);
            throw err;
          },
        );
        this.inFlight.set(id, wait);
      }
      waits.push(wait);
    });
    return waits;
  }

  private isSettled(id: string, nowMs: number): boolean {
    const end = this.settled.get(id) ?? (this.digests.size > 0 ? this.digests.get(digestOf(id)) : undefined);
    return end !== undefined && end > nowMs;
  }

  /**
   * Remembers a carried window until it ends. A full memory first drops the windows that ended;
   * then the oldest exact entries become digests, and past DIGESTS_PER_ENTRY × maxSettled of
   * those the oldest digest goes (that window costs one GET more if it is hit again).
   */
  private settle(id: string, endMs: number, nowMs: number): void {
    if (this.settled.size >= this.maxSettled) {
      if (nowMs >= this.nextSweepMs) {
        this.nextSweepMs = nowMs + SWEEP_EVERY_MS;
        for (const [k, end] of this.settled) if (end <= nowMs) this.settled.delete(k);
        for (const [k, end] of this.digests) if (end <= nowMs) this.digests.delete(k);
      }
      for (const [oldest, end] of this.settled) {
        if (this.settled.size < this.maxSettled) break;
        this.settled.delete(oldest);
        if (this.digests.size >= this.maxSettled * DIGESTS_PER_ENTRY) {
          const first = this.digests.keys().next();
          if (first.done !== true) this.digests.delete(first.value);
        }
        this.digests.set(digestOf(oldest), end);
      }
    }
    this.settled.set(id, endMs);
  }
}

/**
 * 48 bits of the identity's SHA-256: two windows share one with a chance of about n / 2^48 per
 * lookup (n digests kept, 200,000 by default: under 1e-9); a window taken for carried when it
 * was not would start from floodgate's own count, as with REDIS_KEY_LAYOUT_CARRY_OVER=0.
 */
function digestOf(id: string): number {
  return createHash('sha256').update(id).digest().readUIntBE(0, 6);
}

/** The longest reference window (a year): past carryUntil by that much, no window can carry over. */
const LONGEST_WINDOW_MS = Math.max(...CARRIED_WINDOWS) * 1000;

/** One window's carry: the reference's count, when it has one, becomes the own key's start unless that exists. */
async function carryOver(carry: Carry): Promise<void> {
  let text: string | null;
  try {
    text = await guarded(carry, carry.referenceKey, () => carry.client.get(carry.referenceKey));
  } catch (err) {
    // Another application's key of another type: nothing of the reference's to carry.
    if (err instanceof Error && err.message.startsWith('WRONGTYPE')) return;
    throw redisUnavailable(err);
  }
  // The reference writes a plain count (INCRBY); anything else is not its.
  if (text === null || !/^[1-9]\d{0,15}$/.test(text)) return;
  try {
    await guarded(carry, carry.windowKey, () => carry.client.call('SET', carry.windowKey, text, 'NX', 'PXAT', String(carry.expireAtMs)));
  } catch (err) {
    throw redisUnavailable(err);
  }
}

/**
 * `command` on the node serving `key`, as the Redis limiter's script calls go: refused at once
 * while that node's circuit is open, its outcome (a reply, an error, REDIS_TIMEOUT) told to the
 * breaker. An error reply of the command itself (WRONGTYPE) is Redis answering: a success.
 */
async function guarded<T>(carry: Carry, key: string, command: () => Promise<T>): Promise<T> {
  const breaker = carry.breakers?.breakerOfKey(carry.client, key);
  if (breaker === undefined) return command();
  if (!breaker.allow())
    throw new BackendUnavailableError('backend unavailable: redis did not answer recently (circuit open; probed again shortly)');
  const call = new BreakerCall(breaker);
  try {
    const reply = await command();
    call.succeeded();
    return reply;
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('WRONGTYPE')) call.succeeded();
    else call.failed();
    throw err;
  }
}

function redisUnavailable(err: unknown): BackendUnavailableError {
  if (err instanceof BackendUnavailableError) return err;
  // The limiter's own words for the same failure: an operator (and /json's error) sees one
  // message for Redis being away, whichever step of the request met it first.
  return new BackendUnavailableError(`backend unavailable: ${redisFailure(err)}`, { cause: err });
}

/** `work`, or DeadlineExceededError once `deadline` (epoch ms) passes. */
function withDeadline<T>(work: Promise<T>, deadline: number): Promise<T> {
  const left = deadline - Date.now();
  if (!Number.isFinite(left)) return work;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceededError('deadline exceeded while carrying over the reference count')), Math.max(0, left));
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
