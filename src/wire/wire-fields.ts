import protobuf from 'protobufjs';

/**
 * The same bytes as a plain Uint8Array view. protobufjs reads Node Buffers leniently (a string
 * or bytes field longer than the message is cut short instead of failing), so every upstream
 * message is decoded from a plain view, where an overrun throws.
 */
export function plainBytes(bytes: Uint8Array): Uint8Array {
  return Buffer.isBuffer(bytes) ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : bytes;
}

/** One top-level field of an encoded message. */
export interface WireField {
  readonly field: number;
  readonly wireType: number;
  /** The payload of a length-delimited field (wire type 2). */
  readonly bytes?: Uint8Array;
}

/**
 * The top-level fields of an encoded message, in wire order, as far as they can be read. Used
 * where decoding through a schema says too little: to notice fields our protos do not define,
 * and to salvage the type URL and nonce of a response that does not decode, so it can be NACKed.
 */
export function readTopLevelFields(bytes: Uint8Array): { fields: WireField[]; complete: boolean } {
  const reader = protobuf.Reader.create(plainBytes(bytes));
  const fields: WireField[] = [];
  try {
    while (reader.pos < reader.len) {
      const tag = reader.uint32();
      const field = tag >>> 3;
      const wireType = tag & 7;
      if (field === 0) return { fields, complete: false };
      if (wireType === 2) fields.push({ field, wireType, bytes: reader.bytes() });
      else {
        reader.skipType(wireType);
        fields.push({ field, wireType });
      }
    }
    return { fields, complete: true };
  } catch {
    return { fields, complete: false };
  }
}

/** Field numbers present in `bytes` that are not in `known`, sorted and without repeats. */
export function unknownFieldNumbers(bytes: Uint8Array, known: ReadonlySet<number>): number[] {
  const unknown = new Set<number>();
  for (const f of readTopLevelFields(bytes).fields) if (!known.has(f.field)) unknown.add(f.field);
  return [...unknown].sort((a, b) => a - b);
}

/** The last occurrence of a string field (proto3 semantics), when it is readable UTF-8. */
export function salvageString(fields: readonly WireField[], field: number): string | undefined {
  let value: string | undefined;
  for (const f of fields) {
    if (f.field !== field || f.bytes === undefined) continue;
    try {
      value = new TextDecoder('utf-8', { fatal: true }).decode(f.bytes);
    } catch {
      value = undefined;
    }
  }
  return value;
}

/** Whether two byte ranges hold the same bytes. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && Buffer.compare(a, b) === 0;
}
