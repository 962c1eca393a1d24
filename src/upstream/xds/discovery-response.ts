/** The parts of an `envoy.service.discovery.v3.DiscoveryResponse` a state-of-the-world client acts on. */
export interface ScannedResponse {
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
  /** Each `Any` of `resources`; `value` is a view into the response's bytes, not a copy. */
  readonly resources: ReadonlyArray<{ readonly typeUrl: string; readonly value: Uint8Array }>;
}

const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;
const START_GROUP = 3;
const END_GROUP = 4;
const FIXED32 = 5;

/**
 * A position in one message, read field by field without allocating: `start` and `end` hold the
 * payload of the last length-delimited field read.
 */
class WireCursor {
  pos = 0;
  start = 0;
  end = 0;

  constructor(private readonly bytes: Uint8Array) {}

  /** A varint of at most 32 significant bits (tags and lengths). */
  uint32(limit: number): number {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (this.pos >= limit) throw new Error(`varint runs past the end at byte ${this.pos}`);
      const b = this.bytes[this.pos++] as number;
      if (shift < 28) value |= (b & 0x7f) << shift;
      else value += (b & 0x0f) * 2 ** shift;
      if (b < 0x80) return value >>> 0;
    }
    // A longer varint is a 64-bit one; its high bytes do not matter for a tag or a length.
    this.skipVarint(limit);
    return value >>> 0;
  }

  /** Reads the extent of a length-delimited payload into `start`/`end` and moves past it. */
  lengthDelimited(limit: number): void {
    const length = this.uint32(limit);
    const start = this.pos;
    if (length > limit - start) {
      throw new Error(`a length of ${length} at byte ${start} runs past the end (${limit - start} left)`);
    }
    this.start = start;
    this.end = this.pos = start + length;
  }

  skip(wireType: number, limit: number, field: number): void {
    switch (wireType) {
      case VARINT:
        this.skipVarint(limit);
        return;
      case FIXED64:
        this.advance(8, limit);
        return;
      case LENGTH_DELIMITED:
        this.lengthDelimited(limit);
        return;
      case FIXED32:
        this.advance(4, limit);
        return;
      case START_GROUP:
        for (;;) {
          const tag = this.uint32(limit);
          if ((tag & 7) === END_GROUP) {
            if (tag >>> 3 !== field) throw new Error(`group ${field} ends as group ${tag >>> 3}`);
            return;
          }
          this.skip(tag & 7, limit, tag >>> 3);
        }
      default:
        throw new Error(`invalid wire type ${wireType} at byte ${this.pos}`);
    }
  }

  private skipVarint(limit: number): void {
    for (let n = 0; n < 10; n++) {
      if (this.pos >= limit) throw new Error(`varint runs past the end at byte ${this.pos}`);
      if ((this.bytes[this.pos++] as number) < 0x80) return;
    }
    throw new Error(`varint longer than 10 bytes at byte ${this.pos}`);
  }

  private advance(n: number, limit: number): void {
    if (limit - this.pos < n) throw new Error(`a fixed field at byte ${this.pos} runs past the end`);
    this.pos += n;
  }
}

function expectLengthDelimited(field: number, wireType: number, where: string): void {
  if (wireType !== LENGTH_DELIMITED) {
    throw new Error(`${where} field ${field} has wire type ${wireType}, expected ${LENGTH_DELIMITED}`);
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
