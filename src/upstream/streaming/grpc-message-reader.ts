/** Why a stream's bytes cannot be read as gRPC messages: the status the stream ends with. */
export class GrpcReadError extends Error {
  constructor(
    /** `RESOURCE_EXHAUSTED` for a message over the limit, `INTERNAL` for anything malformed. */
    readonly status: 'RESOURCE_EXHAUSTED' | 'INTERNAL',
    message: string,
  ) {
    super(message);
    this.name = 'GrpcReadError';
  }
}

/** Bytes of the prefix of every gRPC message: a compression flag, then the length (big-endian). */
const PREFIX_BYTES = 5;

/**
 * Takes a message's bytes as they arrive instead of the reader copying them, for a receiver that
 * expects the message to repeat bytes it already holds (a state sent again, say): when it does,
 * the message needs no buffer at all. See {@link GrpcMessageReader}.
 */
export interface MessageMatcher {
  /**
   * Takes `chunk[from, to)`, the message's next bytes, as far as they are what the matcher
   * expects, and returns how many it took. Taking fewer (none, once a byte it took showed that the
   * message is not what it expects) ends the matching: the reader copies the message from there
   * on, after {@link copyTaken}.
   */
  take(chunk: Uint8Array, from: number, to: number): number;
  /** Writes the bytes taken so far, as they came, into `target` from its start. */
  copyTaken(target: Uint8Array): void;
  /**
   * Once every byte of the message was taken: whether the matcher can hand it on ({@link deliver})
   * in its own form; otherwise the reader copies it and delivers the bytes.
   */
  complete(): boolean;
  /** Hands the message on, in the matcher's own form (after {@link complete} said it can). */
  deliver(): void;
}

/**
 * Reassembles the length-prefixed messages of one gRPC stream from the chunks HTTP/2 delivers,
 * copying each chunk's bytes where they belong as it arrives. No chunk is kept: a chunk that
 * outlived the message it carried would keep its memory past the young generation, and the bytes
 * of a large response, held in pieces until it is whole, are what start full collections of the
 * heap on every response (see BENCHMARKS.md).
 *
 * A message is handed to `deliver` synchronously, as a view that is valid only during that call
 * when the reader lends (`lend: true`): it lies in the reader's own buffer, reused for the next
 * message (grown to the largest message the stream has carried, which `maxBytes` bounds, until
 * {@link release}), or in
 * the chunk itself when it arrived whole. The receiver copies whatever it keeps, or adopts the
 * reader's buffer ({@link adopt}). Without lending, each message is a buffer of its own.
 *
 * A lent message that would need a new buffer (the reader holds none, or none large enough) is
 * first offered to a matcher (`expect`): while its bytes are what the matcher expects, nothing of
 * the message's size is allocated, and a message matched to its end is handed on by the matcher.
 * Where they stop agreeing, the reader takes a buffer, has the matcher write what it took, and
 * copies the rest.
 */
export class GrpcMessageReader {
  private readonly prefix = Buffer.alloc(PREFIX_BYTES);
  /** Bytes of the prefix read so far (0 to 5), then of the message while `target` is set. */
  private prefixRead = 0;
  private target: Buffer | undefined;
  private size = 0;
  private filled = 0;
  /** The buffer lent messages are assembled in, kept for the next one. */
  private scratch: Buffer | undefined;
  /** While a message assembled in `scratch` is being delivered: it may be adopted. */
  private delivering = false;
  /** Taking the current message's bytes in place of `target`. */
  private matcher: MessageMatcher | undefined;

  constructor(
    /** The largest message accepted, in bytes. */
    private readonly maxBytes: number,
    private readonly lend: boolean,
    /** A matcher for a lent message of `size` bytes that would need a new buffer, or none. */
    private readonly expect?: (size: number) => MessageMatcher | undefined,
  ) {}

  /**
   * Lets the reassembly buffer go (the next message that needs one allocates it again), unless a
   * message is being assembled in it: for a stream gone quiet, so the largest response it carried
   * is not held twice while nothing changes.
   */
  release(): void {
    if (this.target === undefined) this.scratch = undefined;
  }

  /**
   * During the delivery of a lent message assembled in the reader's buffer: hands that buffer
   * (which the message is a view of, from its start) over to the receiver for good; the next
   * message that needs one is assembled in a new buffer (or offered to the matcher first). A
   * receiver that keeps the message thus copies nothing. Returns undefined, keeping nothing,
   * outside such a delivery (the message lay whole in one chunk) or when the buffer is more than
   * twice the message's size: the receiver copies the message then.
   */
  adopt(): Buffer | undefined {
    const taken = this.scratch;
    if (!this.delivering || taken === undefined) return undefined;
    // Only a buffer of about the message's size goes with it: a stream that carries a large type
    // and a small one keeps its large buffer for the large type.
    if (taken.byteLength > 2 * this.size + 65536) return undefined;
    this.scratch = undefined;
    this.delivering = false;
    return taken;
  }

  /** Whether a message has begun and not ended: a stream ending now was cut short. */
  get midMessage(): boolean {
    return this.prefixRead > 0;
  }

  /**
   * Reads one chunk, delivering every message it completes: as bytes to `deliver`, or, matched
   * whole, as its matcher to `delivered` (which by default has it hand the message on). Throws
   * {@link GrpcReadError} for a compressed message (meshmux asks for none) or one over the limit,
   * before its bytes are held.
   */
  push(
    chunk: Uint8Array,
    deliver: (message: Uint8Array) => void,
    delivered: (matcher: MessageMatcher) => void = (matcher) => matcher.deliver(),
  ): void {
    let at = 0;
    const end = chunk.byteLength;
    while (at < end) {
      if (this.target === undefined && this.matcher === undefined) {
        if (this.prefixRead === 0 && end - at >= PREFIX_BYTES) {
          // The usual case: the prefix whole in this chunk.
          const size = this.begin(chunk[at] ?? 0, readUint32(chunk, at + 1));
          at += PREFIX_BYTES;
          if (this.lend && size <= end - at) {
            // The whole message in this chunk: lent where it lies.
            this.prefixRead = 0;
            deliver(chunk.subarray(at, at + size));
            at += size;
            continue;
          }
          this.startTarget(size);
        } else {
          const take = Math.min(PREFIX_BYTES - this.prefixRead, end - at);
          this.prefix.set(chunk.subarray(at, at + take), this.prefixRead);
          this.prefixRead += take;
          at += take;
          if (this.prefixRead < PREFIX_BYTES) return;
          this.startTarget(this.begin(this.prefix[0] ?? 0, this.prefix.readUInt32BE(1)));
        }
      }
      at =
        this.matcher === undefined
          ? this.fill(chunk, at, end, deliver)
          : this.match(chunk, at, end, deliver, delivered);
    }
  }

  /** Offers what `chunk` holds of the current message from `at` to its matcher. */
  private match(
    chunk: Uint8Array,
    at: number,
    end: number,
    deliver: (message: Uint8Array) => void,
    delivered: (matcher: MessageMatcher) => void,
  ): number {
    const matcher = this.matcher as MessageMatcher;
    const offered = Math.min(this.size - this.filled, end - at);
    const took = matcher.take(chunk, at, at + offered);
    this.filled += took;
    if (took === offered && this.filled < this.size) return at + took;
    this.matcher = undefined;
    if (took === offered && matcher.complete()) {
      this.prefixRead = 0;
      delivered(matcher);
      return at + took;
    }
    // The bytes stopped agreeing (or the whole does not): copied from here on, as any message.
    const target = this.allocateTarget(this.size);
    matcher.copyTaken(target);
    this.target = target;
    if (this.filled === this.size) this.deliverTarget(target, deliver);
    return at + took;
  }

  /** Copies what `chunk` holds of the current message from `at`; delivers it once whole. */
  private fill(chunk: Uint8Array, at: number, end: number, deliver: (message: Uint8Array) => void): number {
    const target = this.target;
    if (target === undefined) return end;
    const take = Math.min(this.size - this.filled, end - at);
    if (take > 0) target.set(chunk.subarray(at, at + take), this.filled);
    this.filled += take;
    if (this.filled === this.size) this.deliverTarget(target, deliver);
    return at + take;
  }

  private deliverTarget(target: Buffer, deliver: (message: Uint8Array) => void): void {
    this.target = undefined;
    this.prefixRead = 0;
    this.delivering = this.lend;
    try {
      deliver(target.subarray(0, this.size));
    } finally {
      this.delivering = false;
    }
  }

  /** Checks a message's prefix; returns its size. */
  private begin(flag: number, size: number): number {
    if (flag !== 0) {
      throw new GrpcReadError(
        'INTERNAL',
        flag === 1
          ? 'the upstream sent a compressed message although meshmux accepts identity encoding only'
          : `a message prefix has compression flag ${flag} (not 0 or 1)`,
      );
    }
    if (size > this.maxBytes) {
      throw new GrpcReadError(
        'RESOURCE_EXHAUSTED',
        `the upstream sent a message of ${size} bytes, over maxReceiveSize (${this.maxBytes} bytes)`,
      );
    }
    this.prefixRead = PREFIX_BYTES;
    return size;
  }

  private startTarget(size: number): void {
    this.size = size;
    this.filled = 0;
    if (
      this.lend &&
      this.expect !== undefined &&
      (this.scratch === undefined || this.scratch.byteLength < size)
    ) {
      this.matcher = this.expect(size);
      if (this.matcher !== undefined) return;
    }
    this.target = this.allocateTarget(size);
  }

  /** The buffer a message of `size` bytes is assembled in. */
  private allocateTarget(size: number): Buffer {
    if (!this.lend) return Buffer.allocUnsafeSlow(size);
    if (this.scratch === undefined || this.scratch.byteLength < size) {
      // A little room, so a response that grows by a few objects does not allocate again.
      this.scratch = Buffer.allocUnsafeSlow(Math.min(this.maxBytes, size + (size >>> 4)));
    }
    return this.scratch;
  }
}

function readUint32(bytes: Uint8Array, at: number): number {
  return (
    (((bytes[at] ?? 0) << 24) >>> 0) +
    ((bytes[at + 1] ?? 0) << 16) +
    ((bytes[at + 2] ?? 0) << 8) +
    (bytes[at + 3] ?? 0)
  );
}
