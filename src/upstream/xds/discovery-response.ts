import { WireCursor } from '../../wire/wire-cursor.js';
import { WIRE_LENGTH_DELIMITED } from '../../wire/wire-types.js';
/** The parts of an `envoy.service.discovery.v3.DiscoveryResponse` a state-of-the-world client acts on. */
export interface ScannedResponse {
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
  /** Each `Any` of `resources`; `value` is a view into the response's bytes, not a copy. */
  readonly resources: ReadonlyArray<{ readonly typeUrl: string; readonly value: Uint8Array }>;
}

function expectLengthDelimited(field: number, wireType: number, where: string): void {
  if (wireType !== WIRE_LENGTH_DELIMITED) {
    throw new Error(`${where} field ${field} has wire type ${wireType}, expected ${WIRE_LENGTH_DELIMITED}`);
  }
}

/** Whether two ranges of `bytes` hold the same bytes. */
function sameRange(bytes: Uint8Array, a: number, aEnd: number, b: number, bEnd: number): boolean {
  if (aEnd - a !== bEnd - b) return false;
  for (let i = 0; i < aEnd - a; i++) if (bytes[a + i] !== bytes[b + i]) return false;
  return true;
}

/**
 * Reads a DiscoveryResponse by walking its wire format: the resources' values stay views into
 * the received bytes (no copy, nothing decoded), so a reader can compare them with what it already
 * holds before decoding anything. Every resource of a response usually has the same type URL,
 * which is read once and shared. Fields other than 1, 2, 4 and 5 are skipped. Throws on bytes
 * that are not a well-formed message (overruns, wrong wire types of the fields read).
 */
export function scanDiscoveryResponse(message: Uint8Array): ScannedResponse {
  const bytes = new Uint8Array(message.buffer, message.byteOffset, message.byteLength);
  const asText = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
  const text = (start: number, end: number): string => asText.toString('utf8', start, end);
  const cursor = new WireCursor(bytes);
  const limit = bytes.byteLength;
  let versionInfo = '';
  let typeUrl = '';
  let nonce = '';
  const resources: Array<{ typeUrl: string; value: Uint8Array }> = [];
  // The last distinct Any type URL seen, by position in the message, and its text.
  let anyTypeStart = 0;
  let anyTypeEnd = -1;
  let anyType = '';
  while (cursor.pos < limit) {
    const tag = cursor.uint32(limit);
    const field = tag >>> 3;
    if (field === 0) throw new Error(`invalid field number 0 at byte ${cursor.pos}`);
    if (field !== 1 && field !== 2 && field !== 4 && field !== 5) {
      cursor.skip(tag & 7, limit, field);
      continue;
    }
    expectLengthDelimited(field, tag & 7, 'DiscoveryResponse');
    cursor.lengthDelimited(limit);
    if (field === 1) versionInfo = text(cursor.start, cursor.end);
    else if (field === 4) typeUrl = text(cursor.start, cursor.end);
    else if (field === 5) nonce = text(cursor.start, cursor.end);
    else {
      // One google.protobuf.Any, walked in place.
      const anyEnd = cursor.end;
      cursor.pos = cursor.start;
      let valueStart = 0;
      let valueEnd = 0;
      let type = '';
      while (cursor.pos < anyEnd) {
        const anyTag = cursor.uint32(anyEnd);
        const anyField = anyTag >>> 3;
        if (anyField !== 1 && anyField !== 2) {
          if (anyField === 0) throw new Error(`invalid field number 0 at byte ${cursor.pos}`);
          cursor.skip(anyTag & 7, anyEnd, anyField);
          continue;
        }
        expectLengthDelimited(anyField, anyTag & 7, 'Any');
        cursor.lengthDelimited(anyEnd);
        if (anyField === 2) {
          valueStart = cursor.start;
          valueEnd = cursor.end;
        } else if (sameRange(bytes, cursor.start, cursor.end, anyTypeStart, anyTypeEnd)) {
          type = anyType;
        } else {
          type = anyType = text(cursor.start, cursor.end);
          anyTypeStart = cursor.start;
          anyTypeEnd = cursor.end;
        }
      }
      resources.push({ typeUrl: type, value: bytes.subarray(valueStart, valueEnd) });
    }
  }
  return { versionInfo, typeUrl, nonce, resources };
}
