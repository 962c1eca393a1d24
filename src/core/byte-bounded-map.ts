/**
 * A map bounded by the bytes its values stand for. Setting a key makes it the newest; once the
 * sizes add up to more than the bound, the oldest entries go. Reads do not change the order:
 * this holds one entry per served object, looked up for every object of every response, where
 * an LRU's bookkeeping (recency lists beside the map) was memory and work per entry.
 */
export class ByteBoundedMap<K, V> {
  private readonly entries = new Map<K, V>();
  private bytes = 0;

  /**
   * `maxBytes`: the bound on the sum of the entries' sizes. `sizeOf` is the bytes a value stands
   * for; it must answer the same for a value as long as the value is kept.
   */
  constructor(
    private readonly maxBytes: number,
    private readonly sizeOf: (value: V) => number,
  ) {}

  get(key: K): V | undefined {
    return this.entries.get(key);
  }

  /** Keeps `value` under `key`, the newest entry now; a value larger than the bound is not kept. */
  set(key: K, value: V): void {
    this.delete(key);
    const size = this.sizeOf(value);
    if (size > this.maxBytes) return;
    this.entries.set(key, value);
    this.bytes += size;
    if (this.bytes <= this.maxBytes) return;
    for (const [k, v] of this.entries) {
      if (this.bytes <= this.maxBytes) return;
      this.entries.delete(k);
      this.bytes -= this.sizeOf(v);
    }
  }

  delete(key: K): void {
    const before = this.entries.get(key);
    if (before === undefined) return;
    this.entries.delete(key);
    this.bytes -= this.sizeOf(before);
  }

  get size(): number {
    return this.entries.size;
  }
}
