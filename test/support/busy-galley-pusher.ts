/**
 * A Galley with a sink address that is never done: it dials meshmux's `ResourceSink`, sends the
 * empty trigger, answers the request for ServiceEntries with `count` of them, and every ACK at
 * once with the next full state, in which every object changed (see
 * {@link ChangingServiceEntries}). Records what it sent, what came back, and how its stream ended.
 */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import type { BusyAnswer, BusyResponse } from './busy-sotw-upstream.js';
import { ChangingServiceEntries } from './changing-service-entries.js';
import { decodeRequestResources } from './galley-session.js';
import { rawBytes, toBuffer } from './raw-grpc-method.js';
import { Waitable } from './waitable.js';

const SE_COLLECTION = 'istio/networking/v1alpha3/serviceentries';

/** A Galley pushing a new state of 20,000-odd ServiceEntries to a sink as soon as it ACKs the last. */
export class BusyGalleyPusher extends Waitable {
  /** Every `Resources` sent, in order. */
  readonly sent: BusyResponse[] = [];
  /** Every ACK or NACK of one, in order. */
  readonly answers: BusyAnswer[] = [];
  /** How its stream ended with an error, in order: none while meshmux keeps it. */
  readonly failures: Array<{ readonly code: grpc.status; readonly details: string }> = [];
  private readonly client: grpc.Client;
  private readonly state: ChangingServiceEntries;
  private call: grpc.ClientDuplexStream<Uint8Array, Buffer> | undefined;
  private seq = 0;
  private held = false;
  /** The nonce of the state not answered yet; undefined: answered (or none asked for yet). */
  private pending: string | undefined;
  /** The sink asked for ServiceEntries on the stream. */
  private subscribed = false;

  constructor(address: string, count: number) {
    super();
    this.state = new ChangingServiceEntries(count, (w, resource) => w.uint32((3 << 3) | 2).bytes(resource));
    this.client = new grpc.Client(address, grpc.credentials.createInsecure());
  }

  /** Opens the stream and sends the trigger; the sink's request for ServiceEntries is answered at once. */
  connect(): this {
    const call = this.client.makeBidiStreamRequest<Uint8Array, Buffer>(
      '/istio.mcp.v1alpha1.ResourceSink/EstablishResourceStream',
      toBuffer,
      rawBytes,
    );
    this.call = call;
    call.on('error', (err: grpc.ServiceError) => {
      this.failures.push({ code: err.code, details: err.details });
      this.notify();
    });
    call.on('data', (bytes: Buffer) => {
      const req = decodeRequestResources(1, bytes);
      if (req.collection !== SE_COLLECTION) return;
      if (req.nonce === '') {
        this.subscribed = true;
        this.respond();
        return;
      }
      if (req.nonce !== this.pending) return;
      this.answers.push({
        seq: Number(req.nonce.split('-')[1]),
        ack: req.errorDetail === null,
        at: performance.now(),
      });
      this.pending = undefined;
      this.notify();
      if (!this.held) this.respond();
    });
    call.write(
      protobuf.Writer.create()
        .uint32((2 << 3) | 2)
        .string('')
        .finish(),
    );
    return this;
  }

  /** Stops sending a new state on an ACK; `resume()` sends the next one if the last was answered. */
  hold(): void {
    this.held = true;
  }

  resume(): void {
    this.held = false;
    if (this.subscribed && this.pending === undefined) this.respond();
  }

  /** ACKs received so far. */
  get acks(): number {
    return this.answers.filter((a) => a.ack).length;
  }

  close(): void {
    this.call?.cancel();
    this.call = undefined;
    this.client.close();
  }

  private respond(): void {
    const call = this.call;
    if (call === undefined) return;
    const seq = ++this.seq;
    this.state.stamp(seq);
    const nonce = `n-${seq}`;
    const head = protobuf.Writer.create()
      .uint32((1 << 3) | 2)
      .string(`v-${seq}`)
      .uint32((2 << 3) | 2)
      .string(SE_COLLECTION)
      .finish();
    const tail = protobuf.Writer.create()
      .uint32((5 << 3) | 2)
      .string(nonce)
      .finish();
    this.pending = nonce;
    this.sent.push({ seq, sentAt: performance.now() });
    call.write(Buffer.concat([head, this.state.bytes, tail]));
    this.notify();
  }
}
