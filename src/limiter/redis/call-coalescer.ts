import { DeadlineExceededError } from '../../base/errors';
import type { RedisCallObserver } from '../../metrics/redis-call-observer';
import { BreakerCall, type CircuitBreaker } from './circuit-breaker';
import type { CallMode } from './algorithm-scripts';
import type { LuaScript } from './lua-script';
import type { RedisClient } from './redis-client';

/**
 * Keys of one merged script call when REDIS_PIPELINE_LIMIT does not set another bound: enough
 * to merge the calls of a busy turn of the event loop (Redis CPU per key falls with batch size
 * up to a few hundred keys), small enough that one script call stays near a millisecond of
 * Redis time instead of holding every other client back.
 */
export const DEFAULT_MAX_KEYS_PER_CALL = 512;

export interface CoalescerOptions {
  /** REDIS_PIPELINE_WINDOW: how long calls are collected, in ms; 0 = until this loop turn ends. */
  readonly windowMs?: number;
  /** REDIS_PIPELINE_LIMIT: a batch with this many keys goes out at once; 0 = DEFAULT_MAX_KEYS_PER_CALL. */
  readonly maxKeys?: number;
  /** Operator metrics: one observation per Redis call, however many requests it serves. */
  readonly observer?: RedisCallObserver;
}

/** One request's script call to one node, slot and script; it may be merged with others. */
export interface ScriptCall {
  /** Client side, slot and algorithm: calls with the same one may be merged. */
  readonly batchKey: number;
  readonly client: RedisClient;
  readonly script: LuaScript;
  /** The script's name and the node's (`m|<node>`), for the operator metrics. */
  readonly scriptName: string;
  readonly node: string;
  /** ARGV[1]: the script's mode, by name (lua/lib/read_mode.lua). */
  readonly mode: CallMode;
  /** Integers per key in the reply. */
  readonly replyWidth: number;
  /** The breaker of the node the call goes to. */
  readonly breaker: CircuitBreaker;
  readonly keys: readonly string[];
  /**
   * The arguments after the mode: per key (and for limit_list, each list's key count first), so
   * that a merged call's arguments are its parts' appended in order.
   */
  readonly args: readonly (number | string)[];
  /** Epoch ms: the call's part is refused with DeadlineExceededError when Redis has not answered by then. */
  readonly deadline: number;
  /**
   * A Redis Cluster node's merged call (issue 20): the parts' counters may be of any slot of
   * the node, so only the first key is declared (it routes the call); `args` name each key
   * before its arguments.
   */
  readonly keysInArgs?: boolean;
}

interface Waiter {
  readonly first: number;
  readonly count: number;
  readonly deadline: number;
  readonly resolve: (reply: number[]) => void;
  readonly reject: (err: unknown) => void;
  done: boolean;
}

interface Batch {
  readonly client: RedisClient;
  readonly script: LuaScript;
  readonly scriptName: string;
  readonly node: string;
  readonly replyWidth: number;
  readonly keysInArgs: boolean;
  readonly keys: string[];
  readonly args: (number | string)[];
  readonly waiters: Waiter[];
  /** The one Redis call this batch becomes, as its node's breaker sees it. */
  readonly call: BreakerCall;
  /** The waiters' earliest deadline, and its timer once the batch is sent. */
  earliest: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Every script call of the Redis limiter goes out here, so that what surrounds a Redis call is
 * done once per call, not once per request: the node's breaker hears one outcome, the
 * operator metrics time it once, and one timer watches the deadlines of all the requests it
 * serves (a timer per request was a measurable share of a request's CPU).
 *
 * Count-mode calls (`merge`) that concurrent requests make in one turn of the event loop, for
 * the same client, slot and script (in a Redis Cluster, for fixed_window: the same node, see
 * `keysInArgs`), become one call, and so do their looks (a batch key of their own: never with a
 * count): under load Redis then runs one script (and ioredis writes one
 * command) for many requests. Only for calls whose parts the script
 * handles one after another, each on its own (fixed_window: a key, and a key that appears twice
 * is simply counted twice; limit_list: a list, all or nothing, that sees what the lists before
 * it charged), so a merged call answers every request exactly as its own call would, in the
 * order the requests joined. A merged call carries at most `maxKeys` keys (unless one request
 * alone has more); a request's part is never split.
 *
 * A request whose deadline passes before the reply is refused with DeadlineExceededError, and
 * that is all: the breaker hears the Redis call's own outcome when it ends, once however many
 * requests it serves. Only Redis' failures count (a connection error, an error reply, or no
 * reply within REDIS_TIMEOUT, which ioredis turns into an error): a caller that gives up is not
 * Redis failing, and counting it let callers with 1 ms deadlines open the breaker that every
 * caller shares. A request with no time left is refused without a call, and hands back the
 * breaker's probe it may hold.
 */
export class CallCoalescer {
  private batches = new Map<number, Batch>();
  private scheduled = false;
  private readonly windowMs: number;
  private readonly maxKeys: number;
  private readonly observer: RedisCallObserver | undefined;

  constructor(options: CoalescerOptions = {}) {
    this.windowMs = options.windowMs ?? 0;
    this.maxKeys = options.maxKeys !== undefined && options.maxKeys > 0 ? options.maxKeys : DEFAULT_MAX_KEYS_PER_CALL;
    this.observer = options.observer;
  }

  /**
   * Sends `part` (merged with others when `merge`; `extraArgs` then must be empty) and resolves
   * with this request's part of the reply: `replyWidth` integers per key. `extraArgs` follow the
   * per-key arguments of a call of its own (the tests' pinned clock).
   */
  run(part: ScriptCall, merge: boolean, extraArgs?: readonly number[]): Promise<number[]> {
    if (part.deadline <= Date.now()) {
      // No call is made: if this request was let through a half-open breaker as its probe, the
      // next one must be able to probe, or the breaker would stay closed to everyone. (When
      // another request holds the probe, this lets one more through: a rare second probe.)
      part.breaker.cancelProbe();
      return Promise.reject(new DeadlineExceededError('no time left for redis'));
    }
    if (!merge) {
      const batch = newBatch(part);
      const reply = join(batch, part);
      if (extraArgs !== undefined) for (const a of extraArgs) batch.args.push(a);
      this.send(batch);
      return reply;
    }
    let batch = this.batches.get(part.batchKey);
    if (batch !== undefined && batch.keys.length + part.keys.length > this.maxKeys) {
      // Full: it goes now, and this request starts the next one.
      this.batches.delete(part.batchKey);
      this.send(batch);
      batch = undefined;
    }
    if (batch === undefined) {
      batch = newBatch(part);
      this.batches.set(part.batchKey, batch);
    }
    const reply = join(batch, part);
    if (batch.keys.length >= this.maxKeys) {
      this.batches.delete(part.batchKey);
      this.send(batch);
    } else if (!this.scheduled) {
      this.scheduled = true;
      // By default after this turn's I/O callbacks, so that every request that arrived with
      // them joins; REDIS_PIPELINE_WINDOW waits longer for more company.
      if (this.windowMs > 0) setTimeout(() => this.flush(), this.windowMs);
      else setImmediate(() => this.flush());
    }
    return reply;
  }

  private flush(): void {
    const batches = this.batches;
    this.batches = new Map();
    this.scheduled = false;
    for (const batch of batches.values()) this.send(batch);
  }

  private send(batch: Batch): void {
    const started = this.observer === undefined ? 0 : performance.now();
    this.armDeadline(batch);
    batch.script.run(batch.client, batch.keysInArgs ? batch.keys.slice(0, 1) : batch.keys, batch.args).then(
      (reply) => {
        this.settle(batch, started);
        batch.call.succeeded();
        const w = batch.replyWidth;
        for (const waiter of batch.waiters) {
          if (!waiter.done) waiter.resolve(reply.slice(waiter.first * w, (waiter.first + waiter.count) * w));
        }
      },
      (err: unknown) => {
        this.settle(batch, started, err);
        batch.call.failed();
        for (const waiter of batch.waiters) if (!waiter.done) waiter.reject(err);
      },
    );
  }

  private settle(batch: Batch, started: number, err?: unknown): void {
    if (batch.timer !== undefined) clearTimeout(batch.timer);
    this.observer?.scriptCall(batch.scriptName, batch.node, (performance.now() - started) / 1000, err);
  }

  /** One timer per call, at its waiters' earliest deadline; it refuses those whose time is up and re-arms for the rest. */
  private armDeadline(batch: Batch): void {
    batch.timer = setTimeout(() => this.expire(batch), Math.max(0, batch.earliest - Date.now()));
  }

  private expire(batch: Batch): void {
    const now = Date.now();
    let earliest = Infinity;
    for (const waiter of batch.waiters) {
      if (waiter.done) continue;
      if (waiter.deadline <= now) {
        waiter.done = true;
        waiter.reject(new DeadlineExceededError(`redis did not answer within the deadline (${batch.scriptName} on ${batch.node})`));
      } else if (waiter.deadline < earliest) earliest = waiter.deadline;
    }
    batch.timer = undefined;
    if (earliest !== Infinity) {
      batch.earliest = earliest;
      this.armDeadline(batch);
    }
  }
}

function newBatch(part: ScriptCall): Batch {
  return {
    client: part.client,
    script: part.script,
    scriptName: part.scriptName,
    node: part.node,
    replyWidth: part.replyWidth,
    keysInArgs: part.keysInArgs === true,
    keys: [],
    args: [part.mode],
    waiters: [],
    call: new BreakerCall(part.breaker),
    earliest: part.deadline,
    timer: undefined,
  };
}

/** Adds `part`'s keys and arguments to `batch`; the promise of its part of the reply. */
function join(batch: Batch, part: ScriptCall): Promise<number[]> {
  const first = batch.keys.length;
  for (const k of part.keys) batch.keys.push(k);
  for (const a of part.args) batch.args.push(a);
  if (part.deadline < batch.earliest) batch.earliest = part.deadline;
  return new Promise<number[]>((resolve, reject) => {
    batch.waiters.push({ first, count: part.keys.length, deadline: part.deadline, resolve, reject, done: false });
  });
}
