import calculateSlot from 'cluster-key-slot';
import { BackendUnavailableError, DeadlineExceededError } from '../../errors';
import { CircuitBreaker } from '../circuit-breaker';
import { counterKey } from '../counter-key';
import type { CheckOptions, LimitCheck, LimitResult, Limiter } from '../limiter';
import { loadLuaScript, type LuaScript } from './lua-script';
import { isClientReady, refreshAfterFailure, type RedisClient } from './redis-client';

// lua/fixed_window.lua modes (see its header).
const MODE_COUNT_ALL = 0;
const MODE_ALL_OR_NOTHING = 1;
const REPLY_WIDTH = 4;

export interface RedisLimiterOptions {
  readonly client: RedisClient;
  /** REDIS_PERSECOND: SECOND-window counters go to this client instead. */
  readonly perSecondClient?: RedisClient;
  readonly keyPrefix: string;
  readonly breaker?: CircuitBreaker;
  /** Test hook: pins the script's clock (epoch ms) instead of Redis TIME. */
  readonly pinnedNow?: () => number;
}

/** The checks of one request that share a client and a cluster slot: one script call. */
interface SlotGroup {
  readonly client: RedisClient;
  readonly keys: string[];
  readonly indexes: number[];
}

/**
 * Counts in Redis: every check is one key, the checks of one call that share a slot go to
 * Redis as one atomic fixed_window script call, and the slot groups are sent in parallel.
 */
export class RedisLimiter implements Limiter {
  private readonly script: LuaScript = loadLuaScript('fixed_window');
  private readonly breaker: CircuitBreaker;

  constructor(private readonly options: RedisLimiterOptions) {
    this.breaker = options.breaker ?? new CircuitBreaker();
  }

  async check(checks: readonly LimitCheck[], options: CheckOptions): Promise<LimitResult[]> {
    if (!this.breaker.allow()) throw new BackendUnavailableError('redis is unavailable (circuit open)');
    const groups = this.group(checks);
    try {
      const results =
        options.stopIncrementWhenOverLimit && groups.length > 1
          ? await this.allOrNothingAcrossSlots(checks, groups, options.deadline)
          : await this.runGroups(checks, groups, options.stopIncrementWhenOverLimit ? MODE_ALL_OR_NOTHING : MODE_COUNT_ALL, options.deadline);
      this.breaker.success();
      return results;
    } catch (err) {
      this.breaker.failure();
      for (const group of groups) refreshAfterFailure(group.client);
      throw err instanceof DeadlineExceededError || err instanceof BackendUnavailableError
        ? err
        : new BackendUnavailableError(`redis: ${(err as Error).message}`, { cause: err });
    }
  }

  isHealthy(): boolean {
    const { client, perSecondClient } = this.options;
    return isClientReady(client) && (perSecondClient === undefined || isClientReady(perSecondClient));
  }

  async close(): Promise<void> {
    const clients = [this.options.client, this.options.perSecondClient].filter((c): c is RedisClient => c !== undefined);
    await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
  }

  private group(checks: readonly LimitCheck[]): SlotGroup[] {
    const { client, perSecondClient, keyPrefix } = this.options;
    const bySlot = new Map<string, SlotGroup>();
    for (let i = 0; i < checks.length; i++) {
      const check = checks[i] as LimitCheck;
      const key = counterKey(keyPrefix, check.counter, check.spec);
      const target = perSecondClient !== undefined && check.spec.windowSeconds === 1 ? perSecondClient : client;
      const groupKey = (target === client ? 'm' : 's') + calculateSlot(key);
      let group = bySlot.get(groupKey);
      if (group === undefined) {
        group = { client: target, keys: [], indexes: [] };
        bySlot.set(groupKey, group);
      }
      group.keys.push(key);
      group.indexes.push(i);
    }
    return [...bySlot.values()];
  }

  /** STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT over several slots: look first, then charge. */
  private async allOrNothingAcrossSlots(checks: readonly LimitCheck[], groups: SlotGroup[], deadline: number): Promise<LimitResult[]> {
    const peeked = await this.runGroups(checks, groups, MODE_COUNT_ALL, deadline, true);
    if (peeked.some((r) => !r.allowed)) return peeked;
    return this.runGroups(checks, groups, MODE_ALL_OR_NOTHING, deadline);
  }

  private async runGroups(checks: readonly LimitCheck[], groups: SlotGroup[], mode: number, deadline: number, peekOnly = false): Promise<LimitResult[]> {
    const results: LimitResult[] = new Array(checks.length);
    await withDeadline(
      Promise.all(groups.map((g) => this.runGroup(checks, g, mode, peekOnly, results))),
      deadline,
    );
    return results;
  }

  private async runGroup(checks: readonly LimitCheck[], group: SlotGroup, mode: number, peekOnly: boolean, out: LimitResult[]): Promise<void> {
    const args: (number | string)[] = [mode];
    for (const i of group.indexes) {
      const c = checks[i] as LimitCheck;
      args.push(peekOnly ? 0 : c.hits, c.spec.limit, c.spec.windowSeconds);
    }
    if (this.options.pinnedNow) args.push(this.options.pinnedNow());
    const reply = await this.script.run(group.client, group.keys, args);
    // In all-or-nothing mode a refused call added nothing: report what it would have reached.
    let anyOver = false;
    for (let j = 0; j < group.indexes.length; j++) if (reply[j * REPLY_WIDTH + 3] === 1) anyOver = true;
    const heldBack = peekOnly || (mode === MODE_ALL_OR_NOTHING && anyOver);
    for (let j = 0; j < group.indexes.length; j++) {
      const i = group.indexes[j] as number;
      const c = checks[i] as LimitCheck;
      const count = reply[j * REPLY_WIDTH] as number;
      const resetMs = reply[j * REPLY_WIDTH + 2] as number;
      const over = reply[j * REPLY_WIDTH + 3] === 1 || (peekOnly && count + c.hits > c.spec.limit);
      const used = heldBack ? count + c.hits : count;
      out[i] = { allowed: !over, used, remaining: Math.max(0, c.spec.limit - used), resetMs, retryAfterMs: over ? resetMs : 0 };
    }
  }
}

/** Rejects with DeadlineExceededError when `work` has not settled by `deadline` (epoch ms). */
function withDeadline<T>(work: Promise<T>, deadline: number): Promise<T> {
  const budget = deadline - Date.now();
  if (budget <= 0) {
    work.catch(() => undefined);
    return Promise.reject(new DeadlineExceededError('no time left for redis'));
  }
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DeadlineExceededError(`redis did not answer within ${budget} ms`)), budget);
    work.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e as Error);
      },
    );
  });
}
