/**
 * A loopback TCP relay that a test can freeze, as a network partition or a vanished peer would:
 * `pause()` stops moving bytes both ways on the open connections and keeps each side from
 * seeing the other close (no FIN, no RST crosses); `resume()` moves bytes again and delivers any
 * close that happened meanwhile. Lets a test make a ZooKeeper server expire a client's session,
 * or leave a client on a silent connection. `holdNext` freezes only the next connections made,
 * as a server that accepts a connection and never answers it would; `closeEach` cuts each new
 * connection after a while. `accepted` counts the connections a client made.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
  frozen: boolean;
  /** A side closed while frozen: close the other on resume. */
  closePending: boolean;
}

export class TcpProxy {
  private readonly pairs = new Set<Pair>();
  private readonly server: Server;
  private listeningPort = 0;
  private holdNew = false;
  private holdCount = 0;
  private acceptedCount = 0;
  private closeAfterMs: number | undefined;

  private constructor(targetPort: number) {
    this.server = createServer((client) => {
      this.acceptedCount++;
      this.relay(client, targetPort);
    });
  }

  /** Listens on a free 127.0.0.1 port and relays every connection to `127.0.0.1:targetPort`. */
  static async start(targetPort: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(targetPort);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    const address = proxy.server.address();
    proxy.listeningPort = typeof address === 'object' && address !== null ? address.port : 0;
    return proxy;
  }

  get port(): number {
    return this.listeningPort;
  }

  /** `127.0.0.1:<port>`. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Connections accepted from clients since the relay started. */
  get accepted(): number {
    return this.acceptedCount;
  }

  /** Local ports of the relay's connections to the target (what the target sees as clients). */
  get upstreamPorts(): number[] {
    return [...this.pairs].flatMap((p) => (p.upstream.localPort === undefined ? [] : [p.upstream.localPort]));
  }

  /**
   * Freezes the open connections. `newConnections: 'hold'` (a partition) freezes connections
   * made later too; `'flow'` (one dead connection) lets them through.
   */
  pause(options: { newConnections?: 'hold' | 'flow' } = {}): void {
    this.holdNew = (options.newConnections ?? 'hold') === 'hold';
    for (const p of this.pairs) this.freeze(p);
  }

  /** Freezes the next `count` connections made, from their first byte; later ones flow. */
  holdNext(count: number): void {
    this.holdCount = count;
  }

  /**
   * Closes each connection made from now on `ms` after it was accepted, as a server or a proxy
   * that cuts its connections would (undefined: leaves them open again).
   */
  closeEach(ms: number | undefined): void {
    this.closeAfterMs = ms;
  }

  /** Closes every open connection on both sides, as a restarting server would. */
  dropConnections(): void {
    for (const p of [...this.pairs]) this.tearDown(p);
  }

  resume(): void {
    this.holdNew = false;
    for (const p of [...this.pairs]) {
      p.frozen = false;
      if (p.closePending) {
        this.tearDown(p);
        continue;
      }
      p.client.resume();
      p.upstream.resume();
    }
  }

  async close(): Promise<void> {
    for (const p of [...this.pairs]) this.tearDown(p);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private freeze(p: Pair): void {
    p.frozen = true;
    p.client.pause();
    p.upstream.pause();
  }

  private tearDown(p: Pair): void {
    this.pairs.delete(p);
    p.client.destroy();
    p.upstream.destroy();
  }

  private relay(client: Socket, targetPort: number): void {
    const upstream = connect(targetPort, '127.0.0.1');
    const pair: Pair = { client, upstream, frozen: false, closePending: false };
    this.pairs.add(pair);
    // Manual forwarding rather than pipe(): pipe() resumes a paused source on 'drain'.
    client.on('data', (d: Buffer) => upstream.write(d));
    upstream.on('data', (d: Buffer) => client.write(d));
    const ended = (): void => {
      if (pair.frozen) pair.closePending = true;
      else this.tearDown(pair);
    };
    for (const s of [client, upstream]) {
      s.on('error', ended);
      s.on('close', ended);
      s.on('end', ended);
    }
    const closeAfterMs = this.closeAfterMs;
    if (closeAfterMs !== undefined) {
      const timer = setTimeout(() => this.tearDown(pair), closeAfterMs);
      client.once('close', () => clearTimeout(timer));
    }
    if (this.holdCount > 0) {
      this.holdCount--;
      this.freeze(pair);
    } else if (this.holdNew) {
      this.freeze(pair);
    }
  }
}
