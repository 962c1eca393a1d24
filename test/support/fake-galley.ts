/**
 * A fake Galley-era `ResourceSource` (full state or incremental, nonces "1", "2", ..., an unknown
 * collection closes the whole stream) that meshmux dials (`type: mcp`). Records every request.
 */
import * as grpc from '@grpc/grpc-js';
import { KINDS } from '../../src/schema/kinds.js';
import type { FakeObject } from './fake-objects.js';
import { FakeStore } from './fake-store.js';
import {
  GalleySession,
  decodeRequestResources,
  type GalleyState,
  type RecordedMcpRequest,
} from './galley-session.js';
import { rawBidiMethod } from './raw-grpc-method.js';
import { Waitable } from './waitable.js';

export interface FakeGalleyOptions {
  /** Collections served; default every collection of the registry. */
  readonly collections?: readonly string[];
  /** Answer incrementally when a sink asks. Default true. */
  readonly incremental?: boolean;
  /** Record requests and answer none: the test writes every message itself ({@link FakeGalley.sendRaw}). */
  readonly scripted?: boolean;
}

/** A Galley serving `ResourceSource` (meshmux dials it: `type: mcp`). */
export class FakeGalley extends Waitable implements GalleyState {
  readonly store = new FakeStore();
  readonly collections: ReadonlySet<string>;
  readonly allowIncremental: boolean;
  readonly scripted: boolean;
  readonly requests: RecordedMcpRequest[] = [];
  snapshotVersion = 1;
  private server: grpc.Server | undefined;
  private readonly sessions = new Map<GalleySession, grpc.ServerDuplexStream<Buffer, Uint8Array>>();
  private streamCount = 0;
  private port = 0;

  private constructor(options: FakeGalleyOptions) {
    super();
    this.collections = new Set(
      options.collections ??
        KINDS.kinds.flatMap((k) => (k.legacyCollection === undefined ? [] : [k.legacyCollection])),
    );
    this.allowIncremental = options.incremental ?? true;
    this.scripted = options.scripted ?? false;
  }

  static async start(options: FakeGalleyOptions = {}, port = 0): Promise<FakeGalley> {
    const galley = new FakeGalley(options);
    await galley.listen(port);
    return galley;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get streams(): number {
    return this.streamCount;
  }

  set(kindName: string, objects: readonly FakeObject[]): this {
    this.store.set(kindName, objects);
    return this;
  }

  /** A new snapshot: every open watch gets it (after its outstanding ACK). */
  push(): void {
    this.snapshotVersion++;
    for (const session of this.sessions.keys()) session.push();
  }

  sendRaw(bytes: Uint8Array): void {
    for (const call of this.sessions.values()) call.write(bytes);
  }

  disconnectAll(): void {
    for (const call of this.sessions.values()) {
      call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'fake galley dropped the stream' });
    }
    this.sessions.clear();
    this.notify();
  }

  async stop(): Promise<void> {
    this.server?.forceShutdown();
    this.server = undefined;
    this.sessions.clear();
    await Promise.resolve();
    this.notify();
  }

  async restart(options: { empty?: boolean } = {}): Promise<void> {
    await this.stop();
    if (options.empty === true) this.store.clear();
    await this.listen(this.port);
  }

  private async listen(port: number): Promise<void> {
    const server = new grpc.Server();
    server.addService(
      {
        EstablishResourceStream: rawBidiMethod('/istio.mcp.v1alpha1.ResourceSource/EstablishResourceStream'),
      },
      {
        EstablishResourceStream: (call: grpc.ServerDuplexStream<Buffer, Uint8Array>) => {
          const session = new GalleySession(
            ++this.streamCount,
            this,
            (bytes) => call.write(bytes),
            (code, details) => {
              this.sessions.delete(session);
              call.emit('error', { code, details });
              this.notify();
            },
          );
          this.sessions.set(session, call);
          const gone = (): void => {
            this.sessions.delete(session);
            this.notify();
          };
          call.on('error', gone);
          call.on('cancelled', gone);
          call.on('data', (bytes: Buffer) => {
            const req = decodeRequestResources(session.id, bytes);
            this.requests.push(req);
            if (!this.scripted) session.onRequest(req);
            this.notify();
          });
          this.notify();
        },
      },
    );
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    this.server = server;
  }
}
