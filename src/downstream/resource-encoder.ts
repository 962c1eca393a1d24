import { ByteBoundedMap } from '../core/byte-bounded-map.js';
import { compactString } from '../core/compact-string.js';
import { isContentVersion, type ConfigResource, type Timestamp } from '../core/resource.js';
import { sortedKeys } from '../core/sorted-keys.js';
import { anyTypeUrl } from '../schema/proto-root.js';
import type { KindRegistry } from '../schema/kinds.js';
import { lengthDelimitedSize, SizedWriter, utf8Length, varintSize } from '../wire/sized-writer.js';
import { WireCursor } from '../wire/wire-cursor.js';
import { MCP_RESOURCE_TYPE_URL } from '../wire/type-urls.js';

/** Any type URL of the MCP envelope istiod expects around every object, as bytes. */
const MCP_URL = Buffer.from(MCP_RESOURCE_TYPE_URL, 'utf8');

/** The field number of `DiscoveryResponse.resources`. */
const RESPONSE_RESOURCES_FIELD = 2;

export interface ResourceEncoderOptions {
  /** Upper bound of the cache of encoded objects, in bytes. Default 512 MiB. */
  readonly maxCacheBytes?: number;
}

/**
 * The key an object's bytes are kept under across instances: its version when that is a content
 * version, which stands for everything the encoding depends on but the creation time (checked
 * against the bytes on a hit), so no key is built per object; else every input spelled out.
 */
function contentKey(resource: ConfigResource): string {
  if (isContentVersion(resource.version)) return resource.version;
  return compactString(
    `${resource.kind}|${resource.namespace}/${resource.name}|${resource.version}|${resource.createTime.seconds}.${resource.createTime.nanos}`,
  );
}

/** Bytes of an object's `create_time` Timestamp message: only its parts that are not zero. */
function timestampSize({ seconds, nanos }: Timestamp): number {
  return (seconds === 0 ? 0 : 1 + varintSize(seconds)) + (nanos === 0 ? 0 : 1 + varintSize(nanos));
}

/** Writes the fields of an object's `create_time` Timestamp ({@link timestampSize} bytes). */
function writeTimestamp(w: SizedWriter, { seconds, nanos }: Timestamp): void {
  if (seconds !== 0) {
    w.varint(1 << 3);
    w.varint(seconds);
  }
  if (nanos !== 0) {
    w.varint(2 << 3);
    w.varint(nanos);
  }
}

/** Where {@link carriesCreateTime} writes the Timestamp it looks for (two fields of ten bytes at most). */
const timestampScratch = Buffer.alloc(22);

/**
 * Whether `framed` (bytes this encoder wrote) carries `createTime`: its Timestamp follows the
 * type URL, the envelope's and the metadata's headers and the name, in the order `encode` writes them.
 */
function carriesCreateTime(framed: Uint8Array, createTime: Timestamp): boolean {
  const c = new WireCursor(framed);
  const end = framed.byteLength;
  c.uint32(end); // resources (2)
  c.uint32(end);
  c.uint32(end); // Any.type_url (1)
  const url = c.uint32(end);
  c.pos += url;
  c.uint32(end); // Any.value (2): the Resource
  c.uint32(end);
  c.uint32(end); // Resource.metadata (1)
  c.uint32(end);
  c.uint32(end); // Metadata.name (1)
  const name = c.uint32(end);
  c.pos += name;
  c.uint32(end); // Metadata.create_time (2)
  const length = c.uint32(end);
  if (length !== timestampSize(createTime) || c.pos + length > end) return false;
  const expected = new SizedWriter(timestampScratch);
  writeTimestamp(expected, createTime);
  for (let i = 0; i < length; i++) if (framed[c.pos + i] !== timestampScratch[i]) return false;
  return true;
}

/**
 * An object's framed bytes where they lie now: memory of their own when encoded, a stretch of a
 * block once one holds them ({@link ResourceEncoder.rehome}). One per content, shared by every
 * instance with that content and by the cache, so moving the bytes is two assignments, and no
 * view of the block is made until the bytes are asked for.
 */
interface Framed {
  /** The memory the bytes lie in. */
  bytes: Uint8Array;
  /** Where in `bytes` they start. */
  offset: number;
  readonly length: number;
}

/** The bytes of `f`: its memory itself when they fill it, else a view of their stretch. */
function bytesOf(f: Framed): Uint8Array {
  return f.bytes.byteLength === f.length ? f.bytes : f.bytes.subarray(f.offset, f.offset + f.length);
}

/**
 * Bytes of a slab of {@link ResourceEncoder.framedAhead}. glibc maps an allocation this large apart
 * from its heap (with the tunables `npm start` and the image set, from 1 MiB on, always; by default
 * from 128 KiB on, until it has let a larger mapping go), so a slab let go is memory given back;
 * taken from the heap instead, it leaves one free stretch that the next large allocation can
 * reuse, not a hole per object.
 */
const AHEAD_SLAB_BYTES = 1024 * 1024;

/** What {@link ResourceEncoder.plan} answers for an object not encoded yet: the bytes it will take. */
export interface FramePlan {
  readonly length: number;
}

/** Sizes of an object's nested messages and strings, computed before its entry is written. */
interface Layout extends FramePlan {
  /** Where the bytes are kept by content. */
  readonly key: string;
  readonly bodyUrl: Buffer;
  readonly namespaceBytes: number;
  /** `namespace/name`. */
  readonly nameBytes: number;
  readonly timestamp: number;
  readonly versionBytes: number;
  readonly labels: MapLayout;
  readonly annotations: MapLayout;
  readonly metadata: number;
  readonly bodyAny: number;
  readonly mcpResource: number;
  readonly outerAny: number;
}

/**
 * Encodes each object once per version into the exact bytes of one `resources` entry of a
 * DiscoveryResponse (tag, length, `Any(istio.mcp.v1alpha1.Resource)`), so responses are
 * assembled by concatenation and never re-encode an unchanged object. Output is deterministic
 * (map entries sorted), so replicas emit identical bytes for identical content.
 */
export class ResourceEncoder {
  private readonly cache: ByteBoundedMap<string, Framed>;
  /**
   * The same bytes by object instance: the merge hands out one instance per object version, so
   * assembling a response is a weak-map lookup per object, no key to build. Entries go with the objects.
   */
  private readonly byInstance = new WeakMap<ConfigResource, Framed>();
  /** The bytes of each kind's body type URL, by the kind's key. */
  private readonly bodyUrls = new Map<string, Buffer>();
  /** The slab {@link framedAhead} writes into, and where its free bytes start. */
  private slab: Buffer | undefined;
  private slabAt = 0;
  /** Slabs {@link framedAhead} allocated since start; a counter. */
  aheadSlabs = 0;
  /** Objects encoded since start; a benchmark counter. */
  encodes = 0;

  constructor(
    private readonly kinds: KindRegistry,
    options: ResourceEncoderOptions = {},
  ) {
    // A rehome keeps the bytes' length, so a value's size never changes while it is kept.
    this.cache = new ByteBoundedMap(options.maxCacheBytes ?? 512 * 1024 * 1024, (v) => v.length + 64);
  }

  /** The framed `resources` entry of an object. The returned bytes must not be altered. */
  framed(resource: ConfigResource): Uint8Array {
    return this.framedOnce(resource, false);
  }

  /**
   * Keeps `resource`'s framed bytes at `block[offset..offset + length)` from now on: the same
   * bytes, copied into a block of a served list (see `FrameBlocks`), so each object's bytes are
   * held once, in the block that last took them, instead of also in memory of their own. A block
   * rebuilt copies its members from where they are and takes them over in turn, so an older block
   * is let go once its objects have moved on. An instance never framed, or bytes of another
   * length, are left alone. Every instance sharing the bytes (equal content) follows, and so does
   * the cache by content.
   */
  rehome(resource: ConfigResource, block: Uint8Array, offset: number, length: number): void {
    const known = this.byInstance.get(resource);
    if (known === undefined || known.length !== length) return;
    known.bytes = block;
    known.offset = offset;
  }

  /**
   * Drops the bytes kept by content for objects the configuration no longer serves (`removed`),
   * unless one of `added` has the same content: the cache then holds what is served, not every
   * object ever seen, and a shrinking configuration shrinks what is held. Bytes of an instance still
   * in use stay with it.
   */
  forget(removed: readonly ConfigResource[], added: readonly ConfigResource[]): void {
    // Nothing kept by content (nothing encoded yet, as while a start's sources sync): nothing to drop.
    if (removed.length === 0 || this.cache.size === 0) return;
    if (removed.length <= added.length) {
      // The smaller side in the set: a first sync adds tens of thousands of objects where a few go.
      const gone = new Set<string>();
      for (let i = 0; i < removed.length; i++) gone.add(contentKey(removed[i] as ConfigResource));
      for (let i = 0; i < added.length; i++)
        if (gone.delete(contentKey(added[i] as ConfigResource)) && gone.size === 0) return;
      gone.forEach((key) => this.cache.delete(key));
      return;
    }
    const kept = new Set<string>();
    for (let i = 0; i < added.length; i++) kept.add(contentKey(added[i] as ConfigResource));
    for (let i = 0; i < removed.length; i++) {
      const key = contentKey(removed[i] as ConfigResource);
      if (!kept.has(key)) this.cache.delete(key);
    }
  }

  /**
   * `resource`'s framed bytes when they are known (for this instance, or for its content), else
   * the plan of their encoding: how many bytes they take, for {@link frameInto} to write them
   * where a block of a served list will hold them, without memory of their own first.
   */
  plan(resource: ConfigResource): Uint8Array | FramePlan {
    const known = this.byInstance.get(resource);
    if (known !== undefined) return bytesOf(known);
    const key = contentKey(resource);
    const hit = this.hit(key, resource);
    if (hit !== undefined) {
      this.byInstance.set(resource, hit);
      return bytesOf(hit);
    }
    return this.layout(resource, key);
  }

  /**
   * Encodes `resource` as `plan` (from {@link plan}) says into `block` from `offset` on, and keeps
   * its bytes there from now on, as {@link rehome} would.
   */
  frameInto(resource: ConfigResource, plan: FramePlan, block: Buffer, offset: number): void {
    const layout = plan as Layout;
    this.write(resource, layout, block, offset);
    const framed: Framed = { bytes: block, offset, length: layout.length };
    this.cache.set(layout.key, framed);
    this.byInstance.set(resource, framed);
  }

  /**
   * `resource`'s framed bytes, as {@link framed}, but an object not encoded yet is written into a
   * slab shared with the objects framed this way before it: what a background run encodes ahead
   * of the first istiods. Their blocks copy each object out of the slab and take it over
   * ({@link rehome}), and once its objects have all moved on a slab goes as one piece of memory.
   * Framed into memory of its own each, the objects' buffers went one by one among the blocks
   * allocated meanwhile, and malloc kept the holes they left (tens of MB at 50k objects).
   */
  framedAhead(resource: ConfigResource): Uint8Array {
    return this.framedOnce(resource, true);
  }

  /** Ends the slab {@link framedAhead} writes into: the next object starts a new one. */
  endAhead(): void {
    this.slab = undefined;
  }

  /** {@link framed}, or with `ahead` {@link framedAhead}. */
  private framedOnce(resource: ConfigResource, ahead: boolean): Uint8Array {
    const known = this.byInstance.get(resource);
    if (known !== undefined) return bytesOf(known);
    const framed = this.framedByKey(resource, ahead);
    this.byInstance.set(resource, framed);
    return bytesOf(framed);
  }

  private framedByKey(resource: ConfigResource, ahead: boolean): Framed {
    const key = contentKey(resource);
    const hit = this.hit(key, resource);
    if (hit !== undefined) return hit;
    const layout = this.layout(resource, key);
    const { length } = layout;
    const bytes =
      ahead && length <= AHEAD_SLAB_BYTES / 8 ? this.slabWith(length) : Buffer.allocUnsafeSlow(length);
    const offset = bytes === this.slab ? this.slabAt - length : 0;
    this.write(resource, layout, bytes, offset);
    const framed: Framed = { bytes, offset, length };
    this.cache.set(key, framed);
    return framed;
  }

  /**
   * The slab {@link framedAhead} writes into, a new one when it is full, with `length` bytes taken
   * from it: they end where its free bytes now start.
   */
  private slabWith(length: number): Buffer {
    if (this.slab === undefined || this.slabAt + length > this.slab.byteLength) {
      this.slab = Buffer.allocUnsafeSlow(AHEAD_SLAB_BYTES);
      this.slabAt = 0;
      this.aheadSlabs++;
    }
    this.slabAt += length;
    return this.slab;
  }

  /** The bytes kept under `key`, when they are `resource`'s. */
  private hit(key: string, resource: ConfigResource): Framed | undefined {
    const hit = this.cache.get(key);
    return hit !== undefined &&
      (key !== resource.version || carriesCreateTime(bytesOf(hit), resource.createTime))
      ? hit
      : undefined;
  }

  /**
   * Every nested message's size, computed before a byte is written, so each byte is written once,
   * straight to where it belongs, the body copied once.
   */
  private layout(resource: ConfigResource, key: string): Layout {
    const bodyUrl = this.bodyUrls.get(resource.kind) ?? this.bodyUrl(resource.kind);
    const namespaceBytes = utf8Length(resource.namespace);
    const nameBytes = namespaceBytes + 1 + utf8Length(resource.name);
    const timestamp = timestampSize(resource.createTime);
    const versionBytes = utf8Length(resource.version);
    const labels = mapLayout(resource.labels);
    const annotations = mapLayout(resource.annotations);
    // create_time is always present, even at the epoch: istiod ≤1.13 drops objects without it.
    const metadata =
      lengthDelimitedSize(nameBytes) +
      lengthDelimitedSize(timestamp) +
      lengthDelimitedSize(versionBytes) +
      labels.size +
      annotations.size;
    // Any(body) inside Resource{metadata, body} inside Any(Resource), as `resources` field 2.
    const bodyAny = lengthDelimitedSize(bodyUrl.byteLength) + lengthDelimitedSize(resource.body.byteLength);
    const mcpResource = lengthDelimitedSize(metadata) + lengthDelimitedSize(bodyAny);
    const outerAny = lengthDelimitedSize(MCP_URL.byteLength) + lengthDelimitedSize(mcpResource);
    return {
      key,
      length: lengthDelimitedSize(outerAny),
      bodyUrl,
      namespaceBytes,
      nameBytes,
      timestamp,
      versionBytes,
      labels,
      annotations,
      metadata,
      bodyAny,
      mcpResource,
      outerAny,
    };
  }

  /** Writes `resource`'s entry as `layout` says into `into` from `at` on. */
  private write(resource: ConfigResource, layout: Layout, into: Buffer, at: number): void {
    this.encodes++;
    const w = new SizedWriter(into, at);
    w.header(RESPONSE_RESOURCES_FIELD, layout.outerAny);
    w.bytes(1, MCP_URL);
    w.header(2, layout.mcpResource);
    w.header(1, layout.metadata);
    w.header(1, layout.nameBytes);
    w.text(resource.namespace, layout.namespaceBytes);
    w.text('/', 1);
    w.text(resource.name, layout.nameBytes - layout.namespaceBytes - 1);
    w.header(2, layout.timestamp);
    writeTimestamp(w, resource.createTime);
    w.string(3, resource.version, layout.versionBytes);
    writeStringMap(w, 4, resource.labels, layout.labels);
    writeStringMap(w, 5, resource.annotations, layout.annotations);
    w.header(2, layout.bodyAny);
    w.bytes(1, layout.bodyUrl);
    w.bytes(2, resource.body);
    if (w.pos !== at + layout.length)
      throw new Error(`an encoded object took ${w.pos - at} bytes, ${layout.length} computed`);
  }

  /** The UTF-8 bytes of the type URL of a kind's body, kept by the kind's key. */
  private bodyUrl(kindKey: string): Buffer {
    const kind = this.kinds.get(kindKey);
    if (kind === undefined) throw new Error(`no kind ${kindKey} in the registry`);
    const bytes = Buffer.from(anyTypeUrl(kind.bodyType), 'utf8');
    this.bodyUrls.set(kindKey, bytes);
    return bytes;
  }
}

/** A label or annotation map as `Metadata` encodes it: its keys in order, each entry's sizes. */
interface MapLayout {
  readonly keys: readonly string[];
  /** Per entry, the UTF-8 lengths of its key and its value, in turn. */
  readonly lengths: readonly number[];
  /** Bytes of every entry, with its tag and length. */
  readonly size: number;
}

const NO_MAP: MapLayout = { keys: [], lengths: [], size: 0 };

function mapLayout(map: Readonly<Record<string, string>>): MapLayout {
  const keys = sortedKeys(map);
  if (keys.length === 0) return NO_MAP;
  const lengths: number[] = [];
  let size = 0;
  for (const key of keys) {
    const k = utf8Length(key);
    const v = utf8Length(map[key] ?? '');
    lengths.push(k, v);
    size += lengthDelimitedSize(entrySize(k, v));
  }
  return { keys, lengths, size };
}

/** A map entry's bytes: key (1) and value (2), each left out when empty. */
function entrySize(key: number, value: number): number {
  return (key === 0 ? 0 : lengthDelimitedSize(key)) + (value === 0 ? 0 : lengthDelimitedSize(value));
}

function writeStringMap(
  w: SizedWriter,
  field: number,
  map: Readonly<Record<string, string>>,
  layout: MapLayout,
): void {
  layout.keys.forEach((key, i) => {
    const k = layout.lengths[2 * i] as number;
    const v = layout.lengths[2 * i + 1] as number;
    w.header(field, entrySize(k, v));
    if (k > 0) w.string(1, key, k);
    if (v > 0) w.string(2, map[key] ?? '', v);
  });
}
