import * as grpc from '@grpc/grpc-js';
import {
  ADS_STREAM_PATH,
  decodeDiscoveryResponse,
  encodeDiscoveryRequest,
  type DiscoveryRequest,
  type DiscoveryResponse,
  type MessageInit,
} from './ads-wire.js';

/**
 * A bare bidirectional stream for protocol tests: send exactly the requests a test writes, read
 * responses one at a time. Nothing is acknowledged unless the test does it.
 */
export class RawBidiStream<Req, Res> {
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<Req, Res>;
  private readonly queue: Res[] = [];
  private waiters: Array<(r: Res) => void> = [];
  private readonly watchers = new Set<() => void>();
  /** Every response received, in order. */
  readonly received: Res[] = [];
  /** How the server ended the stream. */
  readonly status: Promise<grpc.StatusObject>;

  constructor(
    address: string,
    method: string,
    encode: (request: Req) => Buffer,
    decode: (bytes: Buffer) => Res,
  ) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure());
    this.call = this.client.makeBidiStreamRequest(method, encode, decode);
    this.call.on('data', (r: Res) => {
      this.received.push(r);
      const waiter = this.waiters.shift();
      if (waiter === undefined) this.queue.push(r);
      else waiter(r);
      for (const watch of [...this.watchers]) watch();
    });
    this.call.on('error', () => undefined);
    this.status = new Promise((resolve) => this.call.on('status', resolve));
  }

  send(request: Req): void {
    this.call.write(request);
  }

  /** The next response not yet taken; rejects after `timeoutMs`. */
  next(timeoutMs = 5_000): Promise<Res> {
    const queued = this.queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`no response within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter = (r: Res): void => {
        clearTimeout(timer);
        resolve(r);
      };
      this.waiters.push(waiter);
    });
  }

  /**
   * The first response in {@link received} at index `from` or later that matches `predicate`,
   * now or once it arrives; independent of {@link next}'s queue. Rejects after `timeoutMs`
   * naming `what`.
   */
  responseAfter(from: number, predicate: (r: Res) => boolean, timeoutMs: number, what: string): Promise<Res> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const found = this.received.slice(from).find(predicate);
        if (found === undefined) return false;
        clearTimeout(timer);
        this.watchers.delete(watch);
        resolve(found);
        return true;
      };
      const watch = (): void => void check();
      const timer = setTimeout(() => {
        this.watchers.delete(watch);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      if (!check()) this.watchers.add(watch);
    });
  }

  /** Responses received but not taken yet. */
  pending(): number {
    return this.queue.length;
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

/** A bare state-of-the-world ADS stream (`StreamAggregatedResources`). */
export class RawAdsStream extends RawBidiStream<MessageInit<DiscoveryRequest>, DiscoveryResponse> {
  constructor(address: string) {
    super(address, ADS_STREAM_PATH, encodeDiscoveryRequest, decodeDiscoveryResponse);
  }
}
