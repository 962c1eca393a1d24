import { write as writeAsync, writeSync } from 'node:fs';

/** What a {@link LogDestination} needs besides its file descriptor; every field has a default. */
export interface LogDestinationOptions {
  /** Bytes of lines held while the output does not take them; a line beyond is dropped. */
  readonly maxBytes?: number;
  /** How long to wait before trying again when the output is full (EAGAIN). */
  readonly retryMs?: number;
  /**
   * Called, outside the write path, once the output took every line held after some were
   * dropped: with how many were dropped since the last call.
   */
  readonly onDrained?: (dropped: number) => void;
}

const DEFAULT_MAX_BYTES = 4 * 1024 * 1024;
const DEFAULT_RETRY_MS = 50;
/** Bytes handed to one write call: a large backlog is written in pieces of this size. */
const WRITE_PIECE_BYTES = 256 * 1024;

/**
 * Where log lines go: a file descriptor written asynchronously, never waited for. A line is
 * queued and written later; while the output does not take lines (a pipe whose reader stopped),
 * up to `maxBytes` of them are held and those beyond are dropped and counted, so a stuck reader
 * costs lines, never the event loop. `flushSync` writes what is held at exit, within a deadline.
 *
 * Lines are written in the order they came; a write error other than a full output (EPIPE: the
 * reader is gone) drops what is held and every later line, counted as dropped.
 */
export class LogDestination {
  private readonly maxBytes: number;
  private readonly retryMs: number;
  private readonly onDrained: ((dropped: number) => void) | undefined;
  /** Lines waiting, oldest first; `heldBytes` is their size. */
  private queue: Buffer[] = [];
  private heldBytes = 0;
  /** The piece an asynchronous write has been handed, until its callback. */
  private inFlight: Buffer | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private droppedTotal = 0;
  private droppedSinceReport = 0;

  constructor(
    private readonly fd: number,
    options: LogDestinationOptions = {},
  ) {
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    this.retryMs = options.retryMs ?? DEFAULT_RETRY_MS;
    this.onDrained = options.onDrained;
  }

  /** Lines dropped since the start, for a metric. */
  get dropped(): number {
    return this.droppedTotal;
  }

  /** Queues one line (pino's stream interface); never blocks, never throws. */
  write(line: string): boolean {
    if (this.closed) {
      this.drop(1);
      return false;
    }
    const bytes = Buffer.from(line);
    if (this.heldBytes + bytes.byteLength > this.maxBytes) {
      this.drop(1);
      return false;
    }
    this.queue.push(bytes);
    this.heldBytes += bytes.byteLength;
    if (this.inFlight === undefined && this.retryTimer === undefined) this.writeNext();
    return true;
  }

  /**
   * Writes what is held synchronously, giving up at `deadlineMs` from now (the output still
   * full). For the moment the process exits; a write already handed to the thread pool is left
   * to it. Returns whether everything was written.
   */
  flushSync(deadlineMs: number): boolean {
    const deadline = performance.now() + deadlineMs;
    const pause = new Int32Array(new SharedArrayBuffer(4));
    while (!this.closed && this.queue.length > 0) {
      const piece = this.takePiece();
      try {
        const written = writeSync(this.fd, piece);
        if (written < piece.byteLength) this.putBack(piece.subarray(written));
      } catch (err) {
        this.putBack(piece);
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') {
          this.close();
          return false;
        }
        const left = deadline - performance.now();
        if (left <= 0) return false;
        Atomics.wait(pause, 0, 0, Math.min(10, left));
      }
    }
    return this.queue.length === 0;
  }

  /** Whether nothing is held and no write is under way. */
  get idle(): boolean {
    return this.queue.length === 0 && this.inFlight === undefined;
  }

  private writeNext(): void {
    this.retryTimer = undefined;
    if (this.closed || this.queue.length === 0) {
      this.reportDrained();
      return;
    }
    const piece = this.takePiece();
    this.inFlight = piece;
    writeAsync(this.fd, piece, 0, piece.byteLength, null, (err, written) => {
      this.inFlight = undefined;
      if (err === null) {
        if (written < piece.byteLength) this.putBack(piece.subarray(written));
        this.writeNext();
        return;
      }
      this.putBack(piece);
      if (err.code === 'EAGAIN') {
        // The output is full: try again later, without holding the process open for it.
        this.retryTimer = setTimeout(() => this.writeNext(), this.retryMs);
        this.retryTimer.unref();
        return;
      }
      this.close();
    });
  }

  /** Takes up to WRITE_PIECE_BYTES of the oldest lines off the queue as one buffer. */
  private takePiece(): Buffer {
    let count = 0;
    let size = 0;
    for (const line of this.queue) {
      if (count > 0 && size + line.byteLength > WRITE_PIECE_BYTES) break;
      size += line.byteLength;
      count++;
    }
    const lines = this.queue.splice(0, count);
    this.heldBytes -= size;
    return lines.length === 1 ? (lines[0] as Buffer) : Buffer.concat(lines, size);
  }

  private putBack(rest: Buffer): void {
    this.queue.unshift(rest);
    this.heldBytes += rest.byteLength;
  }

  /** The output is gone: what is held and every later line are dropped. */
  private close(): void {
    this.closed = true;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.drop(this.queue.length);
    this.queue = [];
    this.heldBytes = 0;
  }

  private drop(lines: number): void {
    this.droppedTotal += lines;
    this.droppedSinceReport += lines;
  }

  private reportDrained(): void {
    if (this.closed || this.droppedSinceReport === 0) return;
    const dropped = this.droppedSinceReport;
    this.droppedSinceReport = 0;
    // After the current write path: the report is itself a line written here.
    setImmediate(() => this.onDrained?.(dropped)).unref();
  }
}
