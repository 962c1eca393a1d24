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
 * A bare ADS stream for protocol tests: send exactly the requests a test writes, read responses
 * one at a time. Nothing is acknowledged unless the test does it.
 */
export class RawAdsStream {
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<MessageInit<DiscoveryRequest>, DiscoveryResponse>;
  private readonly queue: DiscoveryResponse[] = [];
  private waiters: Array<(r: DiscoveryResponse) => void> = [];
  private readonly watchers = new Set<() => void>();
  /** Every response received, in order. */
  readonly received: DiscoveryResponse[] = [];
  /** How the server ended the stream. */
  readonly status: Promise<grpc.StatusObject>;

  constructor(address: string) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure());
    this.call = this.client.makeBidiStreamRequest(
      ADS_STREAM_PATH,
      encodeDiscoveryRequest,
      decodeDiscoveryResponse,
    );
    this.call.on('data', (r: DiscoveryResponse) => {
      this.received.push(r);
      const waiter = this.waiters.shift();
      if (waiter === undefined) this.queue.push(r);
      else waiter(r);
      for (const watch of [...this.watchers]) watch();
    });
    this.call.on('error', () => undefined);
    this.status = new Promise((resolve) => this.call.on('status', resolve));
  }

  send(request: MessageInit<DiscoveryRequest>): void {
    this.call.write(request);
  }

  /** The next response not yet taken; rejects after `timeoutMs`. */
  next(timeoutMs = 5_000): Promise<DiscoveryResponse> {
    const queued = this.queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`no response within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter = (r: DiscoveryResponse): void => {
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
  responseAfter(
    from: number,
    predicate: (r: DiscoveryResponse) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<DiscoveryResponse> {
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
