import { DeadlineExceededError } from '../../errors';

/**
 * Orders this process' STOP-mode requests on their counters (issue 27), so that a request whose
 * counters live on several Redis servers (masters of a cluster, or REDIS_PERSECOND's second
 * server) is decided as if atomically: it looks at its counters and then charges them in two
 * rounds, and nothing of this process may touch its counters in between.
 *
 * A request on one server is decided in one atomic script call, so those run side by side
 * ("shared", never waiting for one another, and still merged into one call); a request over
 * several servers is "exclusive": it waits until every request that came before it on any of its
 * counters has ended, and every request after it on one of its counters waits for it. Each
 * counter keeps arrival order (a first-come queue per counter), and a request takes all its
 * counters at once when it arrives, so there is no deadlock. A shared request that finds no
 * exclusive one before it on its counters starts at once, in the same turn of the event loop.
 *
 * Other processes do not see this order: two pods' requests over several servers can still
 * interleave (docs/redis.md states the bound that holds then).
 */
export class StopOrdering {
  private readonly counters = new Map<string, CounterTurns>();

  /**
   * Runs `run` as a request on one server: after the exclusive requests before it on `keys`. A
   * request that waits is refused with DeadlineExceededError at `deadline` (epoch ms) if its turn
   * has not come and gone by then; it keeps its place (`run`, whose calls then find no time left,
   * ends at once).
   */
  shared<T>(keys: readonly string[], deadline: number, run: () => Promise<T>): Promise<T> {
    const waits: Promise<void>[] = [];
    const epochs: Epoch[] = [];
    for (const key of keys) {
      const turns = this.turns(key);
      if (turns.exclusive !== undefined) waits.push(turns.exclusive);
      turns.epoch ??= { running: 0, drained: undefined };
      turns.epoch.running++;
      epochs.push(turns.epoch);
    }
    const release = (): void => {
      keys.forEach((key, i) => {
        const epoch = epochs[i] as Epoch;
        if (--epoch.running === 0) epoch.drained?.resolve();
        this.forget(key);
      });
    };
    return this.after(waits, run, release, deadline);
  }

  /** Runs `run` as a request over several servers: alone on `keys`, after every request before it (`deadline` as for shared). */
  exclusive<T>(keys: readonly string[], deadline: number, run: () => Promise<T>): Promise<T> {
    const waits: Promise<void>[] = [];
    const done = deferred();
    const distinct = [...new Set(keys)];
    for (const key of distinct) {
      const turns = this.turns(key);
      if (turns.exclusive !== undefined) waits.push(turns.exclusive);
      if (turns.epoch !== undefined && turns.epoch.running > 0) waits.push((turns.epoch.drained ??= deferred()).promise);
      // The shared requests after this one wait for it, in an epoch of their own.
      turns.epoch = undefined;
      turns.exclusive = done.promise;
    }
    const release = (): void => {
      done.resolve();
      for (const key of distinct) {
        const turns = this.counters.get(key);
        if (turns?.exclusive === done.promise) turns.exclusive = undefined;
        this.forget(key);
      }
    };
    return this.after(waits, run, release, deadline);
  }

  /** Counters with a request running or waiting (tests: none left once every request ended). */
  get size(): number {
    return this.counters.size;
  }

  private after<T>(waits: Promise<void>[], run: () => Promise<T>, release: () => void, deadline: number): Promise<T> {
    if (waits.length === 0) return run().finally(release);
    const ran = Promise.all(waits).then(run).finally(release);
    return withDeadline(ran, deadline);
  }

  private turns(key: string): CounterTurns {
    let turns = this.counters.get(key);
    if (turns === undefined) this.counters.set(key, (turns = { exclusive: undefined, epoch: undefined }));
    return turns;
  }

  /** Drops a counter's entry once nothing runs or waits on it. */
  private forget(key: string): void {
    const turns = this.counters.get(key);
    if (turns !== undefined && turns.exclusive === undefined && (turns.epoch === undefined || turns.epoch.running === 0)) {
      this.counters.delete(key);
    }
  }
}

/** One counter's queue: the last exclusive request's end, and the shared requests since it. */
interface CounterTurns {
  exclusive: Promise<void> | undefined;
  epoch: Epoch | undefined;
}

/** The shared requests on a counter between two exclusive ones: how many still run, and a promise of their end (made when an exclusive one waits). */
interface Epoch {
  running: number;
  drained: Deferred | undefined;
}

interface Deferred {
  readonly promise: Promise<void>;
  readonly resolve: () => void;
}

function deferred(): Deferred {
  let resolve: () => void = () => {};
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** `promise`, or DeadlineExceededError at `deadline` (epoch ms) if it has not settled by then. */
export function withDeadline<T>(promise: Promise<T>, deadline: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new DeadlineExceededError('no turn for the request before its deadline')),
      Math.max(0, deadline - Date.now()),
    );
  });
  // The request keeps its place whatever the caller hears: its own end is not left unhandled.
  promise.catch(() => {});
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
