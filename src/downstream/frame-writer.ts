import { constants as http2 } from 'node:http2';
import { Metadata, type ServerDuplexStream, status as grpcStatus } from '@grpc/grpc-js';

/**
 * Writes one serialized message, given as the buffers it is the concatenation of, to a stream;
 * `done` runs once it has been handed to the socket.
 */
export type FrameWriter = (message: readonly Buffer[], byteLength: number, done: () => void) => void;

/** The part of Node's HTTP/2 stream the writer uses. */
interface Http2Out {
  readonly destroyed: boolean;
  readonly writableEnded: boolean;
  write(chunk: Buffer, cb?: (err?: Error | null) => void): boolean;
  cork(): void;
  uncork(): void;
  respond: unknown;
  close?(code?: number): void;
}

/** The HTTP/2 stream under a grpc-js server call, when this grpc-js version exposes it as expected. */
function http2StreamOf(call: unknown): Http2Out | undefined {
  const inner = (call as { call?: { stream?: Partial<Http2Out> } }).call?.stream;
  if (
    inner === undefined ||
    typeof inner.write !== 'function' ||
    typeof inner.cork !== 'function' ||
    typeof inner.respond !== 'function'
  ) {
    return undefined;
  }
  return inner as Http2Out;
}

/**
 * Whether `call` takes the shared-buffer path of {@link frameWriterFor}: the one place meshmux
 * relies on grpc-js internals (a server call's HTTP/2 stream). False means the pinned grpc-js
 * changed them and every message is copied again (about 2× server CPU on large pushes).
 */
export function sharesBuffers(call: ServerDuplexStream<Uint8Array, Buffer>): boolean {
  return http2StreamOf(call) !== undefined;
}

/**
 * A writer that hands the shared response buffers themselves to HTTP/2. grpc-js frames a message by
 * allocating a new buffer and copying it (`serializeMessage`), per stream and per write: 200
 * istiods receiving one 40 MB response cost 8 GB of copies, and each copy, counted by V8 as
 * external memory, brings a full garbage collection of the server's heap closer. Written as a
 * 5-byte gRPC prefix followed by the shared buffers, every stream points at the same bytes until
 * HTTP/2 has sent them.
 *
 * The response headers go out through grpc-js first (`sendMetadata`), and the status trailers at
 * the end are grpc-js's as usual, so only the messages take the short path. When the call does not
 * expose its HTTP/2 stream as expected (another grpc-js version), messages go through `call.write`.
 */
export function frameWriterFor(call: ServerDuplexStream<Uint8Array, Buffer>): FrameWriter {
  const out = http2StreamOf(call);
  if (out === undefined) {
    return (message, _length, done) =>
      void call.write(message.length === 1 ? (message[0] as Buffer) : Buffer.concat(message), done);
  }
  let headersSent = false;
  return (message, byteLength, done) => {
    if (out.destroyed || out.writableEnded) return;
    if (!headersSent) {
      headersSent = true;
      call.sendMetadata(new Metadata());
    }
    const prefix = Buffer.allocUnsafe(5);
    prefix.writeUInt8(0, 0);
    prefix.writeUInt32BE(byteLength, 1);
    // Corked, the prefix and every chunk reach HTTP/2 as one vectored write.
    out.cork();
    out.write(prefix);
    const last = message.length - 1;
    message.forEach((chunk, i) => {
      if (i === last) out.write(chunk, () => done());
      else out.write(chunk);
    });
    if (last < 0) done();
    out.uncork();
  };
}

/**
 * Ends a call with UNAVAILABLE at once, whatever is still queued on it. A status goes out in
 * trailers, which HTTP/2 sends only after the data queued before them, so a peer that stopped
 * reading would never see it: the stream is reset with REFUSED_STREAM instead, which gRPC clients
 * (grpc-go, as in istiod, and grpc-js) report as UNAVAILABLE and retry by reconnecting. When the call
 * does not expose its HTTP/2 stream, the status is queued the ordinary way.
 */
export function abortUnavailable(call: ServerDuplexStream<Uint8Array, Buffer>, details: string): void {
  const out = http2StreamOf(call);
  if (out?.close !== undefined && !out.destroyed) {
    out.close(http2.NGHTTP2_REFUSED_STREAM);
    return;
  }
  call.emit('error', { code: grpcStatus.UNAVAILABLE, details });
}
