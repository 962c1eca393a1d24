import protobuf from 'protobufjs';
import { plainBytes } from '../wire-fields.js';

/** The parts of an `envoy.service.discovery.v3.DiscoveryResponse` a state-of-the-world client acts on. */
export interface ScannedResponse {
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
  /** Each `Any` of `resources`; `value` is a view into the response's bytes, not a copy. */
  readonly resources: ReadonlyArray<{ readonly typeUrl: string; readonly value: Uint8Array }>;
}

const LENGTH_DELIMITED = 2;

function text(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}

function expectLengthDelimited(field: number, wireType: number, where: string): void {
  if (wireType !== LENGTH_DELIMITED) {
    throw new Error(`${where} field ${field} has wire type ${wireType}, expected ${LENGTH_DELIMITED}`);
  }
}

/** One `google.protobuf.Any`: its type URL and a view of its value. */
function scanAny(bytes: Uint8Array): { typeUrl: string; value: Uint8Array } {
  const reader = protobuf.Reader.create(bytes);
  let typeUrl = '';
  let value: Uint8Array = new Uint8Array(0);
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if (field === 1 || field === 2) {
      expectLengthDelimited(field, tag & 7, 'Any');
      if (field === 1) typeUrl = text(reader.bytes());
      else value = reader.bytes();
    } else reader.skipType(tag & 7);
  }
  return { typeUrl, value };
}

/**
 * Reads a DiscoveryResponse by walking its wire format: the resources' values stay views into
 * the received bytes (no copy, nothing decoded), so a reader can compare them with what it already
 * holds before decoding anything. Fields other than 1, 2, 4 and 5 are skipped. Throws on bytes
 * that are not a well-formed message (overruns, wrong wire types of the fields read).
 */
export function scanDiscoveryResponse(message: Uint8Array): ScannedResponse {
  const reader = protobuf.Reader.create(plainBytes(message));
  let versionInfo = '';
  let typeUrl = '';
  let nonce = '';
  const resources: Array<{ typeUrl: string; value: Uint8Array }> = [];
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if (field === 0) throw new Error(`invalid field number 0 at byte ${reader.pos}`);
    switch (field) {
      case 1:
      case 2:
      case 4:
      case 5: {
        expectLengthDelimited(field, tag & 7, 'DiscoveryResponse');
        const bytes = reader.bytes();
        if (field === 2) resources.push(scanAny(bytes));
        else if (field === 1) versionInfo = text(bytes);
        else if (field === 4) typeUrl = text(bytes);
        else nonce = text(bytes);
        break;
      }
      default:
        reader.skipType(tag & 7);
    }
  }
  return { versionInfo, typeUrl, nonce, resources };
}
