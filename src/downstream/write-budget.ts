/** A stream waiting for room to write; `resume()` is called when it may try again. */
export interface BudgetWaiter {
  resume(): void;
  /**
   * The address its peer connects from: in line, a stream of an address none of whose streams has
   * bytes in flight (parked ones included) goes before one of an address that has. Without one, a
   * waiter is an address of its own.
   */
  readonly peerIp?: string | undefined;
}

export interface WriteBudgetOptions {
  /** Bytes of responses handed to gRPC but not yet flushed to the socket, over every stream. */
  readonly maxBytes: number;
  /** Responses up to this size never wait: they cannot threaten memory and carry the fastest news. */
  readonly smallBytes: number;
  /**
   * Bytes one stream may have in flight. A stream over it waits for its own writes to flush, never
   * for anyone else's; a single response larger than this goes alone on its stream.
   */
  readonly maxStreamBytes: number;
}

/**
 * Default: 64 MiB in flight over all streams, 32 MiB per stream; responses of 64 KiB or less always
 * go at once.
 */
export const DEFAULT_WRITE_BUDGET: WriteBudgetOptions = Object.freeze({
  maxBytes: 64 * 1024 * 1024,
  smallBytes: 64 * 1024,
  maxStreamBytes: 32 * 1024 * 1024,
});

/**
 * The order of the line: streams seen reading; then the others, those of a peer address with no
 * bytes in flight first (a stream offered in an earlier pass is no longer in line).
 */
const PASSES = [
  { readers: true, idlePeersOnly: false },
  { readers: false, idlePeersOnly: true },
  { readers: false, idlePeersOnly: false },
] as const;

/** What one stream holds. `parked` bytes are in flight but no longer counted globally. */
interface StreamAccount {
  inFlight: number;
  charged: number;
}

/**
 * A budget of bytes in flight, over all streams and per stream. grpc-js copies every message it is
 * given and keeps the copy until HTTP/2 flow control lets it out, so handing one shared 30 MB
 * response to 200 streams at once would hold 6 GB. Streams take bytes before writing and give them
 * back when the write is flushed.
 *
 * A stream that does not fit the global budget waits in line and, when resumed, writes whatever is
 * latest by then, so a client that waits never receives a stale response. The line never blocks:
 * when room comes back every waiter is offered it (those a write of which flushed first; then the
 * others, those of a peer address none of whose streams has bytes in flight first; each in
 * arrival order), and one that still does not fit keeps its place while those behind it that fit
 * go. A stream over its own share waits for its own writes only. A response larger than the whole
 * budget goes alone.
 *
 * A stream whose peer stopped reading is `park`ed by its owner: its bytes stay counted against the
 * stream (so it cannot take more than its share) but leave the global count, so a receiver that
 * stalls delays only itself until its send deadline closes it. Single-threaded: no locking.
 */
export class WriteBudget {
  private inFlight = 0;
  private parked = 0;
  /** Waiting streams in arrival order (a Map keeps the first insertion's position), with the bytes they asked for. */
  private readonly queue = new Map<BudgetWaiter, number>();
  /** Streams waiting for their own writes to flush. */
  private readonly overShare = new Set<BudgetWaiter>();
  private readonly accounts = new Map<BudgetWaiter, StreamAccount>();
  /** Waiters a write of which flushed: their peers read. */
  private readonly reading = new WeakSet<BudgetWaiter>();
  /** Per peer address, its streams with bytes in flight (parked or not). */
  private readonly busyPeers = new Map<string, number>();
  /** The waiter being resumed: it may take bytes while others are queued. */
  private turn: BudgetWaiter | undefined;
  private pumping = false;
  private pumpAgain = false;
  /** Highest number of bytes ever counted in flight globally. */
  peakBytes = 0;

  constructor(private readonly options: WriteBudgetOptions = DEFAULT_WRITE_BUDGET) {}

  /** Bytes handed to gRPC and not yet flushed, counted against the global budget. */
  get bytesInFlight(): number {
    return this.inFlight;
  }

  /** Bytes in flight on parked (stalled) streams, not counted against the global budget. */
  get parkedBytes(): number {
    return this.parked;
  }

  /** Streams waiting for room (globally, or for their own writes to flush). */
  get waiting(): number {
    return this.queue.size + this.overShare.size;
  }

  /** Bytes the waiter has in flight, parked or not. */
  heldBy(waiter: BudgetWaiter): number {
    return this.accounts.get(waiter)?.inFlight ?? 0;
  }

  /**
   * Takes `bytes` if they fit the stream's share and the global budget; otherwise the waiter waits
   * (for its own writes, or in line, keeping its place if it has one) and false is returned.
   */
  take(bytes: number, waiter: BudgetWaiter): boolean {
    const account = this.accounts.get(waiter);
    const held = account?.inFlight ?? 0;
    const small = bytes <= this.options.smallBytes;
    if (!small && held > 0 && held + bytes > this.options.maxStreamBytes) {
      this.queue.delete(waiter);
      this.overShare.add(waiter);
      return false;
    }
    const fits = small || this.inFlight === 0 || this.inFlight + bytes <= this.options.maxBytes;
    // Outside a pump no queued waiter fits (each was offered the room when it was last given back),
    // so a newcomer that fits takes nothing a waiter could use now; during one, the line goes first.
    const mayGo = small || !this.pumping || this.turn === waiter;
    if (fits && mayGo) {
      this.queue.delete(waiter);
      this.overShare.delete(waiter);
      const a = account ?? { inFlight: 0, charged: 0 };
      if (a.inFlight === 0 && bytes > 0) this.busy(waiter, 1);
      a.inFlight += bytes;
      a.charged += bytes;
      this.accounts.set(waiter, a);
      this.inFlight += bytes;
      if (this.inFlight > this.peakBytes) this.peakBytes = this.inFlight;
      return true;
    }
    this.overShare.delete(waiter);
    this.queue.set(waiter, bytes);
    return false;
  }

  /**
   * Gives back bytes the waiter took (a write flushed, or its stream ended) and offers the room to
   * whoever waits. The oldest bytes flush first, so parked bytes are given back before charged ones.
   */
  release(bytes: number, waiter: BudgetWaiter): void {
    this.reading.add(waiter);
    const account = this.accounts.get(waiter);
    if (account !== undefined) {
      const had = account.inFlight > 0;
      const parked = account.inFlight - account.charged;
      const fromParked = Math.min(bytes, parked);
      const fromCharged = Math.min(bytes - fromParked, account.charged);
      account.inFlight -= fromParked + fromCharged;
      account.charged -= fromCharged;
      this.parked -= fromParked;
      this.inFlight -= fromCharged;
      if (account.inFlight <= 0) {
        this.accounts.delete(waiter);
        if (had) this.busy(waiter, -1);
      }
    }
    if (this.overShare.delete(waiter)) this.offer(waiter);
    this.pump();
  }

  /**
   * Stops counting the waiter's bytes in flight against the global budget (its peer stopped
   * reading); they still count against its own share until they flush or are given back.
   */
  park(waiter: BudgetWaiter): void {
    const account = this.accounts.get(waiter);
    if (account === undefined || account.charged === 0) return;
    this.inFlight -= account.charged;
    this.parked += account.charged;
    account.charged = 0;
    this.pump();
  }

  /** Forgets a waiter (its stream ended, or it has nothing left to write). Its bytes stay until released. */
  cancel(waiter: BudgetWaiter): void {
    this.overShare.delete(waiter);
    if (this.queue.delete(waiter)) this.pump();
  }

  /** Gives back everything the waiter holds and forgets it (its stream ended). */
  forget(waiter: BudgetWaiter): void {
    const held = this.heldBy(waiter);
    this.overShare.delete(waiter);
    this.queue.delete(waiter);
    if (held > 0) this.release(held, waiter);
    else this.pump();
  }

  /** Counts a stream of the waiter's address that began (1) or ended (-1) having bytes in flight. */
  private busy(waiter: BudgetWaiter, change: 1 | -1): void {
    const peer = waiter.peerIp;
    if (peer === undefined) return;
    const streams = (this.busyPeers.get(peer) ?? 0) + change;
    if (streams > 0) this.busyPeers.set(peer, streams);
    else this.busyPeers.delete(peer);
  }

  /** Whether some stream of the waiter's address has bytes in flight. */
  private peerBusy(waiter: BudgetWaiter): boolean {
    return waiter.peerIp !== undefined && this.busyPeers.has(waiter.peerIp);
  }

  private offer(waiter: BudgetWaiter): void {
    this.turn = waiter;
    try {
      waiter.resume();
    } finally {
      this.turn = undefined;
    }
  }

  /**
   * Offers room to every queued waiter, those whose peers were seen reading first, each group in
   * arrival order; one that does not fit keeps its place. Streams that never had a write flushed
   * (new ones, and clients that connect and never read, which hold their bytes until they are
   * parked) thus never delay a reading istiod's next change by more than one room's turn. Among
   * those, a stream of an address with no bytes in flight goes first: an address whose streams
   * never read keeps its parked bytes in flight, so its later streams wait in arrival order, and a
   * new istiod elsewhere waits for one round (until the streams holding the room are parked), not
   * for all of them.
   */
  private pump(): void {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        const line = [...this.queue];
        for (const pass of PASSES) {
          for (const [waiter, bytes] of line) {
            if (this.reading.has(waiter) !== pass.readers || !this.queue.has(waiter)) continue;
            if (pass.idlePeersOnly && this.peerBusy(waiter)) continue;
            const fits =
              bytes <= this.options.smallBytes ||
              this.inFlight === 0 ||
              this.inFlight + bytes <= this.options.maxBytes;
            if (fits) this.offer(waiter);
          }
        }
      } while (this.pumpAgain);
    } finally {
      this.pumping = false;
    }
  }
}
