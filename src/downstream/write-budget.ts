/** A stream waiting for room to write; `resume()` is called when it may try again. */
export interface BudgetWaiter {
  resume(): void;
}

export interface WriteBudgetOptions {
  /** Bytes of responses handed to gRPC but not yet flushed to the socket, over every stream. */
  readonly maxBytes: number;
  /** Responses up to this size never wait: they cannot threaten memory and carry the fastest news. */
  readonly smallBytes: number;
}

/** Default: 64 MiB in flight over all streams; responses of 64 KiB or less always go at once. */
export const DEFAULT_WRITE_BUDGET: WriteBudgetOptions = Object.freeze({
  maxBytes: 64 * 1024 * 1024,
  smallBytes: 64 * 1024,
});

/**
 * A global budget of bytes in flight. grpc-js copies every message it is given and keeps the
 * copy until HTTP/2 flow control lets it out, so handing one shared 30 MB response to 200 streams
 * at once would hold 6 GB. Streams take bytes before writing and give them back when the write is
 * flushed; a stream that does not fit waits its turn (first come, first served) and, when resumed,
 * writes whatever is latest by then, so a client that waits never receives a stale response.
 * A response larger than the whole budget goes alone. Single-threaded: no locking.
 */
export class WriteBudget {
  private inFlight = 0;
  /** Waiting streams in arrival order (a Set keeps the first insertion's position). */
  private readonly queue = new Set<BudgetWaiter>();
  /** The waiter being resumed: it may take bytes ahead of the others. */
  private turn: BudgetWaiter | undefined;
  private pumping = false;
  /** Highest number of bytes ever in flight. */
  peakBytes = 0;

  constructor(private readonly options: WriteBudgetOptions = DEFAULT_WRITE_BUDGET) {}

  /** Bytes handed to gRPC and not yet flushed. */
  get bytesInFlight(): number {
    return this.inFlight;
  }

  /** Streams waiting for room. */
  get waiting(): number {
    return this.queue.size;
  }

  /**
   * Takes `bytes` if they fit and it is the waiter's turn; otherwise queues the waiter (keeping
   * its place if it already has one) and returns false.
   */
  take(bytes: number, waiter: BudgetWaiter): boolean {
    const small = bytes <= this.options.smallBytes;
    const fits = small || this.inFlight === 0 || this.inFlight + bytes <= this.options.maxBytes;
    const myTurn = small || this.turn === waiter || this.queue.size === 0;
    if (fits && myTurn) {
      this.queue.delete(waiter);
      this.inFlight += bytes;
      if (this.inFlight > this.peakBytes) this.peakBytes = this.inFlight;
      return true;
    }
    this.queue.add(waiter);
    return false;
  }

  /** Gives back bytes taken (their write was flushed, or its stream ended) and resumes waiters. */
  release(bytes: number): void {
    this.inFlight -= bytes;
    this.pump();
  }

  /** Forgets a waiter (its stream ended, or it has nothing left to write). */
  cancel(waiter: BudgetWaiter): void {
    if (this.queue.delete(waiter)) this.pump();
  }

  /** Resumes waiters in order while the one at the head makes progress. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (;;) {
        const head = this.queue.values().next().value;
        if (head === undefined) break;
        this.turn = head;
        try {
          head.resume();
        } finally {
          this.turn = undefined;
        }
        // Still first in line: it did not fit, so nobody behind it goes either.
        if (this.queue.values().next().value === head) break;
      }
    } finally {
      this.pumping = false;
    }
  }
}
