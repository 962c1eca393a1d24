import type { IncomingHttpHeaders } from 'node:http';
import { type ClientHttp2Session, type ClientHttp2Stream, connect, constants } from 'node:http2';
import { ADS_STREAM_PATH, encodeDiscoveryRequest, stringStruct } from './ads-wire.js';

/** How the stalled stream ended, as its HTTP/2 peer saw it. */
export interface StalledEnd {
  /** The RST_STREAM code, when the server reset the stream. */
  readonly rstCode: number | undefined;
  /** `grpc-status` from trailers, when any arrived. */
  readonly grpcStatus: number | undefined;
}

/**
 * An ADS client that subscribes and then never reads: a raw HTTP/2 client with a tiny stream
 * window whose stream is paused, so the server can send a few KB and then nothing more, while the
 * connection stays healthy (PINGs are answered, as a stuck istiod's runtime would). What gRPC
 * would report for the stream's end is derived from the RST_STREAM code the way grpc-js and
 * grpc-go do: REFUSED_STREAM is UNAVAILABLE.
 */
export class StalledAdsClient {
  readonly ended: Promise<StalledEnd>;
  private readonly session: ClientHttp2Session;
  private readonly stream: ClientHttp2Stream;

  constructor(
    address: string,
    typeUrls: readonly string[],
    nodeId: string,
    metadata: Record<string, string> = {},
    /** The local address to connect from (any of 127.0.0.0/8 on loopback): another peer address. */
    localAddress?: string,
  ) {
    this.session = connect(`http://${address}`, {
      settings: { initialWindowSize: 1024 },
      ...(localAddress === undefined ? {} : { localAddress }),
    });
    this.session.on('error', () => undefined);
    this.stream = this.session.request({
      ':method': 'POST',
      ':path': ADS_STREAM_PATH,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    this.stream.on('error', () => undefined);
    let grpcStatus: number | undefined;
    this.stream.on('trailers', (headers: IncomingHttpHeaders) => {
      const value = headers['grpc-status'];
      if (value !== undefined) grpcStatus = Number(value);
    });
    this.ended = new Promise((resolve) =>
      this.stream.once('close', () => resolve({ rstCode: this.stream.rstCode, grpcStatus })),
    );
    typeUrls.forEach((typeUrl, i) => {
      const body = encodeDiscoveryRequest({
        type_url: typeUrl,
        ...(i === 0 ? { node: { id: nodeId, metadata: stringStruct(metadata) } } : {}),
      });
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(body.byteLength, 1);
      this.stream.write(Buffer.concat([prefix, body]));
    });
    // Never read: nothing is consumed, so no window update ever reaches the server.
    this.stream.pause();
  }

  /** The gRPC status code a gRPC client would report for how the stream ended. */
  static statusOf(end: StalledEnd): number | undefined {
    if (end.grpcStatus !== undefined) return end.grpcStatus;
    if (end.rstCode === constants.NGHTTP2_REFUSED_STREAM) return 14; // UNAVAILABLE
    if (end.rstCode === constants.NGHTTP2_CANCEL) return 1; // CANCELLED
    return end.rstCode === undefined ? undefined : 13; // INTERNAL
  }

  close(): void {
    this.stream.destroy();
    this.session.destroy();
  }
}
