/**
 * An MCP-over-xDS upstream that is never done: it answers the subscription of its one type URL
 * with `count` ServiceEntries and every ACK at once with the next state, in which every object
 * changed (its `metadata.version`, an annotation and its port's name carry the state's number).
 * The response is encoded once; each next one writes its number over the old one in place, so
 * the upstream costs its process a copy per response, not an encoding of every object.
 */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { anyTypeUrl } from '../../src/schema/proto-root.js';
import { encodeAny, encodeMcpResource, kindNamed } from './fake-objects.js';
import { rawBidiMethod } from './raw-grpc-method.js';
import { SE } from './type-urls.js';
import { Waitable } from './waitable.js';

/** Where each state's number is written: as many digits as this mark has characters. */
const MARK = '@@@@@@@@';

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
  private readonly entries: Buffer;
  private readonly marks: number[] = [];
  private seq = 0;
  private held = false;
  /** Per open stream, the nonce of the response it has not answered yet. */
  private readonly waiting = new Map<grpc.ServerDuplexStream<Buffer, Uint8Array>, string | undefined>();

  private constructor(count: number) {
    super();
    const kind = kindNamed('ServiceEntry');
    const w = protobuf.Writer.create();
    for (let i = 0; i < count; i++) {
      const name = `se-${String(i).padStart(6, '0')}`;
      const resource = encodeMcpResource(
        kind,
        {
          namespace: 'busy',
          name,
          annotations: { 'example.com/state': MARK },
          spec: {
            hosts: [`${name}.busy.example.com`],
            location: 'MESH_EXTERNAL',
            resolution: 'DNS',
            ports: [{ number: 443, name: `https-${MARK}`, protocol: 'TLS' }],
          },
        },
        { version: MARK, createTime: { seconds: 1_700_000_000, nanos: 0 } },
      );
      w.uint32((2 << 3) | 2).bytes(encodeAny(anyTypeUrl('istio.mcp.v1alpha1.Resource'), resource));
    }
    this.entries = Buffer.from(w.finish());
    for (let at = this.entries.indexOf(MARK); at >= 0; at = this.entries.indexOf(MARK, at + MARK.length))
      this.marks.push(at);
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
    return this.entries.byteLength;
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
    const digits = String(seq % 10 ** MARK.length).padStart(MARK.length, '0');
    for (const at of this.marks) this.entries.write(digits, at, 'latin1');
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
    call.write(Buffer.concat([head, this.entries, tail]));
    this.notify();
  }
}
