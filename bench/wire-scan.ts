/**
 * Hand-rolled protobuf wire helpers for the benchmark's cheap peers: reading the top-level
 * fields of a DiscoveryResponse without decoding its resources, and writing the few messages a
 * fleet client and an upstream simulator send. Only what they need; no validation beyond bounds.
 */
import type * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';

/** The top-level fields a fleet client looks at. */
export interface ResponseScan {
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
  /** Number of `resources` entries. */
  readonly resources: number;
  /**
   * The bytes of every `resources` entry (tag and length included), in order: a view of the
   * message when they are contiguous (always, for the servers measured here), else a copy.
   */
  readonly resourceBytes: Buffer;
}

/** Scans a DiscoveryResponse: strings of fields 1, 4, 5 and the extent of field 2. Allocation-free walk. */
export function scanResponse(message: Buffer): ResponseScan {
  let versionInfo = '';
  let typeUrl = '';
  let nonce = '';
  let resources = 0;
  let first = -1;
  let last = -1;
  let pieces: Buffer[] | undefined;
  let pos = 0;
  const n = message.length;
  while (pos < n) {
    const start = pos;
    let tag = 0;
    let shift = 0;
    for (;;) {
      const b = message[pos++] as number;
      tag += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
      shift += 7;
    }
    const wire = tag & 7;
    if (wire === 0) {
      while ((message[pos++] as number) >= 0x80);
      continue;
    }
    if (wire !== 2) throw new Error(`unexpected wire type ${wire} in a DiscoveryResponse`);
    let length = 0;
    shift = 0;
    for (;;) {
      const b = message[pos++] as number;
      length += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
      shift += 7;
    }
    const end = pos + length;
    if (end > n) throw new Error('truncated field');
    const field = (tag - wire) / 8;
    if (field === 2) {
      resources++;
      if (first >= 0 && start !== last) {
        (pieces ??= []).push(message.subarray(first, last));
        first = -1;
      }
      if (first < 0) first = start;
      last = end;
    } else if (field === 1) versionInfo = message.toString('utf8', pos, end);
    else if (field === 4) typeUrl = message.toString('utf8', pos, end);
    else if (field === 5) nonce = message.toString('utf8', pos, end);
    pos = end;
  }
  const tail = first < 0 ? Buffer.alloc(0) : message.subarray(first, last);
  const resourceBytes = pieces === undefined ? tail : Buffer.concat([...pieces, tail]);
  return { versionInfo, typeUrl, nonce, resources, resourceBytes };
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
