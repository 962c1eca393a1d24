import protobuf from 'protobufjs';
import { ByteBoundedMap } from '../core/byte-bounded-map.js';
import { compactString } from '../core/compact-string.js';
import { isContentVersion, type ConfigResource, type Timestamp } from '../core/resource.js';
import { sortedKeys } from '../core/sorted-keys.js';
import { anyTypeUrl } from '../schema/proto-root.js';
import type { KindRegistry } from '../schema/kinds.js';
import { lengthDelimitedSize, SizedWriter } from '../wire/sized-writer.js';
import { WireCursor } from '../wire/wire-cursor.js';
import { lengthDelimitedTag } from '../wire/wire-writer.js';
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

/** The encoded `create_time` of an object: its Timestamp message. */
function timestampBytes(createTime: Timestamp): Uint8Array {
  const ts = protobuf.Writer.create();
  if (createTime.seconds !== 0) ts.uint32(1 << 3).int64(createTime.seconds);
  if (createTime.nanos !== 0) ts.uint32(2 << 3).int32(createTime.nanos);
  return ts.finish();
}

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
  const expected = timestampBytes(createTime);
  if (length !== expected.byteLength || c.pos + length > end) return false;
  for (let i = 0; i < length; i++) if (framed[c.pos + i] !== expected[i]) return false;
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
    const known = this.byInstance.get(resource);
    if (known !== undefined) return bytesOf(known);
    const framed = this.framedByKey(resource);
    this.byInstance.set(resource, framed);
    return bytesOf(framed);
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
    if (removed.length === 0) return;
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

  private framedByKey(resource: ConfigResource): Framed {
    const key = contentKey(resource);
    const hit = this.cache.get(key);
    if (
      hit !== undefined &&
      (key !== resource.version || carriesCreateTime(bytesOf(hit), resource.createTime))
    )
      return hit;
    const bytes = this.encode(resource);
    const framed: Framed = { bytes, offset: 0, length: bytes.byteLength };
    this.cache.set(key, framed);
    return framed;
  }

  /**
   * The entry written once into memory of its own (not a slice of Node's shared pool, whose slab
   * a kept slice would keep alive whole): the nested messages' sizes are computed first, so the
   * body, which is most of the bytes, is copied once, not once per level of nesting.
   */
  private encode(resource: ConfigResource): Uint8Array {
    this.encodes++;
    const kind = this.kinds.get(resource.kind);
    if (kind === undefined) throw new Error(`no kind ${resource.kind} in the registry`);
    const metadata = protobuf.Writer.create();
    metadata.uint32(lengthDelimitedTag(1)).string(`${resource.namespace}/${resource.name}`);
    // create_time is always present, even at the epoch: istiod ≤1.13 drops objects without it.
    metadata.uint32(lengthDelimitedTag(2)).bytes(timestampBytes(resource.createTime));
    metadata.uint32(lengthDelimitedTag(3)).string(resource.version);
    writeStringMap(metadata, 4, resource.labels);
    writeStringMap(metadata, 5, resource.annotations);
    const meta = metadata.finish();
    const bodyUrl = typeUrlBytes(anyTypeUrl(kind.bodyType));
    // Any(body) inside Resource{metadata, body} inside Any(Resource), as `resources` field 2.
    const bodyAny = lengthDelimitedSize(bodyUrl.byteLength) + lengthDelimitedSize(resource.body.byteLength);
    const mcpResource = lengthDelimitedSize(meta.byteLength) + lengthDelimitedSize(bodyAny);
    const outerAny = lengthDelimitedSize(MCP_URL.byteLength) + lengthDelimitedSize(mcpResource);
    const size = lengthDelimitedSize(outerAny);
    const w = new SizedWriter(Buffer.allocUnsafeSlow(size));
    w.header(RESPONSE_RESOURCES_FIELD, outerAny);
    w.bytes(1, MCP_URL);
    w.header(2, mcpResource);
    w.bytes(1, meta);
    w.header(2, bodyAny);
    w.bytes(1, bodyUrl);
    w.bytes(2, resource.body);
    if (w.pos !== size) throw new Error(`an encoded object took ${w.pos} bytes, ${size} computed`);
    return w.buf;
  }
}

const typeUrls = new Map<string, Buffer>();

/** A body type URL's UTF-8 bytes, encoded once. */
function typeUrlBytes(url: string): Buffer {
  let bytes = typeUrls.get(url);
  if (bytes === undefined) typeUrls.set(url, (bytes = Buffer.from(url, 'utf8')));
  return bytes;
}

function writeStringMap(writer: protobuf.Writer, field: number, map: Readonly<Record<string, string>>): void {
  for (const key of sortedKeys(map)) {
    const entry = protobuf.Writer.create();
    if (key.length > 0) entry.uint32(lengthDelimitedTag(1)).string(key);
    const value = map[key] ?? '';
    if (value.length > 0) entry.uint32(lengthDelimitedTag(2)).string(value);
    writer.uint32(lengthDelimitedTag(field)).bytes(entry.finish());
  }
}
