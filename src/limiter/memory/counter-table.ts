/** What the table needs of a state (memory-algorithm.ts AlgorithmState has it). */
interface Expiring {
  readonly expiresAt: number;
}

/** Numbers a counter's state keeps besides its expiry (fixed_window: start, count, prev). */
export const STATE_CELLS = 3;

/** Where states live: numbers in one typed array, and objects for the states that are not numbers. */
export interface StateCells {
  /** STATE_CELLS numbers per slot: slot s owns values[s * STATE_CELLS ...]. */
  readonly values: Float64Array;
  /** A state that is no fixed set of numbers (sliding_log's entries), per slot. */
  readonly refs: unknown[];
}

/** How one algorithm's state is kept in a table slot, and read back. */
export interface StateCodec<S extends Expiring> {
  load(cells: StateCells, slot: number, expiresAt: number): S;
  save(state: S, cells: StateCells, slot: number): void;
  /** Bytes the state holds beyond COUNTER_BYTES (sliding_log's entries); 0 for numbers only. */
  extraBytes(state: S): number;
}

/**
 * What one counter costs in resident memory besides its key's characters, for the byte budget
 * (MEMORY_MAX_BYTES): its slots in the typed arrays (3 state cells, expiry, two recency links
 * and its size: 44 B), its key and state references (8 B), its Map entry (about 30 B with the
 * Map's spare room) and its key string's header, with the heap's own overhead on top. Measured
 * by scripts/memory-counter-size.mjs: about 190 B of RSS per counter with 41-character keys.
 */
export const COUNTER_BYTES = 160;

export interface CounterTableOptions {
  /** Most counters kept (MEMORY_MAX_COUNTERS). */
  readonly maxCounters: number;
  /** Most bytes kept, as COUNTER_BYTES + key length + extraBytes per counter (MEMORY_MAX_BYTES). */
  readonly maxBytes: number;
  /** Called with the number of counters just evicted to make room. */
  readonly onEvict?: (count: number) => void;
}

const NONE = -1;
/**
 * Slots allocated up front at most: the arrays for as many counters as the bounds allow, up to
 * this many (44 MB of address space). Zeroed memory is only made resident as slots are used,
 * so this costs nothing until then, and avoids the copies of growing (whose freed arrays the
 * allocator keeps resident); beyond it the arrays double as needed.
 */
const MAX_FIRST_CAPACITY = 1 << 20;

/**
 * The memory backend's counters, small: a Map from key to a slot number, and each slot's state
 * in typed arrays (a counter is a few numbers, not an object graph: about 190 B of RSS instead
 * of 0.5–0.9 KB). Bounded by count and by bytes; when either is full the least recently used
 * counter is evicted (a doubly linked list through the slots, every operation O(1)).
 */
export class CounterTable implements StateCells {
  values: Float64Array;
  readonly refs: unknown[] = [];
  private readonly index = new Map<string, number>();
  private keys: (string | undefined)[] = [];
  private expires: Float64Array;
  /** Towards the least recently used end; for a free slot, the next free slot. */
  private older: Int32Array;
  /** Towards the most recently used end. */
  private newer: Int32Array;
  private costs: Int32Array;
  private oldest = NONE;
  private newest = NONE;
  private freeSlot = NONE;
  /** Slots ever handed out (the rest of the capacity is untouched). */
  private used = 0;
  private bytesKept = 0;

  constructor(private readonly options: CounterTableOptions) {
    if (!(options.maxCounters >= 1)) throw new RangeError(`counter table needs maxCounters >= 1, got ${options.maxCounters}`);
    if (!(options.maxBytes >= COUNTER_BYTES)) throw new RangeError(`counter table needs maxBytes >= ${COUNTER_BYTES}, got ${options.maxBytes}`);
    const capacity = Math.max(1, Math.min(options.maxCounters, Math.floor(options.maxBytes / COUNTER_BYTES), MAX_FIRST_CAPACITY));
    this.values = new Float64Array(capacity * STATE_CELLS);
    this.expires = new Float64Array(capacity);
    this.older = new Int32Array(capacity);
    this.newer = new Int32Array(capacity);
    this.costs = new Int32Array(capacity);
  }

  get size(): number {
    return this.index.size;
  }

  /** The bytes counted against MEMORY_MAX_BYTES. */
  get bytes(): number {
    return this.bytesKept;
  }

  /** The slot of `key` (marked as just used), or -1. */
  find(key: string): number {
    const slot = this.index.get(key);
    if (slot === undefined) return NONE;
    this.touch(slot);
    return slot;
  }

  expiresAt(slot: number): number {
    return this.expires[slot] as number;
  }

  load<S extends Expiring>(slot: number, codec: StateCodec<S>): S {
    return codec.load(this, slot, this.expires[slot] as number);
  }

  /** Keeps `state` as `key`'s (in `slot` when it has one already), marked as just used; evicts when full. */
  store<S extends Expiring>(key: string, slot: number, state: S, codec: StateCodec<S>): void {
    const cost = COUNTER_BYTES + key.length + codec.extraBytes(state);
    if (slot === NONE) {
      slot = this.allocate(key);
      this.linkNewest(slot);
    } else {
      this.bytesKept -= this.costs[slot] as number;
      this.touch(slot);
    }
    codec.save(state, this, slot);
    this.expires[slot] = state.expiresAt;
    this.costs[slot] = cost;
    this.bytesKept += cost;
    this.evictOver(slot);
  }

  /** Removes `slot`'s counter. */
  remove(slot: number): void {
    this.unlink(slot);
    this.index.delete(this.keys[slot] as string);
    this.keys[slot] = undefined;
    // Only sliding logs use refs: a table without them keeps it empty.
    if (slot < this.refs.length) this.refs[slot] = undefined;
    this.bytesKept -= this.costs[slot] as number;
    this.costs[slot] = 0;
    this.older[slot] = this.freeSlot;
    this.freeSlot = slot;
  }

  /** Removes every counter that expires at or before `now` (a full pass; for the periodic sweep). */
  removeExpired(now: number): void {
    for (let slot = this.oldest; slot !== NONE;) {
      const next = this.newer[slot] as number;
      if ((this.expires[slot] as number) <= now) this.remove(slot);
      slot = next;
    }
  }

  clear(): void {
    this.index.clear();
    this.keys = [];
    this.refs.length = 0;
    this.oldest = this.newest = this.freeSlot = NONE;
    this.used = 0;
    this.bytesKept = 0;
  }

  /** Evicts the least recently used counters (never `keep`) while a bound is exceeded. */
  private evictOver(keep: number): void {
    let evicted = 0;
    while ((this.index.size > this.options.maxCounters || this.bytesKept > this.options.maxBytes) && this.oldest !== keep) {
      this.remove(this.oldest);
      evicted++;
    }
    if (evicted > 0) this.options.onEvict?.(evicted);
  }

  private allocate(key: string): number {
    let slot = this.freeSlot;
    if (slot !== NONE) this.freeSlot = this.older[slot] as number;
    else {
      if (this.used === this.expires.length) this.grow();
      slot = this.used++;
    }
    flatten(key);
    this.index.set(key, slot);
    this.keys[slot] = key;
    return slot;
  }

  private grow(): void {
    const capacity = this.expires.length * 2;
    this.values = copied(new Float64Array(capacity * STATE_CELLS), this.values);
    this.expires = copied(new Float64Array(capacity), this.expires);
    this.older = copied(new Int32Array(capacity), this.older);
    this.newer = copied(new Int32Array(capacity), this.newer);
    this.costs = copied(new Int32Array(capacity), this.costs);
  }

  private touch(slot: number): void {
    if (slot === this.newest) return;
    this.unlink(slot);
    this.linkNewest(slot);
  }

  private linkNewest(slot: number): void {
    this.older[slot] = this.newest;
    this.newer[slot] = NONE;
    if (this.newest !== NONE) this.newer[this.newest] = slot;
    this.newest = slot;
    if (this.oldest === NONE) this.oldest = slot;
  }

  private unlink(slot: number): void {
    const older = this.older[slot] as number;
    const newer = this.newer[slot] as number;
    if (older !== NONE) this.newer[older] = newer;
    else this.oldest = newer;
    if (newer !== NONE) this.older[newer] = older;
    else this.newest = older;
  }
}

/**
 * Makes V8 keep `key` as one flat string. A key built by concatenation (counterIdentity) is a
 * tree of string pieces, and a Map keeps the whole tree: about 300 B for a 40-character key
 * instead of about 56. Converting a string to a number flattens it in place (V8), and the
 * collector then drops the pieces. Once per new counter, not per lookup.
 */
function flatten(key: string): void {
  Number(key);
}

function copied<T extends Float64Array | Int32Array>(into: T, from: T): T {
  into.set(from);
  return into;
}
