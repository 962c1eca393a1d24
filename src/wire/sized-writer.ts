/**
 * Protobuf fields written straight into one buffer whose size was computed first: for messages
 * built often or large, where a generic writer's per-field objects and its final copy (a copy of
 * every nested message, once per level) cost more than the encoding itself.
 */

/** Bytes of a varint holding `n` (an integer from -2^63 to 2^53; a negative one takes ten). */
export function varintSize(n: number): number {
  if (n < 0) return 10;
  let size = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** Strings up to this many ASCII characters are copied in JavaScript rather than by node. */
const SHORT_ASCII = 64;

/**
 * The UTF-8 length of `s`: its length when every character is ASCII, counted here (names, keys
 * and versions nearly always are), else node's count.
 */
export function utf8Length(s: string): number {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= 0x80) return Buffer.byteLength(s, 'utf8');
  return s.length;
}

/** Bytes of a length-delimited field of a number below 16 whose payload is `length` bytes. */
export function lengthDelimitedSize(length: number): number {
  return 1 + varintSize(length) + length;
}

/**
 * Writes fields at `pos` into `buf`, which the caller sized for them: writing past its end is a
 * size computed wrong, and the caller should check `pos` against the size it expected.
 */
export class SizedWriter {
  /** `pos`: where the first field goes. */
  constructor(
    readonly buf: Buffer,
    public pos = 0,
  ) {}

  varint(n: number): void {
    if (n < 0) {
      // Two's complement over 64 bits, as int64 and int32 fields encode negative numbers.
      let v = BigInt.asUintN(64, BigInt(n));
      while (v >= 128n) {
        this.buf[this.pos++] = Number(v & 127n) | 128;
        v >>= 7n;
      }
      this.buf[this.pos++] = Number(v);
      return;
    }
    while (n >= 128) {
      this.buf[this.pos++] = (n % 128) | 128;
      n = Math.floor(n / 128);
    }
    this.buf[this.pos++] = n;
  }

  /** Tag and length of a length-delimited field, its payload to follow. */
  header(field: number, length: number): void {
    this.varint((field << 3) | 2);
    this.varint(length);
  }

  /** A string field; `bytes` is its UTF-8 length (see {@link utf8Length}). */
  string(field: number, value: string, bytes: number): void {
    this.header(field, bytes);
    this.text(value, bytes);
  }

  /** A string's UTF-8 bytes alone, no tag or length; `bytes` is its UTF-8 length. */
  text(value: string, bytes: number): void {
    if (bytes === value.length && bytes <= SHORT_ASCII) {
      // ASCII (as many bytes as UTF-16 units) and short, as names and versions are: copied here,
      // where a call into node per string costs more than the copy.
      const buf = this.buf;
      let at = this.pos;
      for (let i = 0; i < bytes; i++) buf[at++] = value.charCodeAt(i);
      this.pos = at;
    } else {
      this.pos += this.buf.write(value, this.pos, 'utf8');
    }
  }

  bytes(field: number, value: Uint8Array): void {
    this.header(field, value.byteLength);
    this.buf.set(value, this.pos);
    this.pos += value.byteLength;
  }
}
