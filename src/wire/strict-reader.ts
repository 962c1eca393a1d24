/**
 * A protobufjs reader for bytes from the network: strings decoded natively and checked as UTF-8,
 * as Go's protobuf runtime (and so istiod) checks every proto3 `string` field it unmarshals.
 */
import { isUtf8 } from 'node:buffer';
import protobuf from 'protobufjs';

const utf8Slice = (Buffer.prototype as unknown as { utf8Slice: (start: number, end: number) => string })
  .utf8Slice;

/**
 * `bytes[start..end)` decoded as UTF-8 as `Buffer.toString` decodes it (malformed sequences as
 * U+FFFD), without a Buffer made over the bytes first.
 */
export function utf8Text(bytes: Uint8Array, start: number, end: number): string {
  return utf8Slice.call(bytes, start, end);
}

/**
 * Reads like `protobuf.Reader` over a plain `Uint8Array` (an overrun throws, where protobufjs's
 * reader of Buffers would cut the value short), with two differences in `string()`: the text is
 * decoded by Node rather than in JavaScript (faster, and no garbage per character run), and bytes
 * that are not UTF-8 throw instead of being read into an approximation. Pass an instance to a
 * type's `decode`: nested messages are read through it too.
 */
export class StrictReader extends protobuf.Reader {
  constructor(bytes: Uint8Array) {
    super(bytes);
  }

  override string(): string {
    const length = this.uint32();
    const start = this.pos;
    const end = start + length;
    if (end > this.len) throw new RangeError(`index out of range: ${start} + ${length} > ${this.len}`);
    const text = utf8Slice.call(this.buf, start, end);
    // Malformed sequences decode to U+FFFD; text that has one is checked to tell it from a real one.
    if (text.includes('\ufffd') && !isUtf8(this.buf.subarray(start, end))) {
      throw new Error(`a string field at byte ${start} is not valid UTF-8`);
    }
    this.pos = end;
    return text;
  }
}

/** Whether `bytes[start..end)` is UTF-8: ASCII (nearly every string in a mesh) told without a native call. */
export function isUtf8Range(bytes: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    if ((bytes[i] as number) >= 0x80) return isUtf8(bytes.subarray(start, end));
  }
  return true;
}
