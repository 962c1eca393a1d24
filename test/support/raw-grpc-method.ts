/**
 * gRPC methods whose messages stay bytes: the test encodes and decodes them itself with the
 * project's protobuf types, so it can also send what a real peer would never send.
 */
import type * as grpc from '@grpc/grpc-js';

/** Bytes as the Buffer gRPC writes, sharing their memory (no copy). */
export const toBuffer = (m: Uint8Array): Buffer => Buffer.from(m.buffer, m.byteOffset, m.byteLength);

/** A received message as it came: its raw bytes. */
export const rawBytes = (b: Buffer): Buffer => b;

/** A bidirectional streaming method at `path`, raw bytes both ways, for `Server.addService`. */
export function rawBidiMethod(path: string): grpc.MethodDefinition<Buffer, Uint8Array> {
  return {
    path,
    requestStream: true,
    responseStream: true,
    requestSerialize: toBuffer,
    requestDeserialize: rawBytes,
    responseSerialize: toBuffer,
    responseDeserialize: rawBytes,
  };
}
