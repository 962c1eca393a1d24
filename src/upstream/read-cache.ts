/**
 * Values by kind and name within the kind, bounded by the bytes they stand for. Setting a key
 * again makes it the newest; once the sizes add up to more than the bound, the oldest entries go,
 * the kind being set last. Reads do not change the order: a reader looks up every object of
 * every response, and bookkeeping per look-up would cost more than what it saves.
 *
 * Nested maps keyed by strings the values already hold (the kind registry's key, the object's
 * name) rather than one map keyed by a string built per entry, and no per-entry recency lists: the
 * cache holds one entry per upstream object for as long as the upstream serves it.
 */
export class ReadCache<V> {
  private readonly byKind = new Map<string, Map<string, V>>();
  private bytes = 0;

  /**
   * `maxBytes`: the bound on the sum of the entries' sizes. `sizeOf` is the bytes a value stands
   * for; it must answer the same for a value as long as the value is kept.
   */
  constructor(
    private readonly maxBytes: number,
    private readonly sizeOf: (value: V) => number,
  ) {}

  /** Whether anything of `kind` is kept. */
  holds(kind: string): boolean {
    return this.byKind.has(kind);
  }

  get(kind: string, name: string): V | undefined {
    return this.byKind.get(kind)?.get(name);
  }

  /** Keeps `value` under `kind` and `name`, the newest entry now; a value larger than the bound is not kept. */
  set(kind: string, name: string, value: V): void {
    // One look-up of the kind and one of the name: a first state sets every object it reads.
    let names = this.byKind.get(kind);
    const before = names?.get(name);
    if (before !== undefined) {
      (names as Map<string, V>).delete(name);
      this.bytes -= this.sizeOf(before);
    }
    const size = this.sizeOf(value);
    if (size > this.maxBytes) {
      if (names?.size === 0) this.byKind.delete(kind);
      return;
    }
    if (names === undefined) this.byKind.set(kind, (names = new Map<string, V>()));
    names.set(name, value);
    this.bytes += size;
    if (this.bytes > this.maxBytes) this.evict(kind);
  }

  /** Forgets the entry under `kind` and `name` when it is `value`; true when it was. */
  deleteIf(kind: string, name: string, value: V): boolean {
    const names = this.byKind.get(kind);
    if (names === undefined || names.get(name) !== value) return false;
    names.delete(name);
    this.bytes -= this.sizeOf(value);
    if (names.size === 0) this.byKind.delete(kind);
    return true;
  }

  /** Entries kept. */
  get size(): number {
    let n = 0;
    for (const names of this.byKind.values()) n += names.size;
    return n;
  }

  /** Drops the oldest entries, other kinds' first, until the sizes fit the bound. */
  private evict(newest: string): void {
    const order = [...this.byKind.keys()].filter((k) => k !== newest);
    order.push(newest);
    for (const kind of order) {
      const names = this.byKind.get(kind);
      if (names === undefined) continue;
      for (const [name, value] of names) {
        if (this.bytes <= this.maxBytes) return;
        names.delete(name);
        this.bytes -= this.sizeOf(value);
      }
      if (names.size === 0) this.byKind.delete(kind);
    }
  }
}
