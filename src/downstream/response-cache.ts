import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { shortDigest } from '../core/content-digest.js';
import type { ChunkedList } from '../core/chunked-list.js';
import type { ConfigResource } from '../core/resource.js';
import type { KindSnapshot } from '../merge/config-snapshot.js';
import type { ClientView } from './client-view.js';
import { type BlockCounters, FrameBlocks } from './frame-blocks.js';
import { KindPartitions } from './kind-partitions.js';
import type { ResourceEncoder } from './resource-encoder.js';
import { REVISIONS_SEPARATOR, type ViewContent, ViewContents } from './view-contents.js';
import { bytesField, encodeAny, stringField } from '../wire/wire-writer.js';

export { REVISIONS_SEPARATOR };

/** A complete, encoded DiscoveryResponse, shared by every stream it is written to. */
export interface BuiltResponse {
  /** The serialized DiscoveryResponse: the concatenation of these buffers. Must not be altered. */
  readonly chunks: readonly Buffer[];
  /** Total length of `chunks`. */
  readonly byteLength: number;
  readonly typeUrl: string;
  /** `version_info`: the view's content version, then `~` and the upstream revisions it was built from. */
  readonly version: string;
  /** Unique for the life of the process, hence unique on every stream. */
  readonly nonce: string;
  readonly resourceCount: number;
}

/** Counters for benchmarks and the debug endpoint. */
export interface ResponseCounters {
  /** Responses assembled (not written) since start. */
  assemblies: number;
  /**
   * Responses built from a view's own list where its parts were meant to serve, as they did not
   * hold as many objects as the view: never, unless the parts and the view's list disagree.
   */
  partsMismatched: number;
}

/** The serialized bytes of a response in one buffer (tests, previews; never the serving path). */
export function responseBytes(response: BuiltResponse): Buffer {
  return response.chunks.length === 1 ? (response.chunks[0] as Buffer) : Buffer.concat(response.chunks);
}

/**
 * The content part of a served `version_info` (`<content>~<revisions>`): equal content, equal
 * part, on every replica.
 */
export function contentOf(version: string): string {
  const at = version.indexOf(REVISIONS_SEPARATOR);
  return at < 0 ? version : version.slice(0, at);
}

/** The latest response built for a (view, type URL), and the kind generation it shows. */
interface LatestResponse {
  readonly generation: string;
  /** The kind it shows; undefined for a kind that holds nothing. */
  readonly kind: string | undefined;
  readonly built: BuiltResponse;
}

/**
 * Builds DiscoveryResponses from cached object bytes, once per (type URL, view, kind generation),
 * and keeps them for every client of that view. The nonce is part of the shared bytes: it is unique
 * per built response, so it is unique on any one stream too.
 *
 * `version_info` is `<content version>~<revisions>`: the view's content version, then the
 * revisions (comma-separated, configuration order) of the sources holding objects of the kind,
 * as of the last change that altered this view's content. A client (or a benchmark) can tell
 * which upstream states it has without decoding anything. The suffix moves only when the view's
 * content does, so unchanged content keeps its version and is never pushed again; the content
 * part is the same on every replica for the same content, and the whole is the same on replicas
 * that follow the same upstreams (a replica started later names the revisions it started from).
 */
export class ResponseCache {
  private readonly bootId = randomBytes(4).toString('hex');
  private nonceCounter = 0;
  private readonly contents = new ViewContents();
  private readonly blocks = new FrameBlocks();
  private readonly partitions = new KindPartitions();
  /**
   * Per view id, per kind: the block lists (parts) its latest response was built from, and per
   * block list how many views' latest responses use it; a list no view uses is forgotten.
   */
  private readonly partsOfView = new Map<string, Map<string, readonly string[]>>();
  private readonly partUsers = new Map<string, number>();
  /** Per kind, how many views' latest responses were built from its parts: at none, its split goes. */
  private readonly splitUsers = new Map<string, number>();
  /**
   * Per view id, per type URL: the latest response, by kind generation. Older ones are never sent
   * again. Only type URLs of known kinds are kept; a view's entries go with `forgetView`.
   */
  private readonly latest = new Map<string, Map<string, LatestResponse>>();
  /** Bare responses (MeshConfig) by content. */
  private readonly responses: LRUCache<string, BuiltResponse>;
  readonly counters: ResponseCounters = { assemblies: 0, partsMismatched: 0 };
  /** Blocks of framed objects built, and the bytes copied into them. */
  readonly blockCounters: BlockCounters = this.blocks.counters;

  constructor(
    private readonly encoder: ResourceEncoder,
    options: { maxResponseBytes?: number } = {},
  ) {
    this.responses = new LRUCache<string, BuiltResponse>({
      maxSize: options.maxResponseBytes ?? 256 * 1024 * 1024,
      sizeCalculation: (r) => r.byteLength + 128,
    });
  }

  /** The content version a view sees of a kind (absent kind = empty). */
  viewVersion(view: ClientView, kind: KindSnapshot | undefined): string {
    return this.contents.of(view, kind).version;
  }

  /** The objects a view sees of a kind and their version (absent kind = empty). Must not be altered. */
  viewContent(view: ClientView, kind: KindSnapshot | undefined): ViewContent {
    return this.contents.of(view, kind);
  }

  /**
   * A DeltaDiscoveryResponse for one stream: `changed` as `Resource` entries named
   * `<namespace>/<name>` (their bytes are the cached object bytes of state-of-the-world responses,
   * re-framed), and `removed` by name. Built per stream and never kept.
   */
  deltaResponse(
    typeUrl: string,
    version: string,
    changed: readonly ConfigResource[],
    removed: readonly string[],
  ): BuiltResponse {
    const entries = changed.map((r) =>
      deltaResourceEntry(r.version, r.key, anyOfFramed(this.encoder.framed(r))),
    );
    return this.assemble(
      typeUrl,
      version,
      entries,
      changed.length,
      removed.map((n) => stringField(6, n)),
    );
  }

  /** A DeltaDiscoveryResponse carrying one bare message (MeshConfig), unnamed. */
  deltaBareResponse(typeUrl: string, bodyTypeUrl: string, body: Uint8Array): BuiltResponse {
    const version = shortDigest(body, 16);
    return this.assemble(
      typeUrl,
      version,
      [deltaResourceEntry(version, '', encodeAny(bodyTypeUrl, body))],
      1,
    );
  }

  /**
   * The response for a type URL as a view sees the kind. `known` says whether the type URL names a
   * kind meshmux serves: the (empty) response for any other is built each time and never kept, so
   * type URLs a client makes up cost nothing once it leaves.
   */
  response(typeUrl: string, view: ClientView, kind: KindSnapshot | undefined, known = true): BuiltResponse {
    if (!known) return this.assemble(typeUrl, this.contents.of(view, undefined).version, [], 0);
    const generation = `${kind?.kind ?? ''}|${kind?.generation ?? 0}`;
    let byType = this.latest.get(view.id);
    const hit = byType?.get(typeUrl);
    if (hit?.generation === generation) return hit.built;
    const content = this.contents.of(view, kind);
    const chunks = kind === undefined ? [] : this.chunks(view, kind, content);
    const built = this.assemble(typeUrl, content.version, chunks, content.list.length);
    if (byType === undefined) {
      byType = new Map<string, LatestResponse>();
      this.latest.set(view.id, byType);
    }
    byType.set(typeUrl, { generation, kind: kind?.kind, built });
    return built;
  }

  /**
   * The framed objects of `content` (the view's objects of `kind`): the blocks of the view's parts
   * where it has a place in a split of the kind, else of its own list.
   */
  private chunks(view: ClientView, kind: KindSnapshot, content: ViewContent): Buffer[] {
    const own = `${view.id}|${kind.kind}`;
    const partition = view.partition;
    const parts = partition === undefined ? undefined : this.partitions.of(partition.scheme, kind);
    if (partition !== undefined && parts !== undefined) {
      const keys: string[] = [];
      let count = 0;
      for (const [part, list] of parts) {
        if (!partition.includes(part)) continue;
        keys.push(part);
        count += list.length;
      }
      if (count === content.list.length) {
        // In the order of the parts' keys: the same content is the same bytes, on every replica.
        keys.sort();
        const out: Buffer[] = [];
        const lists = keys.map((part) => `${partition.scheme.id}|${kind.kind}|${part}`);
        keys.forEach((part, i) => {
          const list = parts.get(part) as ChunkedList<ConfigResource>;
          for (const chunk of this.blocks.chunks(lists[i] as string, list, this.encoder)) out.push(chunk);
        });
        this.usesParts(view.id, kind.kind, lists);
        // The view's own blocks, from before its kind was split, serve no response from now on.
        this.blocks.forget(own);
        return out;
      }
      this.counters.partsMismatched++;
    }
    this.usesParts(view.id, kind.kind, []);
    return this.blocks.chunks(own, content.list, this.encoder);
  }

  /** Notes the block lists of parts a view's latest response of a kind was built from. */
  private usesParts(viewId: string, kind: string, lists: readonly string[]): void {
    let byKind = this.partsOfView.get(viewId);
    const before = byKind?.get(kind) ?? [];
    if (before.length === 0 && lists.length === 0) return;
    for (const list of lists) this.partUsers.set(list, (this.partUsers.get(list) ?? 0) + 1);
    this.releaseParts(before);
    const users = (this.splitUsers.get(kind) ?? 0) + (lists.length > 0 ? 1 : 0) - (before.length > 0 ? 1 : 0);
    if (users > 0) this.splitUsers.set(kind, users);
    else {
      this.splitUsers.delete(kind);
      this.partitions.forget(kind);
    }
    if (byKind === undefined) this.partsOfView.set(viewId, (byKind = new Map<string, readonly string[]>()));
    if (lists.length === 0) byKind.delete(kind);
    else byKind.set(kind, lists);
    if (byKind.size === 0) this.partsOfView.delete(viewId);
  }

  /** One view fewer uses each of `lists`; a list none uses any more has its blocks forgotten. */
  private releaseParts(lists: readonly string[]): void {
    for (const list of lists) {
      const users = (this.partUsers.get(list) ?? 1) - 1;
      if (users > 0) {
        this.partUsers.set(list, users);
        continue;
      }
      this.partUsers.delete(list);
      this.blocks.forget(list);
    }
  }

  /** Drops every response, view content and block kept for a view (its last client left). */
  forgetView(viewId: string): void {
    this.latest.delete(viewId);
    for (const kind of this.contents.forget(viewId)) this.blocks.forget(`${viewId}|${kind}`);
    for (const kind of [...(this.partsOfView.get(viewId)?.keys() ?? [])]) this.usesParts(viewId, kind, []);
  }

  /**
   * Drops what a view keeps of `kinds` (responses, content, blocks): for a view without clients
   * whose kinds moved on, it would only hold their old objects alive until the view is freed. A
   * client that comes back gets them built again from the current kinds.
   */
  forgetKinds(viewId: string, kinds: ReadonlySet<string>): void {
    const byType = this.latest.get(viewId);
    if (byType !== undefined) {
      for (const [typeUrl, entry] of byType) {
        if (entry.kind !== undefined && kinds.has(entry.kind)) byType.delete(typeUrl);
      }
      if (byType.size === 0) this.latest.delete(viewId);
    }
    for (const kind of kinds) {
      if (this.contents.forgetKind(viewId, kind)) this.blocks.forget(`${viewId}|${kind}`);
      this.usesParts(viewId, kind, []);
    }
  }

  /** What is kept, for `/debug/counters`: views, responses, (view, kind) contents and block lists. */
  sizes(): { views: number; responses: number; contents: number; blockLists: number } {
    let responses = this.responses.size;
    for (const byType of this.latest.values()) responses += byType.size;
    return {
      views: Math.max(this.latest.size, this.contents.views),
      responses,
      contents: this.contents.entries,
      blockLists: this.blocks.lists,
    };
  }

  /** A response carrying one bare message (MeshConfig): `Any(<bodyTypeUrl>)` of `body`. */
  bareResponse(typeUrl: string, bodyTypeUrl: string, body: Uint8Array): BuiltResponse {
    const version = shortDigest(body, 16);
    const key = `${typeUrl}|bare|${version}`;
    const hit = this.responses.get(key);
    if (hit !== undefined) return hit;
    const built = this.assemble(
      typeUrl,
      version,
      [Buffer.from(bytesField(2, encodeAny(bodyTypeUrl, body)))],
      1,
    );
    this.responses.set(key, built);
    return built;
  }

  /**
   * Field 1 (`version_info`, or `system_version_info` in delta), the resources (field 2 in both),
   * then the type URL (4), the nonce (5) and, in delta, the removed names (6): the field numbers
   * of DiscoveryResponse and DeltaDiscoveryResponse agree up to there.
   */
  private assemble(
    typeUrl: string,
    version: string,
    body: readonly Uint8Array[],
    resourceCount: number,
    removed: readonly Uint8Array[] = [],
  ): BuiltResponse {
    this.counters.assemblies++;
    const nonce = `${this.bootId}-${++this.nonceCounter}`;
    const head = Buffer.from(stringField(1, version));
    const tail = Buffer.concat([stringField(4, typeUrl), stringField(5, nonce), ...removed]);
    const chunks = [head, ...body.map(asBuffer), tail];
    let byteLength = 0;
    for (const c of chunks) byteLength += c.byteLength;
    return Object.freeze({ chunks, byteLength, typeUrl, version, nonce, resourceCount });
  }
}

/** A Buffer over the same bytes (no copy). */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The `Any` inside a framed `resources` entry (its tag and length stripped; no copy). */
function anyOfFramed(framed: Uint8Array): Uint8Array {
  let at = 1; // the tag of field 2 is one byte
  while (((framed[at] as number) & 0x80) !== 0) at++;
  return framed.subarray(at + 1);
}

/** One `resources` entry of a DeltaDiscoveryResponse: `Resource{version=1, resource=2, name=3}`. */
function deltaResourceEntry(version: string, name: string, any: Uint8Array): Buffer {
  const parts = [stringField(1, version), bytesField(2, any)];
  if (name !== '') parts.push(stringField(3, name));
  return Buffer.from(bytesField(2, Buffer.concat(parts)));
}
