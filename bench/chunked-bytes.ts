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

  /**
   * Whether the bytes from `at` are those of `piece`, compared in place chunk by chunk: every
   * client receiving a response another one kept calls this for each piece it receives.
   */
  holds(at: number, piece: Buffer): boolean {
    if (at + piece.length > this.length) return false;
    let done = 0;
    for (let i = this.chunkAt(at); done < piece.length; i++) {
      const chunk = this.chunks[i] as Buffer;
      const from = at + done - (this.starts[i] as number);
      const n = Math.min(chunk.length - from, piece.length - done);
      if (n > 0 && chunk.compare(piece, done, done + n, from, from + n) !== 0) return false;
      done += n;
    }
    return true;
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
export function samePieces(a: readonly Buffer[], b: readonly Buffer[]): boolean {
  let i = 0;
  let j = 0;
  let atA = 0;
  let atB = 0;
  while (i < a.length && j < b.length) {
    const pa = a[i] as Buffer;
    const pb = b[j] as Buffer;
    const n = Math.min(pa.length - atA, pb.length - atB);
    // Compared in place: no view is made per step.
    if (n > 0 && pa.compare(pb, atB, atB + n, atA, atA + n) !== 0) return false;
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
  for (; i < a.length; i++, atA = 0) if ((a[i] as Buffer).length > atA) return false;
  for (; j < b.length; j++, atB = 0) if ((b[j] as Buffer).length > atB) return false;
  return true;
}
