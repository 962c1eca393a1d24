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
 * An annotated object, with the version and source version it was built from, where the two
 * differ (the upstream versions its objects: git's commit). Where they are the same (most
 * sources), the annotated object alone is kept: its source-version annotation tells both, and a
 * record beside it would be a heap object more per object.
 */
interface Built {
  readonly version: string;
  readonly sourceVersion: string;
  readonly out: ConfigResource;
}

type Held = Built | ConfigResource;

function isBuilt(held: Held): held is Built {
  return 'out' in held;
}

function outOf(held: Held): ConfigResource {
  return isBuilt(held) ? held.out : held;
}

/** Whether `held` was built from an object of `version` whose source version is `sourceVersion`. */
function builtFrom(held: Held, version: string, sourceVersion: string): boolean {
  if (isBuilt(held)) return held.version === version && held.sourceVersion === sourceVersion;
  const annotated = held.annotations[SOURCE_VERSION_ANNOTATION];
  return annotated === version && annotated === sourceVersion;
}

/**
 * The provenance annotations of one source's objects, built once per object version. An object
 * re-sent, as the same instance or a new one, with the same version, source version and creation
 * time gets the previous annotated instance back: what a source did not change keeps its identity
 * downstream. Found by kind and name, not by instance: a weak map from every object read to its
 * annotated copy was one more table entry per object, and an ephemeron for every marking of the
 * heap to visit.
 * An object that already names a source (it came through another meshmux) passes unchanged.
 *
 * Creation times that meshmux stamped (`origin.createTimeStamped`: files, git, ZooKeeper) are
 * sticky: while the source holds an object, including one restored from the persisted record or
 * adopted from another replica's ({@link adoptCreateTime}), a new read of it keeps the held time.
 * Times an upstream gives (MCP `create_time`, `metadata.creationTimestamp`) pass as given.
 */
export class Provenance {
  /**
   * Annotated objects by kind, then by `namespace/name`, with what they were built from. Keyed by
   * the ledger's own key strings: a key per object built here would be a string per object more.
   */
  private readonly byName = new Map<string, Map<string, Held>>();
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
   * `namespace/name`: the ledger passes the string it keeps the object under, which this then
   * shares instead of building one per object.
   */
  annotate(r: ConfigResource, key = `${r.namespace}/${r.name}`): ConfigResource {
    // An object that already names its source came through another meshmux: its provenance is the
    // original source's, and passing it through keeps versions identical along a chain.
    if (r.annotations[SOURCE_ANNOTATION] !== undefined) return r;
    const sourceVersion = r.origin.upstreamVersion ?? r.version;
    const built = this.builtOf(r.kind);
    const cached = built.get(key);
    // A creation time meshmux stamped itself yields to the one already held for the object.
    const createTime =
      r.origin.createTimeStamped === true
        ? ((cached === undefined ? undefined : outOf(cached).createTime) ??
          this.shared.get(`${r.kind}|${key}`) ??
          r.createTime)
        : r.createTime;
    if (cached !== undefined && builtFrom(cached, r.version, sourceVersion)) {
      const held = outOf(cached);
      if (held.createTime.seconds === createTime.seconds && held.createTime.nanos === createTime.nanos)
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
    built.set(key, sourceVersion === r.version ? out : { version: r.version, sourceVersion, out });
    return out;
  }

  /**
   * Serves the object held under `kind` and `key` with the creation time `time` another replica
   * serves it under, when its own time is one meshmux stamped. Returns the new annotated object,
   * or undefined when nothing changes (not held, the upstream's own time, or the same time).
   */
  adopt(kind: string, key: string, time: Timestamp): ConfigResource | undefined {
    this.shared.set(`${kind}|${key}`, time);
    const held = this.byName.get(kind)?.get(key);
    if (held === undefined) return undefined;
    const before = outOf(held);
    if (before.origin.createTimeStamped !== true) return undefined;
    if (before.createTime.seconds === time.seconds && before.createTime.nanos === time.nanos)
      return undefined;
    const out = restoreResource({ ...before, createTime: time }, before.version);
    this.builtOf(kind).set(key, isBuilt(held) ? { ...held, out } : out);
    return out;
  }

  /** Forgets the times of the last record adopted, before the next one is adopted. */
  clearShared(): void {
    this.shared = new Map();
  }

  /** `r` (as the source sent it) with the creation time it is served under, for the persisted record. */
  withHeldTime(r: ConfigResource): ConfigResource {
    if (r.origin.createTimeStamped !== true) return r;
    const entry = this.byName.get(r.kind)?.get(`${r.namespace}/${r.name}`);
    const held = entry === undefined ? undefined : outOf(entry).createTime;
    if (held === undefined || (held.seconds === r.createTime.seconds && held.nanos === r.createTime.nanos))
      return r;
    return restoreResource({ ...r, createTime: held }, r.version);
  }

  /** Forgets the object under `kind` and `key` (`namespace/name`): the source no longer holds it. */
  forget(kind: string, key: string): void {
    const built = this.byName.get(kind);
    built?.delete(key);
    if (built?.size === 0) this.byName.delete(kind);
  }

  /** Forgets every object by name (the source's objects were dropped). */
  clear(): void {
    this.byName.clear();
  }

  /** The built objects of a kind, by key. */
  private builtOf(kind: string): Map<string, Held> {
    let built = this.byName.get(kind);
    if (built === undefined) this.byName.set(kind, (built = new Map<string, Held>()));
    return built;
  }
}
