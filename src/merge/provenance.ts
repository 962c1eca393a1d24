import {
  annotatedVersion,
  isContentVersion,
  makeResource,
  restoreResource,
  SOURCE_ANNOTATION,
  SOURCE_VERSION_ANNOTATION,
  type ConfigResource,
  type ResourceFields,
  type Timestamp,
} from '../core/resource.js';

export { SOURCE_ANNOTATION, SOURCE_VERSION_ANNOTATION };

/**
 * What an annotated object was built from, where its source-version annotation cannot tell it:
 * the upstream versions its objects (git's commit), so the version and the source version differ.
 */
interface Built {
  readonly version: string;
  readonly sourceVersion: string;
  readonly out: ConfigResource;
}

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
   * Per kind and `namespace/name`, what served objects whose annotation cannot tell it were built
   * from (see {@link Built}): none for most sources. Keyed by the ledger's own key strings.
   */
  private readonly built = new Map<string, Map<string, Built>>();
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
   * `namespace/name` (the ledger passes the string it keeps the object under, shared here), and
   * `served` the object served under that key now, if any.
   */
  annotate(r: ConfigResource, key: string, served: ConfigResource | undefined): ConfigResource {
    // An object that already names its source came through another meshmux: its provenance is the
    // original source's, and passing it through keeps versions identical along a chain.
    if (r.annotations[SOURCE_ANNOTATION] !== undefined) return r;
    const sourceVersion = r.origin.upstreamVersion ?? r.version;
    const held = this.ours(served);
    // A creation time meshmux stamped itself yields to the one the object is served with.
    const createTime =
      r.origin.createTimeStamped === true
        ? (held?.createTime ?? this.shared.get(`${r.kind}|${key}`) ?? r.createTime)
        : r.createTime;
    if (
      held !== undefined &&
      this.builtFrom(r.kind, key, held, r.version, sourceVersion) &&
      sameTime(held.createTime, createTime)
    ) {
      return held;
    }
    const fields: ResourceFields = {
      ...r,
      createTime,
      annotations: {
        ...r.annotations,
        [SOURCE_ANNOTATION]: this.source,
        [SOURCE_VERSION_ANNOTATION]: sourceVersion,
      },
    };
    // The annotated version follows from the object's own (see `annotatedVersion`): the object is
    // not hashed a second time. Not so for an object that wrote a source version of its own.
    const out =
      isContentVersion(r.version) && r.annotations[SOURCE_VERSION_ANNOTATION] === undefined
        ? restoreResource(fields, annotatedVersion(r.version, this.source, sourceVersion))
        : makeResource(fields);
    if (sourceVersion !== r.version)
      this.builtOf(r.kind).set(key, { version: r.version, sourceVersion, out });
    else if (this.built.size > 0) this.forget(r.kind, key);
    return out;
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
    const out = restoreResource({ ...before, createTime: time }, before.version);
    const built = this.built.get(kind);
    const record = built?.get(key);
    if (record?.out === before) built?.set(key, { ...record, out });
    return out;
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

  /** Forgets what the object under `kind` and `key` (`namespace/name`) was built from: it is no longer served. */
  forget(kind: string, key: string): void {
    const built = this.built.get(kind);
    built?.delete(key);
    if (built?.size === 0) this.built.delete(kind);
  }

  /** Forgets what every object was built from (the source's objects were dropped). */
  clear(): void {
    this.built.clear();
  }

  /** `served` when this source annotated it (not an object passed through from another meshmux). */
  private ours(served: ConfigResource | undefined): ConfigResource | undefined {
    return served !== undefined && served.annotations[SOURCE_ANNOTATION] === this.source ? served : undefined;
  }

  /** Whether `held` (served, annotated here) was built from an object of `version` and `sourceVersion`. */
  private builtFrom(
    kind: string,
    key: string,
    held: ConfigResource,
    version: string,
    sourceVersion: string,
  ): boolean {
    const record = this.built.get(kind)?.get(key);
    if (record?.out === held) return record.version === version && record.sourceVersion === sourceVersion;
    const annotated = held.annotations[SOURCE_VERSION_ANNOTATION];
    return annotated === version && annotated === sourceVersion;
  }

  private builtOf(kind: string): Map<string, Built> {
    let built = this.built.get(kind);
    if (built === undefined) this.built.set(kind, (built = new Map<string, Built>()));
    return built;
  }
}
