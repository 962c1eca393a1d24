import {
  sentNameOf,
  sentNameOfRead,
  type McpResourceReader,
  type ReadResult,
} from '../mcp-resource-reader.js';

/**
 * What the state-of-the-world client read before and keeps anyway, the results of its kept
 * responses, searched for an entry a response re-sends elsewhere than where it was (an upstream
 * that lists its objects in another order, or a kind's other spelling of its type URL answering
 * with the same objects): such an entry is handed back as it was read, without a decode or a new
 * object. The client's reader then keeps no map of every object by name, which the kept responses
 * made a second one of.
 *
 * Built for one response. Results added with {@link add} are searched by name, gathered only once
 * an entry is looked for (a response whose every entry was found in place costs nothing here);
 * results added with {@link addAligned} only at the entry's own position, which costs nothing to
 * look up (an upstream lists a kind in the same order under both spellings).
 */
export class EarlierReads {
  private readonly ranges: {
    readonly results: readonly ReadResult[];
    readonly from: number;
    readonly to: number;
  }[] = [];
  private readonly aligned: (readonly ReadResult[])[] = [];
  private byName: Map<string, ReadResult | ReadResult[]> | undefined;

  constructor(private readonly reader: McpResourceReader) {}

  /** Whether any result was added to look in. */
  get any(): boolean {
    return this.ranges.length > 0 || this.aligned.length > 0;
  }

  /**
   * Looks also, by name, in `results` from `from` up to `to`. Must be called before the first
   * {@link find}; `results` must stay as they are while this is used.
   */
  add(results: readonly ReadResult[], from = 0, to = results.length): void {
    if (to > from) this.ranges.push({ results, from, to });
  }

  /** Looks also in `results` at the position of the entry looked for; `results` as for {@link add}. */
  addAligned(results: readonly ReadResult[]): void {
    if (results.length > 0) this.aligned.push(results);
  }

  /**
   * The result an earlier entry of exactly these bytes was read as, or undefined when none was
   * (then the entry is read anew). `at` is the entry's position in its response.
   */
  find(envelope: Uint8Array, at: number): ReadResult | undefined {
    for (const results of this.aligned) {
      const there = results[at];
      if (there !== undefined && this.reader.readsAs(there, envelope)) return there;
    }
    if (this.ranges.length === 0) return undefined;
    const name = sentNameOf(envelope);
    if (name === undefined) return undefined;
    const seen = (this.byName ??= this.names()).get(name);
    if (seen === undefined) return undefined;
    // A name in several places (each spelling's response, one holding an older version).
    if (Array.isArray(seen)) return seen.find((r) => this.reader.readsAs(r, envelope));
    return this.reader.readsAs(seen, envelope) ? seen : undefined;
  }

  private names(): Map<string, ReadResult | ReadResult[]> {
    const byName = new Map<string, ReadResult | ReadResult[]>();
    for (const { results, from, to } of this.ranges) {
      for (let i = from; i < to; i++) {
        const result = results[i] as ReadResult;
        const name = sentNameOfRead(result);
        if (name === undefined) continue;
        const known = byName.get(name);
        if (known === undefined) byName.set(name, result);
        else if (Array.isArray(known)) known.push(result);
        else if (known !== result) byName.set(name, [known, result]);
      }
    }
    return byName;
  }
}
