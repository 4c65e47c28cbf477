import { DeadlineExceededError } from '../../base/errors';

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
  /** Per counter: the end of the last exclusive request on it, while it runs or waits. */
  private readonly exclusives = new Map<string, Promise<void>>();
  /** The shared requests since the last exclusive one arrived (new ones join it). */
  private epoch: Epoch = newEpoch();
  /** Earlier epochs whose shared requests still run. */
  private readonly draining = new Set<Epoch>();

  /**
   * Runs `run` as a request on one server: after the exclusive requests before it on `keys`. A
   * request that waits is refused with DeadlineExceededError at `deadline` (epoch ms) if its turn
   * has not come and gone by then; it keeps its place (`run`, whose calls then find no time left,
   * ends at once).
   */
  shared<T>(keys: readonly string[], deadline: number, run: () => Promise<T>): Promise<T> {
    const epoch = this.epoch;
    epoch.running++;
    const release = (): void => {
      if (--epoch.running > 0) return;
      epoch.drained?.resolve();
      this.draining.delete(epoch);
    };
    // The common case, no exclusive request anywhere: a count, nothing per counter.
    if (this.exclusives.size === 0) return settle(run(), release);
    const waits: Promise<void>[] = [];
    for (const key of keys) {
      const tail = this.exclusives.get(key);
      if (tail !== undefined && !waits.includes(tail)) waits.push(tail);
    }
    if (waits.length === 0) return settle(run(), release);
    return withDeadline(settle(Promise.all(waits).then(run), release), deadline);
  }

  /**
   * Runs `run` as a request over several servers: alone on `keys`, after every request before it
   * on them (`deadline` as for shared). It waits for every shared request running when it
   * arrives, whatever its counters (counting them per counter cost every request): they end
   * within a round trip.
   */
  exclusive<T>(keys: readonly string[], deadline: number, run: () => Promise<T>): Promise<T> {
    const waits: Promise<void>[] = [];
    if (this.epoch.running > 0) {
      this.draining.add(this.epoch);
      this.epoch = newEpoch();
    }
    for (const epoch of this.draining) waits.push((epoch.drained ??= deferred()).promise);
    const done = deferred();
    const distinct = [...new Set(keys)];
    for (const key of distinct) {
      const tail = this.exclusives.get(key);
      if (tail !== undefined && !waits.includes(tail)) waits.push(tail);
      this.exclusives.set(key, done.promise);
    }
    const release = (): void => {
      done.resolve();
      for (const key of distinct) if (this.exclusives.get(key) === done.promise) this.exclusives.delete(key);
    };
    if (waits.length === 0) return settle(run(), release);
    return withDeadline(settle(Promise.all(waits).then(run), release), deadline);
  }

  /** Counters held by an exclusive request, and epochs still draining (tests: none once every request ended). */
  get size(): number {
    return this.exclusives.size + this.draining.size + this.epoch.running;
  }
}

/** `promise`, with `release` run once it settles (the request's place given up). */
function settle<T>(promise: Promise<T>, release: () => void): Promise<T> {
  promise.then(release, release);
  return promise;
}

/** Shared requests between two exclusive ones: how many still run, and a promise of their end (made when an exclusive one waits). */
interface Epoch {
  running: number;
  drained: Deferred | undefined;
}

function newEpoch(): Epoch {
  return { running: 0, drained: undefined };
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
