import {
  WIRE_END_GROUP,
  WIRE_FIXED32,
  WIRE_FIXED64,
  WIRE_LENGTH_DELIMITED,
  WIRE_START_GROUP,
  WIRE_VARINT,
} from './wire-types.js';

/**
 * A position in one message, read field by field without allocating: `start` and `end` hold the
 * payload of the last length-delimited field read.
 */
export class WireCursor {
  pos = 0;
  start = 0;
  end = 0;

  constructor(private bytes: Uint8Array) {}

  /** Points the cursor at `pos` in `bytes`: one cursor for many walks, not one made per walk. */
  reset(bytes: Uint8Array, pos: number): this {
    this.bytes = bytes;
    this.pos = pos;
    this.start = 0;
    this.end = 0;
    return this;
  }

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
      case WIRE_VARINT:
        this.skipVarint(limit);
        return;
      case WIRE_FIXED64:
        this.advance(8, limit);
        return;
      case WIRE_LENGTH_DELIMITED:
        this.lengthDelimited(limit);
        return;
      case WIRE_FIXED32:
        this.advance(4, limit);
        return;
      case WIRE_START_GROUP:
        for (;;) {
          const tag = this.uint32(limit);
          if ((tag & 7) === WIRE_END_GROUP) {
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
