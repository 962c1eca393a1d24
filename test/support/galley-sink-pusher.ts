/** A fake Galley that dials meshmux's `ResourceSink` (spec §4.6) and serves it. Records every request. */
import * as grpc from '@grpc/grpc-js';
import { KINDS } from '../../src/schema/kinds.js';
import { messageType } from '../../src/schema/proto-root.js';
import type { FakeGalleyOptions } from './fake-galley.js';
import type { FakeObject } from './fake-objects.js';
import { FakeStore } from './fake-store.js';
import {
  GalleySession,
  decodeRequestResources,
  type GalleyState,
  type RecordedMcpRequest,
} from './galley-session.js';
import { rawBytes, toBuffer } from './raw-grpc-method.js';
import { Waitable } from './waitable.js';

const RESOURCES = messageType('istio.mcp.v1alpha1.Resources');

/** Options of a {@link GalleySinkPusher}: a Galley's, and how it dials the sink. */
export interface GalleySinkPusherOptions extends FakeGalleyOptions {
  /** Default plaintext; TLS credentials trusting the sink's CA (and a client certificate for mTLS). */
  readonly credentials?: grpc.ChannelCredentials;
  /** Extra channel options (e.g. `grpc.ssl_target_name_override`). */
  readonly channelOptions?: grpc.ChannelOptions;
}

/**
 * A Galley configured with a sink address: dials `ResourceSink`, sends the empty-collection
 * trigger first, then serves the sink's requests like a `ResourceSource`.
 */
export class GalleySinkPusher extends Waitable implements GalleyState {
  readonly store = new FakeStore();
  readonly collections: ReadonlySet<string>;
  readonly allowIncremental: boolean;
  readonly requests: RecordedMcpRequest[] = [];
  /** How each stream ended with an error (a refused TLS handshake: UNAVAILABLE), in order. */
  readonly failures: Array<{
    readonly stream: number;
    readonly code: grpc.status;
    readonly details: string;
  }> = [];
  /** Set once the sink NACKed the trigger with UNIMPLEMENTED, as a Galley expects. */
  triggerRefused = false;
  /** The last stream whose trigger the sink refused so: the sink took that connection. */
  answeredStream = 0;
  snapshotVersion = 1;
  private readonly client: grpc.Client;
  private call: grpc.ClientDuplexStream<Uint8Array, Buffer> | undefined;
  private session: GalleySession | undefined;
  private streamCount = 0;

  constructor(address: string, options: GalleySinkPusherOptions = {}) {
    super();
    this.collections = new Set(
      options.collections ??
        KINDS.kinds.flatMap((k) => (k.legacyCollection === undefined ? [] : [k.legacyCollection])),
    );
    this.allowIncremental = options.incremental ?? true;
    this.client = new grpc.Client(
      address,
      options.credentials ?? grpc.credentials.createInsecure(),
      options.channelOptions,
    );
  }

  set(kindName: string, objects: readonly FakeObject[]): this {
    this.store.set(kindName, objects);
    return this;
  }

  /** The number of the stream {@link connect} opened last (from 1). */
  get stream(): number {
    return this.streamCount;
  }

  /** Opens a stream (closing the previous one) and sends the trigger. */
  connect(): this {
    this.call?.cancel();
    const id = ++this.streamCount;
    const call = this.client.makeBidiStreamRequest<Uint8Array, Buffer>(
      '/istio.mcp.v1alpha1.ResourceSink/EstablishResourceStream',
      toBuffer,
      rawBytes,
    );
    this.call = call;
    const session = new GalleySession(
      id,
      this,
      (bytes) => call.write(bytes),
      () => call.cancel(),
    );
    this.session = session;
    call.on('error', (err: grpc.ServiceError) => {
      this.failures.push({ stream: id, code: err.code, details: err.details });
      this.notify();
    });
    call.on('data', (bytes: Buffer) => {
      const req = decodeRequestResources(id, bytes);
      this.requests.push(req);
      if (req.collection === '' && req.errorDetail?.code === grpc.status.UNIMPLEMENTED) {
        this.triggerRefused = true;
        this.answeredStream = id;
      } else session.onRequest(req);
      this.notify();
    });
    call.write(RESOURCES.encode(RESOURCES.fromObject({ collection: '' })).finish());
    return this;
  }

  push(): void {
    this.snapshotVersion++;
    this.session?.push();
  }

  /** Ends the stream as a Galley going away would. */
  disconnect(): void {
    this.call?.cancel();
    this.call = undefined;
    this.session = undefined;
  }

  close(): void {
    this.disconnect();
    this.client.close();
  }
}
