import { BackendUnavailableError, DeadlineExceededError } from '../../base/errors';
import { UNIT_SECONDS } from '../../domain/units';
import { checkKey, compactIdentity, fixedWindowKey } from '../counter-key';
import { forEachUnit, type CheckOptions, type LimitCheck, type LimitResult, type Limiter } from '../limiter';
import { referenceWindowKey, referenceWindowStart } from '../reference-key';
import type { RedisClient } from './redis-client';

export interface ReferenceCarryOverOptions {
  readonly client: RedisClient;
  /** REDIS_PERSECOND_URL's client: the reference keeps its SECOND-unit keys there, and so does floodgate. */
  readonly perSecondClient?: RedisClient;
  /** CACHE_KEY_PREFIX: both layouts' keys start with it. */
  readonly keyPrefix: string;
  /**
   * Epoch ms: only a window that began before this carries over (REDIS_KEY_LAYOUT_CARRY_OVER after
   * the process started). Later windows cost nothing here.
   */
  readonly carryUntil: number;
  /** This process' clock (epoch ms), as the Redis limiter's declared keys take it; tests pin it. */
  readonly now?: () => number;
  /** Windows remembered as settled at most (a bound on memory: forgetting one costs one GET more). */
  readonly maxSettled?: number;
}

/**
 * REDIS_KEY_LAYOUT_CARRY_OVER's default: windows that begin in the first 15 minutes after start
 * still carry over, which covers a rolling update's overlap; the windows in progress at start
 * always do (when above 0).
 */
export const DEFAULT_CARRY_OVER_MS = 15 * 60_000;

/** The windows of the reference's units: the only ones whose keys the reference can have written. */
const REFERENCE_WINDOWS: ReadonlySet<number> = new Set(Object.values(UNIT_SECONDS));
// Each entry is a key of at most 128 characters (compactIdentity) and a number: a few MB at most.
const DEFAULT_MAX_SETTLED = 20_000;

/** One window to carry over: where the reference counted it, and floodgate's own key for it. */
interface Carry {
  readonly client: RedisClient;
  readonly referenceKey: string;
  readonly windowKey: string;
  /** When floodgate's window key expires (lua/lib/fixed_window_step.lua: one window after its end). */
  readonly expireAtMs: number;
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
 * they end), and only for windows that began before `carryUntil`. Every later hit of the window
 * costs a Map lookup. A SET NX that finds the key is a no-op, so two pods (or two requests) that
 * carry the same window at once agree.
 */
export class ReferenceCarryOver implements Limiter {
  /** compactIdentity(window key) → when the window ends (epoch ms): carried, nothing more to do. */
  private readonly settled = new Map<string, number>();
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
      if (check.spec.shareable !== true || check.spec.algorithm !== 'fixed_window' || !REFERENCE_WINDOWS.has(w)) return;
      const startMs = referenceWindowStart(w, nowMs) * 1000;
      if (startMs >= this.options.carryUntil) return;
      const windowKey = fixedWindowKey(checkKey(this.options.keyPrefix, check), w, nowMs);
      const id = compactIdentity(windowKey);
      const endMs = startMs + w * 1000;
      const until = this.settled.get(id);
      if (until !== undefined && until > nowMs) return;
      let wait = this.inFlight.get(id);
      if (wait === undefined) {
        const carry: Carry = {
          client: w === 1 && this.options.perSecondClient !== undefined ? this.options.perSecondClient : this.options.client,
          referenceKey: referenceWindowKey(this.options.keyPrefix, check.counter, w, nowMs),
          windowKey,
          expireAtMs: endMs + w * 1000,
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

  /** Remembers a carried window until it ends; a full memory first drops the windows that ended, then everything. */
  private settle(id: string, endMs: number, nowMs: number): void {
    if (this.settled.size >= this.maxSettled) {
      for (const [k, end] of this.settled) if (end <= nowMs) this.settled.delete(k);
      if (this.settled.size >= this.maxSettled) this.settled.clear();
    }
    this.settled.set(id, endMs);
  }
}

/** The longest reference window (a year): past carryUntil by that much, no window can carry over. */
const LONGEST_WINDOW_MS = Math.max(...REFERENCE_WINDOWS) * 1000;

/** One window's carry: the reference's count, when it has one, becomes the own key's start unless that exists. */
async function carryOver(carry: Carry): Promise<void> {
  let text: string | null;
  try {
    text = await carry.client.get(carry.referenceKey);
  } catch (err) {
    // Another application's key of another type: nothing of the reference's to carry.
    if (err instanceof Error && err.message.startsWith('WRONGTYPE')) return;
    throw redisUnavailable(err);
  }
  // The reference writes a plain count (INCRBY); anything else is not its.
  if (text === null || !/^[1-9]\d{0,15}$/.test(text)) return;
  try {
    await carry.client.call('SET', carry.windowKey, text, 'NX', 'PXAT', String(carry.expireAtMs));
  } catch (err) {
    throw redisUnavailable(err);
  }
}

function redisUnavailable(err: unknown): BackendUnavailableError {
  const message = err instanceof Error ? err.message : String(err);
  return new BackendUnavailableError(`backend unavailable: carrying over the reference's count: ${message}`, { cause: err });
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
