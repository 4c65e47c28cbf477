import { BreakerCall, type CircuitBreaker } from './circuit-breaker';
import type { LuaScript } from './lua-script';
import type { RedisClient } from './redis-client';

/**
 * Keys of one merged script call when REDIS_PIPELINE_LIMIT does not set another bound: enough
 * to merge the calls of a busy turn of the event loop (Redis CPU per key falls with batch size
 * up to a few hundred keys), small enough that one script call stays near a millisecond of
 * Redis time instead of holding every other client back.
 */
export const DEFAULT_MAX_KEYS_PER_CALL = 512;

interface Waiter {
  readonly first: number;
  readonly count: number;
  readonly resolve: (reply: number[]) => void;
  readonly reject: (err: unknown) => void;
}

interface Batch {
  readonly client: RedisClient;
  readonly script: LuaScript;
  readonly replyWidth: number;
  readonly keys: string[];
  readonly args: (number | string)[];
  readonly waiters: Waiter[];
  /** The one Redis call this batch becomes, as its node's breaker sees it. */
  readonly call: BreakerCall;
}

export interface CoalescerOptions {
  /** REDIS_PIPELINE_WINDOW: how long calls are collected, in ms; 0 = until this loop turn ends. */
  readonly windowMs?: number;
  /** REDIS_PIPELINE_LIMIT: a batch with this many keys goes out at once; 0 = DEFAULT_MAX_KEYS_PER_CALL. */
  readonly maxKeys?: number;
}

/** One request's part of a script call that may be merged with others. */
export interface CoalescibleCall {
  /** Client side, slot and script: calls with the same one are merged. */
  readonly batchKey: string;
  readonly client: RedisClient;
  readonly script: LuaScript;
  /** ARGV[1] of the merged call. */
  readonly mode: number;
  /** Integers per key in the reply. */
  readonly replyWidth: number;
  /** The breaker of the node the call goes to. */
  readonly breaker: CircuitBreaker;
  readonly keys: readonly string[];
  /** Per-key arguments, without the mode. */
  readonly args: readonly (number | string)[];
}

export interface CoalescedReply {
  /** This request's part of the merged reply (`replyWidth` integers per key). */
  readonly reply: Promise<number[]>;
  /** The merged Redis call: a caller whose deadline passes marks it failed (once for all). */
  readonly call: BreakerCall;
}

/**
 * Merges the script calls that concurrent requests make in one turn of the event loop, for the
 * same client, slot and script, into one call: under load Redis then runs one script (and
 * ioredis writes one command) for many requests. Only for calls whose keys the script handles
 * one after another, each on its own (a key that appears twice is simply counted twice), so a
 * merged call answers every request exactly as its own call would. A merged call carries at
 * most `maxKeys` keys (unless one request alone has more), and its outcome is one success or
 * one failure for its node's circuit breaker, not one per request it serves.
 */
export class CallCoalescer {
  private batches = new Map<string, Batch>();
  private scheduled = false;
  private readonly windowMs: number;
  private readonly maxKeys: number;

  constructor(options: CoalescerOptions = {}) {
    this.windowMs = options.windowMs ?? 0;
    this.maxKeys = options.maxKeys !== undefined && options.maxKeys > 0 ? options.maxKeys : DEFAULT_MAX_KEYS_PER_CALL;
  }

  /** Queues the keys of `part` and resolves with this request's part of the merged reply. */
  run(part: CoalescibleCall): CoalescedReply {
    let batch = this.batches.get(part.batchKey);
    if (batch !== undefined && batch.keys.length + part.keys.length > this.maxKeys) {
      // Full: it goes now, and this request starts the next one.
      this.batches.delete(part.batchKey);
      this.send(batch);
      batch = undefined;
    }
    if (batch === undefined) {
      batch = {
        client: part.client,
        script: part.script,
        replyWidth: part.replyWidth,
        keys: [],
        args: [part.mode],
        waiters: [],
        call: new BreakerCall(part.breaker),
      };
      this.batches.set(part.batchKey, batch);
    }
    const first = batch.keys.length;
    for (const k of part.keys) batch.keys.push(k);
    for (const a of part.args) batch.args.push(a);
    const open = batch;
    const reply = new Promise<number[]>((resolve, reject) => {
      open.waiters.push({ first, count: part.keys.length, resolve, reject });
    });
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
    return { reply, call: batch.call };
  }

  private flush(): void {
    const batches = this.batches;
    this.batches = new Map();
    this.scheduled = false;
    for (const batch of batches.values()) this.send(batch);
  }

  private send(batch: Batch): void {
    batch.call.track(batch.script.run(batch.client, batch.keys, batch.args)).then(
      (reply) => {
        const w = batch.replyWidth;
        for (const waiter of batch.waiters) waiter.resolve(reply.slice(waiter.first * w, (waiter.first + waiter.count) * w));
      },
      (err: unknown) => {
        for (const waiter of batch.waiters) waiter.reject(err);
      },
    );
  }
}
