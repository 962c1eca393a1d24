import { hash } from 'node:crypto';
import { compactString } from './compact-string.js';
import { sortedKeys } from './sorted-keys.js';

/** A protobuf Timestamp in plain numbers. */
export interface Timestamp {
  readonly seconds: number;
  readonly nanos: number;
}

/** Where a resource was read from, for errors, debug pages and provenance. */
export interface ResourceOrigin {
  /** File path, URL or upstream address. */
  readonly file?: string;
  /** Zero-based document index in a YAML file. */
  readonly doc?: number;
  /** One-based line where the document starts. */
  readonly line?: number;
  /** The upstream's own version of the object (MCP `metadata.version`, git commit, ...). */
  readonly upstreamVersion?: string;
  /**
   * `createTime` was stamped by meshmux when it first read the object (the input named none), not
   * given by the upstream: the merge then keeps the creation time it already holds for the object
   * (restored from the persisted record, or shared by the replicas), so a restart or another
   * replica never serves the same object under another time.
   */
  readonly createTimeStamped?: true;
}

/**
 * One Istio config object as every layer sees it. Immutable: build a new one to change anything.
 * The body is the encoded body message (e.g. `istio.networking.v1alpha3.VirtualService`) and is
 * opaque outside the schema and downstream layers.
 */
export interface ConfigResource {
  /** Registry key of the kind, `<group>/<Kind>`, e.g. `networking.istio.io/VirtualService`. */
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  /**
   * `<namespace>/<name>`: the object's name within its kind, one string per object that every map
   * keyed by object shares, where each would build a copy of its own (see {@link nameKey}).
   */
  readonly key: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** Always set: istiod ≤1.13 drops resources without it. */
  readonly createTime: Timestamp;
  /** Encoded body message. Must not be altered. */
  readonly body: Uint8Array;
  /** Content-derived: changes if and only if kind, namespace, name, labels, annotations or body change. */
  readonly version: string;
  readonly origin: ResourceOrigin;
}

/**
 * The fields a resource is built from; `version` is derived, and so is `key` unless given (a key
 * given that is not `<namespace>/<name>` is not taken).
 */
export type ResourceFields = Omit<ConfigResource, 'version' | 'key'> & { readonly key?: string | undefined };

/**
 * `<namespace>/<name>` as a flat string: `given` when it is that already (the name as an upstream
 * sent it, the key of the resource a new one is built from), else one built.
 */
export function nameKey(namespace: string, name: string, given?: string): string {
  if (
    given !== undefined &&
    given.length === namespace.length + 1 + name.length &&
    given.charCodeAt(namespace.length) === 47 &&
    given.startsWith(namespace) &&
    given.endsWith(name)
  )
    return given;
  return compactString(`${namespace}/${name}`);
}

/** `<kind>|<namespace>/<name>`: the identity of an object across sources. */
export function resourceKey(r: Pick<ConfigResource, 'kind' | 'namespace' | 'name'>): string {
  return compactString(`${r.kind}|${r.namespace}/${r.name}`);
}

/** Namespace, then name: the order of every served list of one kind. */
export function compareByName(
  a: Pick<ConfigResource, 'namespace' | 'name'>,
  b: Pick<ConfigResource, 'namespace' | 'name'>,
): number {
  if (a.namespace !== b.namespace) return a.namespace < b.namespace ? -1 : 1;
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  return 0;
}

/**
 * Sorts `items` in place into {@link compareByName}'s order, and returns it: by namespace, each
 * namespace's objects by name. A kind's objects share a few namespaces (a reader keeps one string
 * per namespace), so they are put into one list per namespace and each list is sorted by name
 * alone: about half the comparisons of one sort by both, each of one string. Objects of one name
 * keep their order.
 */
export function sortByName<T extends Pick<ConfigResource, 'namespace' | 'name'>>(items: T[]): T[] {
  const byNamespace = new Map<string, T[]>();
  for (let i = 0; i < items.length; i++) {
    const r = items[i] as T;
    const list = byNamespace.get(r.namespace);
    if (list === undefined) byNamespace.set(r.namespace, [r]);
    else list.push(r);
  }
  // Without a comparator strings sort by their UTF-16 code units, as `<` compares them.
  const namespaces = [...byNamespace.keys()].sort();
  let at = 0;
  for (const namespace of namespaces) {
    const list = (byNamespace.get(namespace) as T[]).sort(compareNames);
    for (let i = 0; i < list.length; i++) items[at++] = list[i] as T;
  }
  return items;
}

/**
 * Two lists in {@link compareByName}'s order as one in that order, in a new array: one comparison
 * per object, where sorting them together would also bucket and copy every object. Of two objects
 * of one name, the first list's comes first.
 */
export function mergedByName<T extends Pick<ConfigResource, 'namespace' | 'name'>>(
  first: readonly T[],
  second: readonly T[],
): T[] {
  const out = new Array<T>(first.length + second.length);
  let i = 0;
  let j = 0;
  let at = 0;
  while (i < first.length && j < second.length) {
    const a = first[i] as T;
    const b = second[j] as T;
    if (compareByName(b, a) < 0) {
      out[at++] = b;
      j++;
    } else {
      out[at++] = a;
      i++;
    }
  }
  while (i < first.length) out[at++] = first[i++] as T;
  while (j < second.length) out[at++] = second[j++] as T;
  return out;
}

function compareNames(a: Pick<ConfigResource, 'name'>, b: Pick<ConfigResource, 'name'>): number {
  return a.name === b.name ? 0 : a.name < b.name ? -1 : 1;
}

/** Annotation naming the source an object was served from. */
export const SOURCE_ANNOTATION = 'meshmux.io/source';
/** Annotation carrying the source's own version of the object (upstream version, or content hash). */
export const SOURCE_VERSION_ANNOTATION = 'meshmux.io/source-version';

/**
 * The content version of a resource: the same on every replica for the same content, and
 * independent of createTime and origin (which do not reach istiod's version check).
 *
 * An object carrying both provenance annotations (as meshmux serves every object) is versioned
 * from the version of its content without them, mixed with what they say (see
 * {@link annotatedVersion}): whoever adds them to an object whose version it holds derives the
 * annotated object's version without hashing the object again, and any reader of the annotated
 * object (a meshmux one tier down, a restart reading its record) derives the same version.
 */
export function contentVersion(fields: Omit<ResourceFields, 'createTime' | 'origin'>): string {
  const source = fields.annotations[SOURCE_ANNOTATION];
  const sourceVersion = fields.annotations[SOURCE_VERSION_ANNOTATION];
  if (source !== undefined && sourceVersion !== undefined) {
    // Entries defined as own properties, whatever their key (an assignment to `__proto__` is not one).
    const annotations = Object.fromEntries(
      Object.entries(fields.annotations).filter(
        ([key]) => key !== SOURCE_ANNOTATION && key !== SOURCE_VERSION_ANNOTATION,
      ),
    );
    return annotatedVersion(hashedVersion({ ...fields, annotations }), source, sourceVersion);
  }
  return hashedVersion(fields);
}

/**
 * The content version of an object whose version is `version` once `SOURCE_ANNOTATION: source`
 * and `SOURCE_VERSION_ANNOTATION: sourceVersion` are added to it (it carries neither). `version`
 * must be a content version ({@link isContentVersion}).
 *
 * Its 120 bits XORed with 120 bits of SHA-256 over the two annotations: for one source and source
 * version a one-to-one map of the object's version, so the annotated version changes exactly when
 * the object or an annotation does; two objects of different content under different annotations
 * meet only where two SHA-256 digests differ by a given 120 bits, as unlikely as any collision of
 * the versions themselves. A source version equal to the object's own version (a source that
 * versions objects by content, nearly all) is hashed as that fact, so the mask is one per source.
 */
export function annotatedVersion(version: string, source: string, sourceVersion: string): string {
  const mask = maskOf(source, sourceVersion, sourceVersion === version);
  // Written into bytes and read out as one flat string: a string grown a digit at a time would
  // be kept as a chain of pieces.
  for (let i = 0; i < CONTENT_VERSION_LENGTH; i++) {
    const value = DIGIT_VALUES[version.charCodeAt(i)] as number;
    digitScratch[i] = DIGITS.charCodeAt(value ^ (mask[i] as number));
  }
  return digitScratch.toString('latin1', 0, CONTENT_VERSION_LENGTH);
}

/** Per source, the mask of an object versioned by content, its own version its source version. */
let ownMasks = new Map<string, Uint8Array>();

/** The mask {@link annotatedVersion} XORs a version with. */
function maskOf(source: string, sourceVersion: string, ownVersion: boolean): Uint8Array {
  if (ownVersion) {
    const own = ownMasks.get(source);
    if (own !== undefined) return own;
  }
  const maskKey = ownVersion ? `=${source}` : `~${source}\0${sourceVersion}`;
  let mask = masks.get(maskKey);
  if (mask === undefined) {
    // The source's length first: no two pairs of source and source version hash the same text.
    const text = `meshmux provenance\0${source.length}\0${source}${ownVersion ? '\x01' : `\x02${sourceVersion}`}`;
    const digest = hash('sha256', text, 'buffer');
    mask = new Uint8Array(CONTENT_VERSION_LENGTH);
    // Base64url digits of the digest's first 15 bytes: 6 bits each, the same bits as XORing bytes.
    const digits = digest.toString('base64url', 0, 15);
    for (let i = 0; i < CONTENT_VERSION_LENGTH; i++) mask[i] = DIGIT_VALUES[digits.charCodeAt(i)] as number;
    if (masks.size >= MAX_MASKS) {
      masks.clear();
      ownMasks = new Map();
    }
    masks.set(maskKey, mask);
  }
  if (ownVersion) ownMasks.set(source, mask);
  return mask;
}

/**
 * Whether `version` is {@link annotatedVersion}`(sourceVersion, source, sourceVersion)`: the version
 * of an object versioned by content once `source`'s provenance names it. Builds no string.
 */
function isOwnAnnotatedVersion(version: string, source: string, sourceVersion: string): boolean {
  if (version.length !== CONTENT_VERSION_LENGTH || sourceVersion.length !== CONTENT_VERSION_LENGTH)
    return false;
  const mask = maskOf(source, sourceVersion, true);
  for (let i = 0; i < CONTENT_VERSION_LENGTH; i++) {
    const code = sourceVersion.charCodeAt(i);
    // Not a digit of a content version: no content version's mask applies.
    if (code >= 128 || (DIGIT_VALUES[code] === 0 && code !== DIGITS.charCodeAt(0))) return false;
    const expected = DIGITS.charCodeAt((DIGIT_VALUES[code] as number) ^ (mask[i] as number));
    if (version.charCodeAt(i) !== expected) return false;
  }
  return true;
}

const digitScratch = Buffer.alloc(20);

/** Masks of {@link annotatedVersion} by source (and source version where it is not the object's own). */
const masks = new Map<string, Uint8Array>();
/** Sources times the source versions in use at once (git: a commit per source); cleared past this. */
const MAX_MASKS = 1024;
const DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
/** The value of each base64url digit by its character code. */
const DIGIT_VALUES = ((): Uint8Array => {
  const values = new Uint8Array(128);
  for (let i = 0; i < DIGITS.length; i++) values[DIGITS.charCodeAt(i)] = i;
  return values;
})();

/** SHA-256 over the object's text and body: the content version of an object without provenance. */
function hashedVersion(fields: Omit<ResourceFields, 'createTime' | 'origin'>): string {
  // The text: kind, namespace and name, then each map as its size and its entries in key order,
  // NUL-separated, the maps closed by \x01 and \x02 (every part after the first starts with a digit
  // or a control character, so its UTF-8 is the parts' UTF-8 in a row, byte for byte); then the body.
  const { labels, annotations, body } = fields;
  const labelKeys = sortedKeys(labels);
  const annotationKeys = sortedKeys(annotations);
  let units = fields.kind.length + fields.namespace.length + fields.name.length + 32;
  for (const k of labelKeys) units += k.length + (labels[k] ?? '').length + 2;
  for (const k of annotationKeys) units += k.length + (annotations[k] ?? '').length + 2;
  // Written part by part and hashed in one call: no text is built (a string per object, and its
  // flattening), nor a hash object. Small objects (nearly all) go into the scratch buffer, large
  // ones into a buffer of their own.
  const size = 3 * units + body.byteLength;
  const out = size <= scratch.byteLength ? scratch : Buffer.allocUnsafe(size);
  let at = put(out, fields.kind, 0);
  out[at++] = 0;
  at = put(out, fields.namespace, at);
  out[at++] = 0;
  at = put(out, fields.name, at);
  out[at++] = 0;
  at = putMap(out, labels, labelKeys, at);
  out[at++] = 1;
  at = putMap(out, annotations, annotationKeys, at);
  out[at++] = 2;
  out.set(body, at);
  // The digest as text of one character per byte ('binary' is latin1): no buffer is made for it (a
  // buffer per object, with memory of its own, cost as much again as the hash).
  const digest = hash('sha256', out.subarray(0, at + body.byteLength), 'binary');
  return base64urlOf15(digest);
}

/**
 * The base64url digits of the first 15 bytes of `bytes` (one character per byte): the first 20
 * characters of its whole base64url, as one flat string, where slicing the whole encoding would
 * keep all 43 characters behind a slice.
 */
function base64urlOf15(bytes: string): string {
  for (let i = 0, o = 0; i < 15; i += 3, o += 4) {
    const n = (bytes.charCodeAt(i) << 16) | (bytes.charCodeAt(i + 1) << 8) | bytes.charCodeAt(i + 2);
    digitScratch[o] = DIGITS.charCodeAt(n >>> 18);
    digitScratch[o + 1] = DIGITS.charCodeAt((n >>> 12) & 63);
    digitScratch[o + 2] = DIGITS.charCodeAt((n >>> 6) & 63);
    digitScratch[o + 3] = DIGITS.charCodeAt(n & 63);
  }
  return digitScratch.toString('latin1', 0, CONTENT_VERSION_LENGTH);
}

/**
 * Writes `text` as UTF-8 into `out` at `at`; returns where it ends. ASCII a byte at a time, the
 * rest from the first character that is not by Node's encoder: a call per part costs more than
 * the loop, and ASCII is what names and labels are made of.
 */
function put(out: Buffer, text: string, at: number): number {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) return at + out.write(text.slice(i), at, 'utf8');
    out[at++] = c;
  }
  return at;
}

/** Writes a map's part of the hashed text (its size, then each entry in `keys`' order) at `at`; returns where it ends. */
function putMap(
  out: Buffer,
  map: Readonly<Record<string, string>>,
  keys: readonly string[],
  at: number,
): number {
  at = put(out, String(keys.length), at);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i] as string;
    out[at++] = 0;
    at = put(out, k, at);
    out[at++] = 0;
    at = put(out, map[k] ?? '', at);
  }
  return at;
}

/** Characters of a {@link contentVersion}: base64url digits of its first 15 bytes (120 bits). */
export const CONTENT_VERSION_LENGTH = 20;
const CONTENT_VERSION = /^[A-Za-z0-9_-]+$/;

/**
 * Whether `version` has the shape of a {@link contentVersion} (every version meshmux derives or
 * persists does; hand-built objects may carry any). Such a version names its object: kind,
 * namespace and name are hashed into it with the rest of its content.
 */
export function isContentVersion(version: string): boolean {
  return version.length === CONTENT_VERSION_LENGTH && CONTENT_VERSION.test(version);
}

/** Where {@link contentVersion} lays out an object's text and body to hash them in one call. */
const scratch = Buffer.allocUnsafeSlow(32 * 1024);

/** The one empty label or annotation map every resource without any shares. */
const NO_ENTRIES: Readonly<Record<string, string>> = Object.freeze({});

/** `map`, or the shared empty map when it has no entries. */
function entries(map: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
  for (const _ in map) return map;
  return NO_ENTRIES;
}

/**
 * Builds an immutable resource and derives its version. The label and annotation maps are taken
 * as given, not copied: the caller hands over maps it no longer changes (every resource is kept
 * for as long as it is served, and a copy per object is memory per object).
 */
export function makeResource(fields: ResourceFields): ConfigResource {
  return assembled(fields, entries(fields.labels), entries(fields.annotations), contentVersion(fields));
}

/**
 * A resource of `fields` with these maps and version. Every resource has the same hidden class:
 * the properties are listed here, never spread, and nothing is frozen (freezing a spread copy
 * costs V8 a hidden class per object, which at 50k objects is tens of megabytes). Immutability is
 * the type's promise.
 */
function assembled(
  fields: ResourceFields,
  labels: Readonly<Record<string, string>>,
  annotations: Readonly<Record<string, string>>,
  version: string,
): ConfigResource {
  return {
    kind: fields.kind,
    namespace: fields.namespace,
    name: fields.name,
    key: nameKey(fields.namespace, fields.name, fields.key),
    labels,
    annotations,
    createTime: fields.createTime,
    body: fields.body,
    origin: fields.origin,
    version,
  };
}

/**
 * Rebuilds a resource whose version was derived before (read back from a checksummed record):
 * the same object `makeResource` would build, without hashing its content again.
 */
export function restoreResource(fields: ResourceFields, version: string): ConfigResource {
  return assembled(fields, fields.labels, fields.annotations, version);
}

/**
 * The version `r` is served under once {@link withProvenance} names `source` on it, or undefined
 * when that takes hashing the annotated object whole (`r` carries a source version of its own, or
 * a version that is not a content version).
 */
export function provenanceVersion(r: ConfigResource, source: string): string | undefined {
  if (!isContentVersion(r.version) || r.annotations[SOURCE_VERSION_ANNOTATION] !== undefined)
    return undefined;
  return annotatedVersion(r.version, source, r.origin.upstreamVersion ?? r.version);
}

/**
 * `r` as served from `source`: its annotations with `SOURCE_ANNOTATION: source` and
 * `SOURCE_VERSION_ANNOTATION` (the upstream's own version of the object, or else its content
 * version), under `createTime`. The version follows from `r`'s where it can (`version`, from
 * {@link provenanceVersion}, when the caller has it already), so the object is not hashed again.
 */
export function withProvenance(
  r: ConfigResource,
  source: string,
  createTime: Timestamp = r.createTime,
  version: string | undefined = provenanceVersion(r, source),
): ConfigResource {
  const fields: ResourceFields = {
    kind: r.kind,
    namespace: r.namespace,
    name: r.name,
    key: r.key,
    labels: r.labels,
    annotations: provenanceAnnotations(r.annotations, source, r.origin.upstreamVersion ?? r.version),
    createTime,
    body: r.body,
    origin: r.origin,
  };
  return version === undefined ? makeResource(fields) : restoreResource(fields, version);
}

/**
 * What {@link withProvenance} gives for `makeResource(fields)`, without building that object
 * first: the resource as read from `source`, hashed once. `fields` must not name a source.
 */
export function makeResourceFrom(source: string, fields: ResourceFields): ConfigResource {
  const annotations = fields.annotations;
  // An object carrying a source version of its own is versioned whole (see provenanceVersion).
  if (annotations[SOURCE_VERSION_ANNOTATION] !== undefined)
    return withProvenance(makeResource(fields), source);
  const version = contentVersion(fields);
  const sourceVersion = fields.origin.upstreamVersion ?? version;
  return assembled(
    fields,
    entries(fields.labels),
    provenanceAnnotations(entries(annotations), source, sourceVersion),
    annotatedVersion(version, source, sourceVersion),
  );
}

/**
 * `annotations` with the two provenance annotations added. Nearly every object has none of its
 * own: the two alone are then an object literal V8 builds from its template, in 40 bytes, where
 * spreading an empty map under computed keys takes the runtime's slow path and 58 bytes.
 */
function provenanceAnnotations(
  annotations: Readonly<Record<string, string>>,
  source: string,
  sourceVersion: string,
): Record<string, string> {
  for (const _ in annotations)
    return { ...annotations, [SOURCE_ANNOTATION]: source, [SOURCE_VERSION_ANNOTATION]: sourceVersion };
  // Typed by the two constants: a literal key that is not theirs does not compile.
  const two: Record<typeof SOURCE_ANNOTATION | typeof SOURCE_VERSION_ANNOTATION, string> = {
    'meshmux.io/source': source,
    'meshmux.io/source-version': sourceVersion,
  };
  return two;
}

/**
 * The version `r` had as its source sent it, when `r` is such an object with `source`'s
 * provenance added by {@link withProvenance} from that version (the source versions its objects by
 * content): the object as sent is `r` without its two provenance annotations, under that version.
 * Undefined for any other object, which is to be kept as it is.
 */
export function sentVersion(r: ConfigResource, source: string): string | undefined {
  const sourceVersion = r.annotations[SOURCE_VERSION_ANNOTATION];
  if (r.annotations[SOURCE_ANNOTATION] !== source || sourceVersion === undefined) return undefined;
  if (r.origin.upstreamVersion !== undefined) return undefined;
  return isOwnAnnotatedVersion(r.version, source, sourceVersion) ? sourceVersion : undefined;
}

/** Whether `key` is one of the two provenance annotations. */
export function isProvenanceAnnotation(key: string): boolean {
  return key === SOURCE_ANNOTATION || key === SOURCE_VERSION_ANNOTATION;
}

/** A Timestamp for a JS Date (millisecond precision). */
export function timestampFromDate(date: Date): Timestamp {
  const ms = date.getTime();
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: (ms - seconds * 1000) * 1_000_000 };
}
