import { createHash, randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { ConfigResource } from '../core/resource.js';
import { EMPTY_KIND_VERSION, type KindSnapshot } from '../merge/config-snapshot.js';
import type { ClientView } from './client-view.js';
import type { ResourceEncoder } from './resource-encoder.js';
import { bytesField, encodeAny, stringField } from './wire.js';

/** A complete, encoded DiscoveryResponse, shared by every stream it is written to. */
export interface BuiltResponse {
  /** The serialized DiscoveryResponse. Must not be altered. */
  readonly bytes: Buffer;
  readonly typeUrl: string;
  /** `version_info`: the view's content version. */
  readonly version: string;
  /** Unique for the life of the process, hence unique on every stream. */
  readonly nonce: string;
  readonly resourceCount: number;
}

/** The objects of one kind a view admits, with their content version. */
interface ViewContent {
  readonly version: string;
  readonly resources: readonly ConfigResource[];
}

/** Counters for benchmarks and the debug endpoint. */
export interface ResponseCounters {
  /** Responses assembled (not written) since start. */
  assemblies: number;
}

/**
 * Builds DiscoveryResponses from cached object bytes, once per (type URL, view, kind generation),
 * and keeps them for every client of that view. The nonce is part of the shared bytes: it is unique
 * per built response, so it is unique on any one stream too.
 */
export class ResponseCache {
  private readonly bootId = randomBytes(4).toString('hex');
  private nonceCounter = 0;
  private readonly contents = new LRUCache<string, ViewContent>({ max: 4096 });
  private readonly responses: LRUCache<string, BuiltResponse>;
  readonly counters: ResponseCounters = { assemblies: 0 };

  constructor(
    private readonly encoder: ResourceEncoder,
    options: { maxResponseBytes?: number } = {},
  ) {
    this.responses = new LRUCache<string, BuiltResponse>({
      maxSize: options.maxResponseBytes ?? 256 * 1024 * 1024,
      sizeCalculation: (r) => r.bytes.byteLength + 128,
    });
  }

  /** The content version a view sees of a kind (absent kind = empty). */
  viewVersion(view: ClientView, kind: KindSnapshot | undefined): string {
    return this.viewContent(view, kind).version;
  }

  /** The response for a type URL as a view sees the kind. */
  response(typeUrl: string, view: ClientView, kind: KindSnapshot | undefined): BuiltResponse {
    const key = `${typeUrl}|${view.id}|${kind?.kind ?? ''}|${kind?.generation ?? 0}`;
    const hit = this.responses.get(key);
    if (hit !== undefined) return hit;
    const content = this.viewContent(view, kind);
    const frames = content.resources.map((r) => this.encoder.framed(r));
    const built = this.assemble(typeUrl, content.version, frames);
    this.responses.set(key, built);
    return built;
  }

  /** A response carrying one bare message (MeshConfig): `Any(<bodyTypeUrl>)` of `body`. */
  bareResponse(typeUrl: string, bodyTypeUrl: string, body: Uint8Array): BuiltResponse {
    const version = createHash('sha256').update(body).digest('base64url').slice(0, 16);
    const key = `${typeUrl}|bare|${version}`;
    const hit = this.responses.get(key);
    if (hit !== undefined) return hit;
    const built = this.assemble(typeUrl, version, [bytesField(2, encodeAny(bodyTypeUrl, body))]);
    this.responses.set(key, built);
    return built;
  }

  private assemble(typeUrl: string, version: string, frames: readonly Uint8Array[]): BuiltResponse {
    this.counters.assemblies++;
    const nonce = `${this.bootId}-${++this.nonceCounter}`;
    const bytes = Buffer.concat([
      stringField(1, version),
      ...frames,
      stringField(4, typeUrl),
      stringField(5, nonce),
    ]);
    return Object.freeze({ bytes, typeUrl, version, nonce, resourceCount: frames.length });
  }

  private viewContent(view: ClientView, kind: KindSnapshot | undefined): ViewContent {
    if (kind === undefined) return { version: EMPTY_KIND_VERSION, resources: [] };
    if (view.admitsAll) return { version: kind.version, resources: kind.resources };
    const key = `${view.id}|${kind.kind}|${kind.generation}`;
    const hit = this.contents.get(key);
    if (hit !== undefined) return hit;
    const resources = kind.resources.filter((r) => view.admits(r));
    const h = createHash('sha256');
    for (const r of resources) h.update(`${r.namespace}/${r.name}@${r.version}\n`);
    const content = { version: h.digest('base64url').slice(0, 16), resources };
    this.contents.set(key, content);
    return content;
  }
}
