import type { LuaScript } from './lua-script';
import type { RedisClient } from './redis-client';

interface Waiter {
  readonly first: number;
  readonly count: number;
  readonly resolve: (reply: number[]) => void;
  readonly reject: (err: unknown) => void;
}

interface Batch {
  readonly client: RedisClient;
  readonly script: LuaScript;
  readonly mode: number;
  readonly replyWidth: number;
  readonly keys: string[];
  readonly args: (number | string)[];
  readonly waiters: Waiter[];
}

/**
 * Merges the script calls that concurrent requests make in one turn of the event loop, for the
 * same client, slot and script, into one call: under load Redis then runs one script (and
 * ioredis writes one command) for many requests. Only for calls whose keys the script handles
 * one after another, each on its own (a key that appears twice is simply counted twice), so a
 * merged call answers every request exactly as its own call would.
 */
export interface CoalescerOptions {
  /** REDIS_PIPELINE_WINDOW: how long calls are collected, in ms; 0 = until this loop turn ends. */
  readonly windowMs?: number;
  /** REDIS_PIPELINE_LIMIT: a batch with this many keys goes out at once; 0 = no limit. */
  readonly maxKeys?: number;
}

export class CallCoalescer {
  private batches = new Map<string, Batch>();
  private scheduled = false;
  private readonly windowMs: number;
  private readonly maxKeys: number;

  constructor(options: CoalescerOptions = {}) {
    this.windowMs = options.windowMs ?? 0;
    this.maxKeys = options.maxKeys ?? 0;
  }

  /**
   * Queues `keys` with their per-key `args` (without the mode) and resolves with this call's
   * part of the merged reply (`replyWidth` integers per key).
   */
  run(
    batchKey: string,
    client: RedisClient,
    script: LuaScript,
    mode: number,
    replyWidth: number,
    keys: readonly string[],
    args: readonly (number | string)[],
  ): Promise<number[]> {
    let batch = this.batches.get(batchKey);
    if (batch === undefined) {
      batch = { client, script, mode, replyWidth, keys: [], args: [mode], waiters: [] };
      this.batches.set(batchKey, batch);
    }
    const first = batch.keys.length;
    for (const k of keys) batch.keys.push(k);
    for (const a of args) batch.args.push(a);
    const reply = new Promise<number[]>((resolve, reject) => {
      (batch).waiters.push({ first, count: keys.length, resolve, reject });
    });
    if (this.maxKeys > 0 && batch.keys.length >= this.maxKeys) {
      this.batches.delete(batchKey);
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
    batch.script.run(batch.client, batch.keys, batch.args).then(
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
