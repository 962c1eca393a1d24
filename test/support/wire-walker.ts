/**
 * A minimal protobuf wire-format reader that knows no schema: it splits bytes into fields (number,
 * wire type, value) and reads a length-delimited value as a nested message when it parses as one.
 * Tests use it to compare our encodings with official ones without trusting our own .proto files.
 */

/** Wire types of the protobuf encoding (groups, 3 and 4, are long deprecated and not accepted). */
export type WireType = 0 | 1 | 2 | 5;

/** One field as found on the wire. */
export interface WireField {
  readonly field: number;
  readonly wire: WireType;
  /** varint: the value; fixed64/fixed32: the raw bytes as hex; length-delimited: bytes (hex) or a message. */
  readonly value: bigint | string | readonly WireField[];
}

function readVarint(bytes: Uint8Array, at: number): { value: bigint; next: number } | undefined {
  let value = 0n;
  for (let i = 0; i < 10; i++) {
    const b = bytes[at + i];
    if (b === undefined) return undefined;
    value |= BigInt(b & 0x7f) << BigInt(7 * i);
    if ((b & 0x80) === 0) return { value, next: at + i + 1 };
  }
  return undefined;
}

/**
 * The fields of `bytes` read as one message, or undefined when they are not a well-formed message
 * (a truncated value, a wire type 3, 4, 6 or 7, field number 0). Length-delimited values that
 * parse as a non-empty message are walked into; anything else stays bytes.
 */
export function walkMessage(bytes: Uint8Array): WireField[] | undefined {
  const fields: WireField[] = [];
  let at = 0;
  while (at < bytes.length) {
    const tag = readVarint(bytes, at);
    if (tag === undefined) return undefined;
    at = tag.next;
    const field = Number(tag.value >> 3n);
    const wire = Number(tag.value & 7n);
    if (field === 0 || field > 536_870_911) return undefined;
    switch (wire) {
      case 0: {
        const v = readVarint(bytes, at);
        if (v === undefined) return undefined;
        fields.push({ field, wire, value: v.value });
        at = v.next;
        break;
      }
      case 1:
      case 5: {
        const size = wire === 1 ? 8 : 4;
        if (at + size > bytes.length) return undefined;
        fields.push({ field, wire, value: Buffer.from(bytes.subarray(at, at + size)).toString('hex') });
        at += size;
        break;
      }
      case 2: {
        const len = readVarint(bytes, at);
        if (len === undefined) return undefined;
        const start = len.next;
        const end = start + Number(len.value);
        if (end > bytes.length) return undefined;
        const inner = bytes.subarray(start, end);
        const nested = inner.length === 0 ? undefined : walkMessage(inner);
        fields.push({ field, wire, value: nested ?? Buffer.from(inner).toString('hex') });
        at = end;
        break;
      }
      default:
        return undefined;
    }
  }
  return fields;
}

/** True when a field looks like a map entry: a message of a key (field 1) and at most a value (field 2). */
function isMapEntry(f: WireField): boolean {
  if (f.wire !== 2 || typeof f.value === 'string' || typeof f.value === 'bigint') return false;
  const numbers = f.value.map((x) => x.field);
  return numbers[0] === 1 && numbers.length <= 2 && (numbers.length === 1 || numbers[1] === 2);
}

/**
 * A printable form of a walked message, one line per field (`path field:wire value`). With
 * `sortMapEntries`, the runs of consecutive map-entry-shaped fields with one number are sorted:
 * protobuf leaves the order of map entries to the encoder, so two valid encodings may differ there.
 */
export function renderFields(
  fields: readonly WireField[],
  options: { sortMapEntries: boolean },
  prefix = '',
): string[] {
  const blocks: string[][] = [];
  let run: { field: number; blocks: string[][] } | undefined;
  const flush = (): void => {
    if (run === undefined) return;
    blocks.push(
      ...(options.sortMapEntries
        ? [...run.blocks].sort((a, b) => (a.join('\n') < b.join('\n') ? -1 : 1))
        : run.blocks),
    );
    run = undefined;
  };
  for (const f of fields) {
    const head = `${prefix}${f.field}:${f.wire}`;
    const block =
      typeof f.value === 'bigint' || typeof f.value === 'string'
        ? [`${head} ${String(f.value)}`]
        : [`${head} {`, ...renderFields(f.value, options, `${prefix}  `), `${prefix}}`];
    if (isMapEntry(f)) {
      if (run?.field !== f.field) flush();
      run ??= { field: f.field, blocks: [] };
      run.blocks.push(block);
    } else {
      flush();
      blocks.push(block);
    }
  }
  flush();
  return blocks.flat();
}
