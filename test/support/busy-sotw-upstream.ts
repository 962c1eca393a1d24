/**
 * An MCP-over-xDS upstream that is never done: it answers the subscription of its one type URL
 * with `count` ServiceEntries and every ACK at once with the next state, in which every object
 * changed (see {@link ChangingServiceEntries}).
 */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { anyTypeUrl } from '../../src/schema/proto-root.js';
import { ChangingServiceEntries } from './changing-service-entries.js';
import { encodeAny } from './fake-objects.js';
import { rawBidiMethod } from './raw-grpc-method.js';
import { SE } from './type-urls.js';
import { Waitable } from './waitable.js';

/** One response the upstream sent, and when (`performance.now()`). */
export interface BusyResponse {
  readonly seq: number;
  readonly sentAt: number;
}

/** One answer it received to a response, and when. */
export interface BusyAnswer {
  readonly seq: number;
  readonly ack: boolean;
  readonly at: number;
}

/** Reads the type URL (4), nonce (5) and whether an error detail (7) is present in a DiscoveryRequest. */
function requestFields(bytes: Buffer): { typeUrl: string; nonce: string; nack: boolean } {
  const reader = protobuf.Reader.create(bytes);
  let typeUrl = '';
  let nonce = '';
  let nack = false;
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if (field === 4) typeUrl = reader.string();
    else if (field === 5) nonce = reader.string();
    else {
      if (field === 7) nack = true;
      reader.skipType(tag & 7);
    }
  }
  return { typeUrl, nonce, nack };
}

/** A SotW ADS upstream answering every ACK of `networking.istio.io/v1/ServiceEntry` with a new state. */
export class BusySotwUpstream extends Waitable {
  /** Every response sent, in order. */
  readonly sent: BusyResponse[] = [];
  /** Every ACK or NACK received for a response, in order. */
  readonly answers: BusyAnswer[] = [];
  private server: grpc.Server | undefined;
  private port = 0;
  private readonly state: ChangingServiceEntries;
  private seq = 0;
  private held = false;
  /** Per open stream, the nonce of the response it has not answered yet. */
  private readonly waiting = new Map<grpc.ServerDuplexStream<Buffer, Uint8Array>, string | undefined>();

  private constructor(count: number) {
    super();
    const any = anyTypeUrl('istio.mcp.v1alpha1.Resource');
    this.state = new ChangingServiceEntries(count, (w, resource) =>
      w.uint32((2 << 3) | 2).bytes(encodeAny(any, resource)),
    );
  }

  /** Listens on 127.0.0.1 with `count` ServiceEntries. */
  static async start(count: number): Promise<BusySotwUpstream> {
    const upstream = new BusySotwUpstream(count);
    const server = new grpc.Server();
    server.addService(
      {
        StreamAggregatedResources: rawBidiMethod(
          '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources',
        ),
      },
      {
        StreamAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Uint8Array>) =>
          upstream.onStream(call),
      },
    );
    upstream.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    upstream.server = server;
    return upstream;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Bytes of one response's entries. */
  get responseBytes(): number {
    return this.state.bytes.byteLength;
  }

  /**
   * Stops answering ACKs with a new state (a subscription is still answered); `resume()` answers
   * the streams waiting since.
   */
  hold(): void {
    this.held = true;
  }

  /** Answers again, at once on every stream whose last response was answered. */
  resume(): void {
    this.held = false;
    for (const [call, nonce] of this.waiting) if (nonce === undefined) this.respond(call);
  }

  /** ACKs received so far. */
  get acks(): number {
    return this.answers.filter((a) => a.ack).length;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.waiting.clear();
    server?.forceShutdown();
    await Promise.resolve();
  }

  private onStream(call: grpc.ServerDuplexStream<Buffer, Uint8Array>): void {
    const gone = (): void => {
      this.waiting.delete(call);
    };
    call.on('error', gone);
    call.on('cancelled', gone);
    call.on('end', () => {
      gone();
      call.end();
    });
    call.on('data', (bytes: Buffer) => {
      const { typeUrl, nonce, nack } = requestFields(bytes);
      if (typeUrl !== SE) return;
      if (nonce !== '') {
        if (nonce !== this.waiting.get(call)) return;
        this.answers.push({ seq: Number(nonce.split('-')[1]), ack: !nack, at: performance.now() });
        this.waiting.set(call, undefined);
        this.notify();
      }
      if (nonce === '' || !this.held) this.respond(call);
    });
  }

  private respond(call: grpc.ServerDuplexStream<Buffer, Uint8Array>): void {
    const seq = ++this.seq;
    this.state.stamp(seq);
    const nonce = `n-${seq}`;
    const head = protobuf.Writer.create()
      .uint32((1 << 3) | 2)
      .string(`v-${seq}`)
      .finish();
    const tail = protobuf.Writer.create()
      .uint32((4 << 3) | 2)
      .string(SE)
      .uint32((5 << 3) | 2)
      .string(nonce)
      .finish();
    this.waiting.set(call, nonce);
    this.sent.push({ seq, sentAt: performance.now() });
    call.write(Buffer.concat([head, this.state.bytes, tail]));
    this.notify();
  }
}
