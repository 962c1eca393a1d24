/**
 * Hand-rolled protobuf wire helpers for the benchmark's cheap peers: reading the top-level
 * fields of a DiscoveryResponse without decoding its resources, and writing the few messages a
 * fleet client and an upstream simulator send. Only what they need; no validation beyond bounds.
 */
import type * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { ChunkedBytes } from './chunked-bytes.js';

/** The top-level fields a fleet client looks at. */
export interface ResponseScan {
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
  /** Number of `resources` entries. */
  readonly resources: number;
  /**
   * The bytes of every `resources` entry (tag and length included), in order, as views of the
   * message (one range when they lie together, as they do for the servers measured here).
   */
  readonly resourcePieces: readonly Buffer[];
  /** Bytes of `resourcePieces` in all. */
  readonly resourceLength: number;
}

/** Reads a message's bytes in order across its chunks. */
class ChunkCursor {
  pos = 0;
  private chunk = 0;
  private chunkStart = 0;

  constructor(private readonly bytes: ChunkedBytes) {}

  /** The byte at `pos`, moving past it. */
  next(): number {
    const chunks = this.bytes.chunks;
    let current = chunks[this.chunk] as Buffer;
    while (this.pos - this.chunkStart >= current.length) {
      this.chunkStart += current.length;
      current = chunks[++this.chunk] as Buffer;
      if (current === undefined) throw new Error('truncated field');
    }
    return current[this.pos++ - this.chunkStart] as number;
  }

  /** A varint from `pos`. */
  varint(): number {
    let value = 0;
    let shift = 0;
    for (;;) {
      const b = this.next();
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
      shift += 7;
    }
  }

  /** Moves to `at` (at or after `pos`). */
  seek(at: number): void {
    this.pos = at;
    if (at >= this.chunkStart + (this.bytes.chunks[this.chunk]?.length ?? 0)) {
      this.chunk = this.bytes.chunkAt(at);
      this.chunkStart = this.bytes.startOf(this.chunk);
    }
  }
}

/**
 * Scans a DiscoveryResponse, whole or as the chunks it arrived in: strings of fields 1, 4, 5 and
 * the extent of field 2, nothing copied but the strings.
 */
export function scanResponse(message: Buffer | ChunkedBytes): ResponseScan {
  const bytes = Buffer.isBuffer(message) ? new ChunkedBytes([message]) : message;
  let versionInfo = '';
  let typeUrl = '';
  let nonce = '';
  let resources = 0;
  // Ranges of the message the entries lie in, as start and end; the last one still open.
  const ranges: number[] = [];
  let first = -1;
  let last = -1;
  const cursor = new ChunkCursor(bytes);
  const n = bytes.length;
  while (cursor.pos < n) {
    const start = cursor.pos;
    const tag = cursor.varint();
    const wire = tag & 7;
    if (wire === 0) {
      cursor.varint();
      continue;
    }
    if (wire !== 2) throw new Error(`unexpected wire type ${wire} in a DiscoveryResponse`);
    const length = cursor.varint();
    const at = cursor.pos;
    const end = at + length;
    if (end > n) throw new Error('truncated field');
    const field = (tag - wire) / 8;
    if (field === 2) {
      resources++;
      if (first >= 0 && start !== last) {
        ranges.push(first, last);
        first = -1;
      }
      if (first < 0) first = start;
      last = end;
    } else if (field === 1) versionInfo = bytes.text(at, end);
    else if (field === 4) typeUrl = bytes.text(at, end);
    else if (field === 5) nonce = bytes.text(at, end);
    cursor.seek(end);
  }
  if (first >= 0) ranges.push(first, last);
  const resourcePieces: Buffer[] = [];
  let resourceLength = 0;
  for (let i = 0; i < ranges.length; i += 2) {
    resourcePieces.push(...bytes.pieces(ranges[i] as number, ranges[i + 1] as number));
    resourceLength += (ranges[i + 1] as number) - (ranges[i] as number);
  }
  return { versionInfo, typeUrl, nonce, resources, resourcePieces, resourceLength };
}

/** A Node message of an istiod (id and string metadata), encoded once per client. */
export function encodeNode(id: string, metadata: Readonly<Record<string, string>>): Uint8Array {
  const w = protobuf.Writer.create()
    .uint32((1 << 3) | 2)
    .string(id);
  const struct = protobuf.Writer.create();
  for (const [key, value] of Object.entries(metadata)) {
    const v = protobuf.Writer.create()
      .uint32((3 << 3) | 2)
      .string(value)
      .finish();
    const entry = protobuf.Writer.create()
      .uint32((1 << 3) | 2)
      .string(key)
      .uint32((2 << 3) | 2)
      .bytes(v)
      .finish();
    struct.uint32((1 << 3) | 2).bytes(entry);
  }
  w.uint32((3 << 3) | 2).bytes(struct.finish());
  return w.finish();
}

/** A DiscoveryRequest: subscription (empty version and nonce allowed) or ACK. */
export function encodeRequest(fields: {
  versionInfo?: string;
  node?: Uint8Array;
  typeUrl: string;
  responseNonce?: string;
}): Buffer {
  const w = protobuf.Writer.create();
  if (fields.versionInfo !== undefined && fields.versionInfo !== '')
    w.uint32((1 << 3) | 2).string(fields.versionInfo);
  if (fields.node !== undefined) w.uint32((2 << 3) | 2).bytes(fields.node);
  w.uint32((4 << 3) | 2).string(fields.typeUrl);
  if (fields.responseNonce !== undefined && fields.responseNonce !== '')
    w.uint32((5 << 3) | 2).string(fields.responseNonce);
  const bytes = w.finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** One length-delimited field around bytes. */
export function lengthDelimited(field: number, value: Uint8Array): Uint8Array {
  return protobuf.Writer.create()
    .uint32((field << 3) | 2)
    .bytes(value)
    .finish();
}

/** One string field (nothing when empty, as proto3 writes it). */
export function stringField(field: number, value: string): Uint8Array {
  if (value === '') return new Uint8Array(0);
  return protobuf.Writer.create()
    .uint32((field << 3) | 2)
    .string(value)
    .finish();
}

/** A DiscoveryResponse from pre-framed `resources` entries (`frames` are concatenated as they are). */
export function assembleResponse(
  versionInfo: string,
  frames: readonly Uint8Array[] | Buffer,
  typeUrl: string,
  nonce: string,
): Buffer {
  const body: readonly Uint8Array[] = Buffer.isBuffer(frames) ? [frames] : frames;
  return Buffer.concat([
    stringField(1, versionInfo),
    ...body,
    stringField(4, typeUrl),
    stringField(5, nonce),
  ]);
}

const asIs = (b: Buffer): Buffer => b;

/** The state-of-the-world ADS method with raw bytes both ways, for the benchmark's own servers. */
export const RAW_SOTW_ADS: grpc.ServiceDefinition = {
  StreamAggregatedResources: {
    path: '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources',
    requestStream: true,
    responseStream: true,
    requestSerialize: asIs,
    requestDeserialize: asIs,
    responseSerialize: asIs,
    responseDeserialize: asIs,
  },
};
