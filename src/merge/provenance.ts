import {
  provenanceVersion,
  restoreResource,
  SOURCE_ANNOTATION,
  SOURCE_VERSION_ANNOTATION,
  withProvenance,
  type ConfigResource,
  type Timestamp,
} from '../core/resource.js';

export { SOURCE_ANNOTATION, SOURCE_VERSION_ANNOTATION };

function sameTime(a: Timestamp, b: Timestamp): boolean {
  return a.seconds === b.seconds && a.nanos === b.nanos;
}

/**
 * The provenance annotations of one source's objects, built once per object version. An object
 * re-sent, as the same instance or a new one, with the same version, source version and creation
 * time gets the annotated instance served for it back: what a source did not change keeps its
 * identity downstream. The served instance is the caller's to pass (the ledger's committed state
 * holds it): a table of them here was one more map entry per object, keyed as the ledger's.
 * An object that already names a source (it came through another meshmux) passes unchanged.
 *
 * Creation times that meshmux stamped (`origin.createTimeStamped`: files, git, ZooKeeper) are
 * sticky: while the source serves an object, including one restored from the persisted record or
 * adopted from another replica's ({@link adopt}), a new read of it keeps the served time.
 * Times an upstream gives (MCP `create_time`, `metadata.creationTimestamp`) pass as given.
 */
export class Provenance {
  /**
   * Creation times another replica serves objects under, by `kind|namespace/name` (its latest
   * record of this source): an object this replica reads only after that record arrived takes
   * its time from here. Replaced whole by each record, so it is as large as the source.
   */
  private shared = new Map<string, Timestamp>();

  /** `source` is the name written into `SOURCE_ANNOTATION`. */
  constructor(private readonly source: string) {}

  /**
   * The object as served: `r` with this source's provenance annotations. `key` is its
   * `namespace/name`, and `served` the object served under that key now, if any: returned when it
   * is what this would build (the same version, which names the content and both annotations,
   * and the same creation time).
   */
  annotate(r: ConfigResource, key: string, served: ConfigResource | undefined): ConfigResource {
    const held = this.ours(served);
    // An object that already names its source came through another meshmux (its provenance is the
    // original source's, and passing it through keeps versions identical along a chain), or was
    // annotated by this source's own reader: served as it is, or as the same object served.
    if (r.annotations[SOURCE_ANNOTATION] !== undefined)
      return held !== undefined && held.version === r.version && sameTime(held.createTime, r.createTime)
        ? held
        : r;
    // A creation time meshmux stamped itself yields to the one the object is served with.
    const createTime =
      r.origin.createTimeStamped === true
        ? (held?.createTime ?? this.shared.get(`${r.kind}|${key}`) ?? r.createTime)
        : r.createTime;
    // The annotated version follows from the object's own: the object is not hashed a second
    // time, and nothing is built when the object served is that version. Not so for an object
    // that wrote a source version of its own, which is hashed whole.
    const version = provenanceVersion(r, this.source);
    if (version !== undefined && held?.version === version && sameTime(held.createTime, createTime))
      return held;
    const out = withProvenance(r, this.source, createTime, version);
    return held !== undefined && held.version === out.version && sameTime(held.createTime, createTime)
      ? held
      : out;
  }

  /**
   * `served` (the object served under `kind` and `key`) with the creation time `time` another
   * replica serves it under, when its own time is one meshmux stamped. Returns the new annotated
   * object, or undefined when nothing changes (none served, the upstream's own time, or the same
   * time). The time is remembered for an object read later ({@link annotate}).
   */
  adopt(
    kind: string,
    key: string,
    time: Timestamp,
    served: ConfigResource | undefined,
  ): ConfigResource | undefined {
    this.shared.set(`${kind}|${key}`, time);
    const before = this.ours(served);
    if (before === undefined || before.origin.createTimeStamped !== true) return undefined;
    if (sameTime(before.createTime, time)) return undefined;
    return restoreResource({ ...before, createTime: time }, before.version);
  }

  /** Forgets the times of the last record adopted, before the next one is adopted. */
  clearShared(): void {
    this.shared = new Map();
  }

  /**
   * `r` (as the source sent it) with the creation time it is served under, for the persisted
   * record; `served` is the object served under its key, if any.
   */
  withServedTime(r: ConfigResource, served: ConfigResource | undefined): ConfigResource {
    if (r.origin.createTimeStamped !== true) return r;
    const held = this.ours(served)?.createTime;
    if (held === undefined || sameTime(held, r.createTime)) return r;
    return restoreResource({ ...r, createTime: held }, r.version);
  }

  /** `served` when this source annotated it (not an object passed through from another meshmux). */
  private ours(served: ConfigResource | undefined): ConfigResource | undefined {
    return served !== undefined && served.annotations[SOURCE_ANNOTATION] === this.source ? served : undefined;
  }
}
