import { makeResource, type ConfigResource } from '../core/resource.js';

/** Annotation naming the source an object was served from. */
export const SOURCE_ANNOTATION = 'meshmux.io/source';
/** Annotation carrying the source's own version of the object (upstream version, or content hash). */
export const SOURCE_VERSION_ANNOTATION = 'meshmux.io/source-version';

/**
 * The provenance annotations of one source's objects, built once per object version. An object
 * the source re-sends as the same instance gets the same annotated instance back, and an object
 * re-sent as a new instance with the same version, source version and creation time gets the
 * previous annotated instance: what a source did not change keeps its identity downstream.
 * An object that already names a source (it came through another meshmux) passes unchanged.
 */
export class Provenance {
  /** Annotated objects by `kind|namespace/name`, with what they were built from. */
  private readonly byName = new Map<
    string,
    { readonly version: string; readonly sourceVersion: string; readonly out: ConfigResource }
  >();
  private readonly byInput = new WeakMap<ConfigResource, ConfigResource>();

  /** `source` is the name written into `SOURCE_ANNOTATION`. */
  constructor(private readonly source: string) {}

  /** The object as served: `r` with this source's provenance annotations. */
  annotate(r: ConfigResource): ConfigResource {
    // Sources that re-send unchanged objects usually re-send the same instances: a WeakMap hit is the cheap path.
    const same = this.byInput.get(r);
    if (same !== undefined) return same;
    const out = this.build(r);
    this.byInput.set(r, out);
    return out;
  }

  /** Forgets the object under `kind` and `key` (`namespace/name`): the source no longer holds it. */
  forget(kind: string, key: string): void {
    this.byName.delete(`${kind}|${key}`);
  }

  /** Forgets every object by name (the source's objects were dropped). */
  clear(): void {
    this.byName.clear();
  }

  private build(r: ConfigResource): ConfigResource {
    // An object that already names its source came through another meshmux: its provenance is the
    // original source's, and passing it through keeps versions identical along a chain.
    if (r.annotations[SOURCE_ANNOTATION] !== undefined) return r;
    const sourceVersion = r.origin.upstreamVersion ?? r.version;
    const id = `${r.kind}|${r.namespace}/${r.name}`;
    const cached = this.byName.get(id);
    if (
      cached !== undefined &&
      cached.version === r.version &&
      cached.sourceVersion === sourceVersion &&
      cached.out.createTime.seconds === r.createTime.seconds &&
      cached.out.createTime.nanos === r.createTime.nanos
    ) {
      return cached.out;
    }
    const out = makeResource({
      ...r,
      annotations: {
        ...r.annotations,
        [SOURCE_ANNOTATION]: this.source,
        [SOURCE_VERSION_ANNOTATION]: sourceVersion,
      },
    });
    this.byName.set(id, { version: r.version, sourceVersion, out });
    return out;
  }
}
