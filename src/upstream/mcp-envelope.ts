/**
 * The MCP envelope (`istio.mcp.v1alpha1.Resource`: metadata and an `Any` body) read straight from
 * its bytes, without building a protobufjs message and a plain copy of it for every object of a
 * response. Only envelopes in the plain shape every known upstream sends are read here; anything
 * else is left to the schema-driven decode, which says what is wrong with it.
 */
import { isUtf8Range } from '../wire/strict-reader.js';
import { WireCursor } from '../wire/wire-cursor.js';
import { WIRE_LENGTH_DELIMITED, WIRE_VARINT } from '../wire/wire-types.js';

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

/**
 * The envelope in `bytes`, or undefined unless it is plain: fields 1 and 2 at most once each, and
 * in them only the declared fields with their wire types, each singular field at most once, map
 * entries of a key and a value (no `__proto__` key), a creation time of non-negative varints of
 * at most five bytes, a body that is not empty, every string UTF-8. For a plain envelope the
 * result equals what decoding it through the schema and converting it to a plain object gives;
 * `body.value` is a view of `bytes`.
 */
export function readPlainEnvelope(bytes: Uint8Array): McpEnvelope | undefined {
  try {
    return new EnvelopeReader(bytes).resource();
  } catch {
    return undefined;
  }
}

class EnvelopeReader {
  private readonly cursor: WireCursor;
  private readonly text: Buffer;
  /** The end of the message being read. */
  private limit: number;

  constructor(private readonly bytes: Uint8Array) {
    this.cursor = new WireCursor(bytes);
    this.text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.limit = bytes.length;
  }

  resource(): McpEnvelope {
    const out: McpEnvelope = {};
    this.fields((id) => {
      if (id === 1 && out.metadata === undefined) out.metadata = this.nested(() => this.metadata());
      else if (id === 2 && out.body === undefined) out.body = this.nested(() => this.body());
      else throw new NotPlain();
    });
    return out;
  }

  private metadata(): NonNullable<McpEnvelope['metadata']> {
    const out: NonNullable<McpEnvelope['metadata']> = {};
    this.fields((id) => {
      if (id === 1 && out.name === undefined) out.name = this.string();
      else if (id === 2 && out.create_time === undefined)
        out.create_time = this.nested(() => this.timestamp());
      else if (id === 3 && out.version === undefined) out.version = this.string();
      else if (id === 4) this.nested(() => this.entry((out.labels ??= {})));
      else if (id === 5) this.nested(() => this.entry((out.annotations ??= {})));
      else throw new NotPlain();
    });
    return out;
  }

  private body(): NonNullable<McpEnvelope['body']> {
    const out: NonNullable<McpEnvelope['body']> = {};
    this.fields((id) => {
      if (id === 1 && out.type_url === undefined) out.type_url = this.string();
      else if (id === 2 && out.value === undefined) {
        this.cursor.lengthDelimited(this.limit);
        // An empty body is left to the schema, which reads it as a Buffer of its own.
        if (this.cursor.end === this.cursor.start) throw new NotPlain();
        out.value = this.bytes.subarray(this.cursor.start, this.cursor.end);
      } else throw new NotPlain();
    });
    return out;
  }

  private timestamp(): { seconds?: number; nanos?: number } {
    const out: { seconds?: number; nanos?: number } = {};
    const cursor = this.cursor;
    while (cursor.pos < this.limit) {
      const tag = cursor.uint32(this.limit);
      if ((tag & 7) !== WIRE_VARINT) throw new NotPlain();
      const value = this.smallVarint();
      if (tag >>> 3 === 1 && out.seconds === undefined) out.seconds = value;
      else if (tag >>> 3 === 2 && out.nanos === undefined && value < 2 ** 31) out.nanos = value;
      else throw new NotPlain();
    }
    return out;
  }

  /** One map entry into `map`: a key and a value, each at most once, missing ones empty. */
  private entry(map: Record<string, string>): void {
    let key: string | undefined;
    let value: string | undefined;
    this.fields((id) => {
      if (id === 1 && key === undefined) key = this.string();
      else if (id === 2 && value === undefined) value = this.string();
      else throw new NotPlain();
    });
    if (key === '__proto__') throw new NotPlain();
    map[key ?? ''] = value ?? '';
  }

  /** Reads the length-delimited message at the cursor with `read`, which must read all of it. */
  private nested<T>(read: () => T): T {
    const cursor = this.cursor;
    cursor.lengthDelimited(this.limit);
    const outer = this.limit;
    const end = cursor.end;
    this.limit = end;
    cursor.pos = cursor.start;
    const value = read();
    if (cursor.pos !== end) throw new NotPlain();
    this.limit = outer;
    return value;
  }

  /** Each field up to the end of the current message, by number: all must be length-delimited. */
  private fields(each: (id: number) => void): void {
    const cursor = this.cursor;
    while (cursor.pos < this.limit) {
      const tag = cursor.uint32(this.limit);
      if ((tag & 7) !== WIRE_LENGTH_DELIMITED) throw new NotPlain();
      each(tag >>> 3);
    }
  }

  /** A varint of at most five bytes, exactly (up to 2^35). */
  private smallVarint(): number {
    const cursor = this.cursor;
    let value = 0;
    for (let i = 0, scale = 1; i < 5; i++, scale *= 128) {
      if (cursor.pos >= this.limit) throw new NotPlain();
      const b = this.bytes[cursor.pos++] as number;
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
    }
    throw new NotPlain();
  }

  /** The UTF-8 string at the cursor. */
  private string(): string {
    const cursor = this.cursor;
    cursor.lengthDelimited(this.limit);
    const { start, end } = cursor;
    if (!isUtf8Range(this.bytes, start, end)) throw new NotPlain();
    return this.text.toString('utf8', start, end);
  }
}
