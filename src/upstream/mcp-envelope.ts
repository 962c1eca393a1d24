/**
 * The MCP envelope (`istio.mcp.v1alpha1.Resource`: metadata and an `Any` body) read straight from
 * its bytes, without building a protobufjs message and a plain copy of it for every object of a
 * response. Only envelopes in the plain shape every known upstream sends are read here; anything
 * else is left to the schema-driven decode, which says what is wrong with it.
 */
import { isUtf8Range } from '../wire/strict-reader.js';
import { WIRE_FIXED32, WIRE_FIXED64, WIRE_LENGTH_DELIMITED, WIRE_VARINT } from '../wire/wire-types.js';

/** An envelope as `Resource.toObject(decoded, { longs: Number })` gives it: absent fields left out. */
export interface McpEnvelope {
  metadata?: {
    name?: string;
    create_time?: { seconds?: number; nanos?: number };
    version?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  body?: { type_url?: string; value?: Uint8Array };
}

/** Thrown inside the reader for anything outside the plain shape; never leaves this module. */
class NotPlain extends Error {}

/** The one instance thrown: made once, so that leaving an envelope to the schema captures no stack. */
const NOT_PLAIN = new NotPlain();

/**
 * The envelope in `bytes`, or undefined unless it is plain: fields 1 and 2 at most once each, and
 * in them only the declared fields with their wire types, each singular field at most once, map
 * entries of a key and a value (no `__proto__` key), a creation time of non-negative varints of
 * at most five bytes, a body that is not empty, every string UTF-8. For a plain envelope the
 * result equals what decoding it through the schema and converting it to a plain object gives;
 * `body.value` is a view of `bytes`.
 *
 * Given `unknown`, the envelope may also hold fields the schema does not define (Higress appends
 * field 100 to every object), of any wire type but groups: skipped as the schema skips them, their
 * numbers put in `unknown`, sorted and each once.
 */
export function readPlainEnvelope(bytes: Uint8Array, unknown?: number[]): McpEnvelope | undefined {
  try {
    return reader.resource(bytes, unknown);
  } catch {
    return undefined;
  } finally {
    reader.done();
  }
}

/** A string read before, with its UTF-8 bytes: the same bytes read again give the same string. */
interface KnownString {
  readonly bytes: Uint8Array;
  readonly text: string;
}

const EMPTY = new Uint8Array(0);
/** Strings of this many bytes at most are looked for among those read before. */
const MAX_KNOWN_BYTES = 64;
/** Type URLs of this many bytes at most are remembered (Istio's are under 70). */
const MAX_KNOWN_TYPE_BYTES = 256;
/** Map keys remembered (labels and annotations: a few keys recur on every object). */
const MAX_KNOWN_KEYS = 16;
/** Buffers up to this size are kept between reads to decode strings from, not wrapped anew. */
const MAX_WRAPPED_BYTES = 64 * 1024;
/** What the reader decodes strings from when it holds no buffer. */
const NO_TEXT = Buffer.alloc(0);

/**
 * Reads envelopes one after the other, with nothing allocated per field but what the envelope
 * holds: the loops over fields are written out (no callback per field or nested message), a
 * buffer holding several envelopes (a slab of a first state) is wrapped once to decode strings
 * from, and a type URL or a map key read before is the string read then.
 */
class EnvelopeReader {
  private bytes: Uint8Array = EMPTY;
  private pos = 0;
  /** The end of the message being read. */
  private limit = 0;
  /** Where the payload of the last length-delimited field begins and ends. */
  private start = 0;
  private end = 0;
  /** `bytes`' memory as a Buffer, to decode strings from; `wrapped` is the memory it covers. */
  private text: Buffer = NO_TEXT;
  private wrapped: ArrayBufferLike = NO_TEXT.buffer;
  /** Whether a large buffer's wrapping is let go once the current task's reads are over. */
  private letGo = false;
  private typeUrl: KnownString = { bytes: EMPTY, text: '' };
  private readonly keys: KnownString[] = [];

  resource(bytes: Uint8Array, unknown: number[] | undefined): McpEnvelope {
    this.bytes = bytes;
    this.pos = 0;
    this.limit = bytes.length;
    const out: McpEnvelope = {};
    if (unknown !== undefined) unknown.length = 0;
    while (this.pos < this.limit) {
      const tag = this.varint32();
      const id = tag >>> 3;
      const lengthDelimited = (tag & 7) === WIRE_LENGTH_DELIMITED;
      if (id === 1 && lengthDelimited && out.metadata === undefined) {
        const outer = this.nested();
        out.metadata = this.metadata();
        this.close(outer);
      } else if (id === 2 && lengthDelimited && out.body === undefined) {
        const outer = this.nested();
        out.body = this.body();
        this.close(outer);
      } else if (unknown !== undefined && id > 2) {
        this.skip(tag & 7);
        if (!unknown.includes(id)) unknown.push(id);
      } else throw NOT_PLAIN;
    }
    if (unknown !== undefined && unknown.length > 1) unknown.sort((a, b) => a - b);
    return out;
  }

  /** Moves past the payload of a field of `wireType` as the schema's decode skips it; groups are not plain. */
  private skip(wireType: number): void {
    if (wireType === WIRE_VARINT) {
      for (let n = 0; n < 10; n++) {
        if (this.pos >= this.limit) throw NOT_PLAIN;
        if ((this.bytes[this.pos++] as number) < 0x80) return;
      }
      throw NOT_PLAIN;
    }
    const width =
      wireType === WIRE_FIXED64
        ? 8
        : wireType === WIRE_FIXED32
          ? 4
          : wireType === WIRE_LENGTH_DELIMITED
            ? this.varint32()
            : -1;
    if (width < 0 || width > this.limit - this.pos) throw NOT_PLAIN;
    this.pos += width;
  }

  /**
   * Lets go of the envelope's bytes, and of a large buffer holding them once the task reading
   * them is over: the objects of a response are read one after the other in one task, often from
   * the response's own buffer, which is then wrapped once for all of them instead of once each.
   */
  done(): void {
    this.bytes = EMPTY;
    if (this.wrapped.byteLength > MAX_WRAPPED_BYTES && !this.letGo) {
      this.letGo = true;
      queueMicrotask(this.release);
    }
  }

  /** Lets go of a large buffer wrapped to decode strings from (a small one is kept, as reused). */
  private readonly release = (): void => {
    this.letGo = false;
    if (this.wrapped.byteLength > MAX_WRAPPED_BYTES) {
      this.text = NO_TEXT;
      this.wrapped = NO_TEXT.buffer;
    }
  };

  private metadata(): NonNullable<McpEnvelope['metadata']> {
    const out: NonNullable<McpEnvelope['metadata']> = {};
    while (this.pos < this.limit) {
      const id = this.field();
      if (id === 1 && out.name === undefined) out.name = this.string();
      else if (id === 2 && out.create_time === undefined) {
        const outer = this.nested();
        out.create_time = this.timestamp();
        this.close(outer);
      } else if (id === 3 && out.version === undefined) out.version = this.string();
      else if (id === 4 || id === 5) {
        const outer = this.nested();
        this.entry(id === 4 ? (out.labels ??= {}) : (out.annotations ??= {}));
        this.close(outer);
      } else throw NOT_PLAIN;
    }
    return out;
  }

  private body(): NonNullable<McpEnvelope['body']> {
    const out: NonNullable<McpEnvelope['body']> = {};
    while (this.pos < this.limit) {
      const id = this.field();
      if (id === 1 && out.type_url === undefined) {
        this.lengthDelimited();
        // Every object of a response has the same type URL: read once, compared after that.
        if (this.end - this.start > MAX_KNOWN_TYPE_BYTES) out.type_url = this.decoded();
        else {
          if (!this.sameBytes(this.typeUrl.bytes)) this.typeUrl = this.known();
          out.type_url = this.typeUrl.text;
        }
      } else if (id === 2 && out.value === undefined) {
        this.lengthDelimited();
        // An empty body is left to the schema, which reads it as a Buffer of its own.
        if (this.end === this.start) throw NOT_PLAIN;
        out.value = this.bytes.subarray(this.start, this.end);
      } else throw NOT_PLAIN;
    }
    return out;
  }

  private timestamp(): { seconds?: number; nanos?: number } {
    const out: { seconds?: number; nanos?: number } = {};
    while (this.pos < this.limit) {
      const tag = this.varint32();
      if ((tag & 7) !== WIRE_VARINT) throw NOT_PLAIN;
      const value = this.smallVarint();
      if (tag >>> 3 === 1 && out.seconds === undefined) out.seconds = value;
      else if (tag >>> 3 === 2 && out.nanos === undefined && value < 2 ** 31) out.nanos = value;
      else throw NOT_PLAIN;
    }
    return out;
  }

  /** One map entry into `map`: a key and a value, each at most once, missing ones empty. */
  private entry(map: Record<string, string>): void {
    let key: string | undefined;
    let value: string | undefined;
    while (this.pos < this.limit) {
      const id = this.field();
      if (id === 1 && key === undefined) key = this.key();
      else if (id === 2 && value === undefined) value = this.string();
      else throw NOT_PLAIN;
    }
    if (key === '__proto__') throw NOT_PLAIN;
    map[key ?? ''] = value ?? '';
  }

  /** The number of the next field, which must be length-delimited. */
  private field(): number {
    const tag = this.varint32();
    if ((tag & 7) !== WIRE_LENGTH_DELIMITED) throw NOT_PLAIN;
    return tag >>> 3;
  }

  /** Enters the length-delimited message at the cursor; returns the limit to restore with {@link close}. */
  private nested(): number {
    this.lengthDelimited();
    const outer = this.limit;
    this.limit = this.end;
    this.pos = this.start;
    return outer;
  }

  /** Leaves a message entered with {@link nested}, which must have been read to its end. */
  private close(outer: number): void {
    if (this.pos !== this.limit) throw NOT_PLAIN;
    this.limit = outer;
  }

  /** Reads the extent of a length-delimited payload into `start`/`end` and moves past it. */
  private lengthDelimited(): void {
    const length = this.varint32();
    const start = this.pos;
    if (length > this.limit - start) throw NOT_PLAIN;
    this.start = start;
    this.end = this.pos = start + length;
  }

  /** A varint of at most 32 significant bits (tags and lengths), as `WireCursor.uint32` reads it. */
  private varint32(): number {
    const bytes = this.bytes;
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (this.pos >= this.limit) throw NOT_PLAIN;
      const b = bytes[this.pos++] as number;
      if (shift < 28) value |= (b & 0x7f) << shift;
      else value += (b & 0x0f) * 2 ** shift;
      if (b < 0x80) return value >>> 0;
    }
    // A longer varint is a 64-bit one; its high bytes do not matter for a tag or a length.
    for (let n = 0; n < 5; n++) {
      if (this.pos >= this.limit) throw NOT_PLAIN;
      if ((bytes[this.pos++] as number) < 0x80) return value >>> 0;
    }
    throw NOT_PLAIN;
  }

  /** A varint of at most five bytes, exactly (up to 2^35). */
  private smallVarint(): number {
    let value = 0;
    for (let i = 0, scale = 1; i < 5; i++, scale *= 128) {
      if (this.pos >= this.limit) throw NOT_PLAIN;
      const b = this.bytes[this.pos++] as number;
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
    }
    throw NOT_PLAIN;
  }

  /** The UTF-8 string at the cursor. */
  private string(): string {
    this.lengthDelimited();
    return this.decoded();
  }

  /** A map key at the cursor: one of the last keys read when its bytes are. */
  private key(): string {
    this.lengthDelimited();
    const keys = this.keys;
    for (let i = 0; i < keys.length; i++) {
      const known = keys[i] as KnownString;
      if (this.sameBytes(known.bytes)) return known.text;
    }
    if (this.end - this.start > MAX_KNOWN_BYTES) return this.decoded();
    const known = this.known();
    if (keys.length === MAX_KNOWN_KEYS) keys.pop();
    keys.unshift(known);
    return known.text;
  }

  /** The payload at `start`/`end` as a string, with a copy of its bytes to know it again by. */
  private known(): KnownString {
    const text = this.decoded();
    return { bytes: this.bytes.slice(this.start, this.end), text };
  }

  /** Whether the payload at `start`/`end` is `bytes`. */
  private sameBytes(bytes: Uint8Array): boolean {
    const length = this.end - this.start;
    if (bytes.length !== length) return false;
    const own = this.bytes;
    for (let i = 0; i < length; i++) if (own[this.start + i] !== bytes[i]) return false;
    return true;
  }

  /** The payload at `start`/`end`, which must be UTF-8, decoded. */
  private decoded(): string {
    const { bytes, start, end } = this;
    if (!isUtf8Range(bytes, start, end)) throw NOT_PLAIN;
    if (bytes.buffer !== this.wrapped) {
      this.wrapped = bytes.buffer;
      this.text = Buffer.from(bytes.buffer);
    }
    return this.text.toString('utf8', bytes.byteOffset + start, bytes.byteOffset + end);
  }
}

const reader = new EnvelopeReader();
