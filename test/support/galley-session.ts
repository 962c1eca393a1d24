/** The source side of Galley-era MCP that {@link FakeGalley} and {@link GalleySinkPusher} share. */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { KINDS } from '../../src/schema/kinds.js';
import { messageType } from '../../src/schema/proto-root.js';
import { encodeMcpResource } from './fake-objects.js';
import type { FakeStore } from './fake-store.js';

const REQUEST_RESOURCES = messageType('istio.mcp.v1alpha1.RequestResources');

/** One `RequestResources` as a Galley received it. */
export interface RecordedMcpRequest {
  readonly stream: number;
  readonly collection: string;
  readonly nonce: string;
  readonly incremental: boolean;
  readonly sinkNode: { id?: string; annotations?: Record<string, string> } | null;
  readonly initialVersions: Record<string, string>;
  readonly errorDetail: { code?: number; message?: string } | null;
}

interface Watch {
  incremental: boolean;
  pending: { nonce: string; versions: Map<string, string> } | undefined;
  acked: Map<string, string>;
  dirty: boolean;
}

/**
 * The source side of Galley-era MCP for one stream, whichever end dialed (spec §4.6): answers a
 * new watch at once, holds one outstanding `Resources` per collection, treats other nonces as
 * stale, sends incremental answers only when asked and allowed, and ends the stream on an
 * unknown collection.
 */
export class GalleySession {
  private nonce = 0;
  private readonly watches = new Map<string, Watch>();

  constructor(
    readonly id: number,
    private readonly galley: GalleyState,
    private readonly send: (bytes: Uint8Array) => void,
    private readonly fail: (code: grpc.status, details: string) => void,
  ) {}

  onRequest(req: RecordedMcpRequest): void {
    if (!this.galley.collections.has(req.collection)) {
      this.fail(grpc.status.INVALID_ARGUMENT, `unsupported collection ${req.collection}`);
      return;
    }
    const watch = this.watches.get(req.collection);
    if (req.nonce === '' || watch === undefined) {
      this.watches.set(req.collection, {
        incremental: req.incremental && this.galley.allowIncremental,
        pending: undefined,
        acked: new Map(),
        dirty: false,
      });
      this.respond(req.collection);
      return;
    }
    if (watch.pending === undefined || watch.pending.nonce !== req.nonce) return; // stale
    if (req.errorDetail === null) watch.acked = watch.pending.versions;
    watch.pending = undefined;
    if (watch.dirty) this.respond(req.collection);
  }

  push(): void {
    for (const [collection, watch] of this.watches) {
      if (watch.pending !== undefined) watch.dirty = true;
      else this.respond(collection);
    }
  }

  private respond(collection: string): void {
    const watch = this.watches.get(collection);
    const kind = KINDS.fromCollection(collection);
    if (watch === undefined || kind === undefined) return;
    watch.dirty = false;
    const objects = this.galley.store.objects(kind);
    const versions = new Map(
      objects.map((s) => [`${s.object.namespace}/${s.object.name}`, s.resourceVersion]),
    );
    const nonce = String(++this.nonce);
    const w = protobuf.Writer.create();
    w.uint32((1 << 3) | 2).string(String(this.galley.snapshotVersion));
    w.uint32((2 << 3) | 2).string(collection);
    for (const s of objects) {
      const name = `${s.object.namespace}/${s.object.name}`;
      if (watch.incremental && watch.acked.get(name) === s.resourceVersion) continue;
      w.uint32((3 << 3) | 2).bytes(
        encodeMcpResource(kind, s.object, { version: s.resourceVersion, createTime: s.createTime }),
      );
    }
    if (watch.incremental) {
      for (const name of watch.acked.keys()) if (!versions.has(name)) w.uint32((4 << 3) | 2).string(name);
    }
    w.uint32((5 << 3) | 2).string(nonce);
    if (watch.incremental) w.uint32(6 << 3).bool(true);
    watch.pending = { nonce, versions };
    this.send(w.finish());
  }
}

/** What every Galley session reads. */
export interface GalleyState {
  readonly store: FakeStore;
  readonly collections: ReadonlySet<string>;
  readonly allowIncremental: boolean;
  readonly snapshotVersion: number;
}

/** Decodes a `RequestResources` as stream `stream` received it. */
export function decodeRequestResources(stream: number, bytes: Uint8Array): RecordedMcpRequest {
  const req = REQUEST_RESOURCES.toObject(REQUEST_RESOURCES.decode(bytes), {
    defaults: true,
    arrays: true,
  }) as {
    collection: string;
    response_nonce: string;
    incremental: boolean;
    sink_node: RecordedMcpRequest['sinkNode'];
    initial_resource_versions: Record<string, string>;
    error_detail: RecordedMcpRequest['errorDetail'];
  };
  return {
    stream,
    collection: req.collection,
    nonce: req.response_nonce,
    incremental: req.incremental,
    sinkNode: req.sink_node,
    initialVersions: req.initial_resource_versions,
    errorDetail: req.error_detail,
  };
}
