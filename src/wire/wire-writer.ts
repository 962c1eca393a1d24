import protobuf from 'protobufjs';

/** Wire type 2 (length-delimited) tag of a field number. */
export function lengthDelimitedTag(field: number): number {
  return (field << 3) | 2;
}

/** Encodes one string field as tag + length + UTF-8, or nothing when the string is empty (proto3). */
export function stringField(field: number, value: string): Uint8Array {
  if (value.length === 0) return new Uint8Array(0);
  return protobuf.Writer.create().uint32(lengthDelimitedTag(field)).string(value).finish();
}

/** Encodes one length-delimited field around already-encoded bytes (always present). */
export function bytesField(field: number, value: Uint8Array): Uint8Array {
  return protobuf.Writer.create().uint32(lengthDelimitedTag(field)).bytes(value).finish();
}

/** `google.protobuf.Any` with the given type URL and value. */
export function encodeAny(typeUrl: string, value: Uint8Array): Uint8Array {
  return protobuf.Writer.create()
    .uint32(lengthDelimitedTag(1))
    .string(typeUrl)
    .uint32(lengthDelimitedTag(2))
    .bytes(value)
    .finish();
}
