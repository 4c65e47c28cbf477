interface Entry<V> {
  readonly key: string;
  value: V;
  /** Towards the least recently used end. */
  older: Entry<V> | undefined;
  /** Towards the most recently used end. */
  newer: Entry<V> | undefined;
}

/**
 * A map of at most `capacity` entries that evicts the least recently used one, every
 * operation O(1): a Map for lookup plus a doubly linked list for recency. (Re-inserting into a
 * JS Map to mark use and evicting from its front slows down as deleted slots pile up.)
 */
export class LruMap<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private oldest: Entry<V> | undefined;
  private newest: Entry<V> | undefined;

  constructor(
    private readonly capacity: number,
    private readonly onEvict: (count: number) => void = () => {},
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`LRU capacity must be a positive integer, got ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value, marked as just used. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    this.touch(entry);
    return entry.value;
  }

  /** Sets and marks as just used; evicts the least recently used entry when full. */
  set(key: string, value: V): void {
    const entry = this.entries.get(key);
    if (entry !== undefined) {
      entry.value = value;
      this.touch(entry);
      return;
    }
    if (this.entries.size >= this.capacity && this.oldest !== undefined) {
      this.remove(this.oldest);
      this.onEvict(1);
    }
    const added: Entry<V> = { key, value, older: this.newest, newer: undefined };
    if (this.newest !== undefined) this.newest.newer = added;
    this.newest = added;
    this.oldest ??= added;
    this.entries.set(key, added);
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (entry !== undefined) this.remove(entry);
  }

  /** Removes every entry for which `drop` is true (a full pass; for the periodic sweep). */
  deleteWhere(drop: (value: V) => boolean): void {
    for (let entry = this.oldest; entry !== undefined;) {
      const next = entry.newer;
      if (drop(entry.value)) this.remove(entry);
      entry = next;
    }
  }

  clear(): void {
    this.entries.clear();
    this.oldest = undefined;
    this.newest = undefined;
  }

  private touch(entry: Entry<V>): void {
    if (entry === this.newest) return;
    this.unlink(entry);
    entry.older = this.newest;
    entry.newer = undefined;
    if (this.newest !== undefined) this.newest.newer = entry;
    this.newest = entry;
    this.oldest ??= entry;
  }

  private remove(entry: Entry<V>): void {
    this.unlink(entry);
    this.entries.delete(entry.key);
  }

  private unlink(entry: Entry<V>): void {
    if (entry.older !== undefined) entry.older.newer = entry.newer;
    else this.oldest = entry.newer;
    if (entry.newer !== undefined) entry.newer.older = entry.older;
    else this.newest = entry.older;
    entry.older = undefined;
    entry.newer = undefined;
  }
}
