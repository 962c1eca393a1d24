/** `messages` framed as gRPC sends them: flag 0, big-endian length, bytes. */
export function framed(messages: readonly Uint8Array[], flag = 0): Buffer {
  return Buffer.concat(
    messages.flatMap((m) => {
      const prefix = Buffer.alloc(5);
      prefix[0] = flag;
      prefix.writeUInt32BE(m.byteLength, 1);
      return [prefix, Buffer.from(m)];
    }),
  );
}

/** `bytes` cut at the given offsets (each taken modulo the length plus one; sorted, deduplicated). */
export function chunked(bytes: Buffer, cuts: readonly number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const cut of [...at, bytes.byteLength]) {
    // Copies: a chunk is memory of its own, as HTTP/2 delivers it.
    chunks.push(Buffer.from(bytes.subarray(from, cut)));
    from = cut;
  }
  return chunks;
}
