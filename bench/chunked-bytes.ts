/**
 * A message held as the chunks it arrived in, read in place. The benchmark's fleet keeps each new
 * response so, where assembling it into one buffer was a copy of every byte into fresh memory:
 * under churn nearly every push is a new version, and on the fleet's core, shared with the
 * upstreams, those copies were the largest single cost.
 */
export class ChunkedBytes {
  readonly length: number;
  /** Where each chunk starts in the message. */
  private readonly starts: number[] = [];

  constructor(readonly chunks: readonly Buffer[]) {
    let at = 0;
    for (const chunk of chunks) {
      this.starts.push(at);
      at += chunk.length;
    }
    this.length = at;
  }

  /** The chunk holding byte `at` (0 ≤ at < length). */
  chunkAt(at: number): number {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if ((this.starts[mid] as number) <= at) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** Where chunk `i` starts in the message. */
  startOf(i: number): number {
    return this.starts[i] as number;
  }

  /** Views of the bytes from `start` to `end`, in order (none when the range is empty). */
  pieces(start: number, end: number): Buffer[] {
    const out: Buffer[] = [];
    if (start >= end) return out;
    for (let i = this.chunkAt(start); i < this.chunks.length && (this.starts[i] as number) < end; i++) {
      const chunk = this.chunks[i] as Buffer;
      const from = Math.max(0, start - (this.starts[i] as number));
      const to = Math.min(chunk.length, end - (this.starts[i] as number));
      out.push(from === 0 && to === chunk.length ? chunk : chunk.subarray(from, to));
    }
    return out;
  }

  /** Whether the bytes from `at` are those of `piece`. */
  holds(at: number, piece: Uint8Array): boolean {
    if (at + piece.length > this.length) return false;
    return samePieces(this.pieces(at, at + piece.length), [piece]);
  }

  /** Whether `other` holds the same bytes, however they are chunked. */
  equals(other: ChunkedBytes): boolean {
    return (
      this.length === other.length && samePieces(this.pieces(0, this.length), other.pieces(0, other.length))
    );
  }

  /** The bytes from `start` to `end` as UTF-8 text. */
  text(start: number, end: number): string {
    const pieces = this.pieces(start, end);
    if (pieces.length === 1) return (pieces[0] as Buffer).toString('utf8');
    return Buffer.concat(pieces).toString('utf8');
  }
}

/** Whether two lists of pieces hold the same bytes in a row (their total lengths must be equal). */
export function samePieces(a: readonly Uint8Array[], b: readonly Uint8Array[]): boolean {
  let i = 0;
  let j = 0;
  let atA = 0;
  let atB = 0;
  while (i < a.length && j < b.length) {
    const pa = a[i] as Uint8Array;
    const pb = b[j] as Uint8Array;
    const n = Math.min(pa.length - atA, pb.length - atB);
    if (Buffer.compare(pa.subarray(atA, atA + n), pb.subarray(atB, atB + n)) !== 0) return false;
    atA += n;
    atB += n;
    if (atA === pa.length) {
      i++;
      atA = 0;
    }
    if (atB === pb.length) {
      j++;
      atB = 0;
    }
  }
  // Whatever is left on either side must be empty pieces.
  for (; i < a.length; i++, atA = 0) if ((a[i] as Uint8Array).length > atA) return false;
  for (; j < b.length; j++, atB = 0) if ((b[j] as Uint8Array).length > atB) return false;
  return true;
}
