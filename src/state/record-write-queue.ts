import { toMeshmuxError, type MeshmuxError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { SourceRecord } from '../merge/source-record.js';

/** What a store tells telemetry. Called synchronously; must not throw. */
export interface RecordStoreHooks {
  onWrite?(source: string, bytes: number, ms: number): void;
  onWriteError?(source: string, error: MeshmuxError): void;
  onLoadError?(where: string, error: MeshmuxError): void;
  /** A file of the source's record was found removed or replaced, and written back. */
  onPutBack?(source: string, file: string): void;
}

/** Per source: what a store knows of its last write, for `/debug/state`. */
export interface RecordWriteStatus {
  readonly source: string;
  readonly lastWrite?: string;
  readonly bytes?: number;
  readonly writeMs?: number;
  readonly lastError?: string;
}

/** What a sink did with one record. */
export interface SinkWrite {
  readonly bytes: number;
  /**
   * The record was kept in a form that is quick to write but not to read back (a journal grown
   * past its bound): the source is to be written again later, on the usual schedule.
   */
  readonly again?: boolean;
  /** Nothing was written: the store holds a record of the source taken after this one. */
  readonly superseded?: boolean;
}

/** Where records go: one whole record per call. */
export interface RecordSink {
  /**
   * Stores `record` for `source`, replacing the previous one. `soon`: a change waits for it to be
   * kept before it is served, so the sink takes its quickest durable way (a journal entry), even
   * when that leaves it to be written again later (`again`).
   */
  write(source: string, record: SourceRecord, soon: boolean): Promise<SinkWrite>;
  /** Names where `source`'s record lives, for errors (a file path, a key). */
  where(source: string): string;
}

export interface RecordWriteQueueOptions {
  readonly log: Logger;
  readonly hooks?: RecordStoreHooks | undefined;
  /** Wait after a change before writing, so a burst of changes costs one write. Default 1 s. */
  readonly delayMs?: number | undefined;
  /** Retry a failed write after this long even without a new change. Default 10 s. */
  readonly retryMs?: number | undefined;
  /**
   * How long after a change a source not written for at least its spacing is written (default:
   * `delayMs`), so that the pieces of one change (an upstream answers type by type) cost one write;
   * changes that follow within the spacing still wait for it. For a store no change waits for
   * (etcd), whose delay was a window in which the writer's death lost the change.
   */
  readonly quietDelayMs?: number | undefined;
}

/**
 * The write policy every record store shares: a change is written later than it happens (a burst
 * costs one write), one write at a time, a source that writes slowly is written less often (at
 * least ten times its last write's duration apart), and a failed write is reported once per
 * distinct error and retried while serving goes on. Only the latest record of a source is ever
 * written: `read` is called at write time.
 *
 * A change whose caller waits for it to be kept (`changed(…, true)`) is written at once instead,
 * past the delay and the spacing, by the sink's quickest durable way; whatever that leaves to
 * rewrite (a journal folded into its file) is then written on the schedule above.
 */
export class RecordWriteQueue {
  private readonly dirty = new Map<string, () => SourceRecord>();
  private readonly status = new Map<string, RecordWriteStatus>();
  /**
   * Per source, the soonest it may be written again, on the monotonic clock: a wall clock stepped
   * back (an NTP correction, a VM resumed) would otherwise hold its writes for as long as the step.
   */
  private readonly earliest = new Map<string, number>();
  /** Per dirty source awaited by a caller: who waits for its next write to end. */
  private readonly waiters = new Map<string, (() => void)[]>();
  private timer: NodeJS.Timeout | undefined;
  /** When the pending timer fires (the monotonic clock). */
  private timerDue = 0;
  private flushing: Promise<void> | undefined;
  /** The write under way, and whether its source was forgotten meanwhile. */
  private writing: { readonly source: string; readonly done: Promise<void>; forgotten: boolean } | undefined;
  private closed = false;
  private paused = false;
  private readonly delayMs: number;
  private readonly retryMs: number;

  constructor(
    private readonly sink: RecordSink,
    private readonly options: RecordWriteQueueOptions,
  ) {
    this.delayMs = options.delayMs ?? 1000;
    this.retryMs = options.retryMs ?? 10_000;
  }

  /**
   * The source's record changed; it is written after the delay (or kept while paused). With
   * `soon` it is written at once, and the promise resolves when a write that read the record
   * after this call has ended, kept or failed (a failure is reported and retried as ever); it
   * resolves at once while paused or closed, when no write is coming. Never rejects.
   */
  changed(source: string, read: () => SourceRecord, soon = false): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.dirty.set(source, read);
    if (!soon || this.paused) {
      const quiet = (this.earliest.get(source) ?? 0) <= performance.now();
      this.schedule(quiet ? (this.options.quietDelayMs ?? this.delayMs) : this.delayMs);
      return Promise.resolve();
    }
    const kept = new Promise<void>((resolve) => {
      const waiting = this.waiters.get(source);
      if (waiting === undefined) this.waiters.set(source, [resolve]);
      else waiting.push(resolve);
    });
    this.schedule(0);
    return kept;
  }

  /** The source is gone: nothing more is written for it. */
  forget(source: string): void {
    this.release(source);
    this.dirty.delete(source);
    this.status.delete(source);
    this.earliest.delete(source);
    if (this.writing?.source === source) this.writing.forgotten = true;
  }

  /**
   * Resolves once no write of `source` is under way: a removal of its record that went before a
   * write already sent would be undone by it.
   */
  async idle(source: string): Promise<void> {
    const writing = this.writing;
    if (writing?.source === source) await writing.done;
  }

  /**
   * While paused, changes are remembered (the latest per source) but not written; `resume` writes
   * them. A store that is not the designated writer pauses.
   */
  pause(): void {
    this.paused = true;
    for (const source of [...this.waiters.keys()]) this.release(source);
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.earliest.clear();
    if (this.dirty.size > 0) this.schedule(0);
  }

  /** Per source, its last write or error. */
  report(): RecordWriteStatus[] {
    return [...this.status.values()];
  }

  /** Writes everything pending now (unless paused), then stops writing. */
  async close(): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.flushing;
    if (!this.paused) await this.flush(true);
    this.closed = true;
    for (const source of [...this.waiters.keys()]) this.release(source);
  }

  /** Those waiting for the source's next write are let go. */
  private release(source: string): void {
    const waiting = this.waiters.get(source);
    this.waiters.delete(source);
    for (const resolve of waiting ?? []) resolve();
  }

  private schedule(delayMs: number): void {
    if (this.flushing !== undefined || this.closed || this.paused) return;
    if (this.timer !== undefined) {
      // A write due sooner (awaited, or after a quiet spell) goes before a pending delay.
      if (performance.now() + delayMs >= this.timerDue) return;
      clearTimeout(this.timer);
    }
    this.timerDue = performance.now() + delayMs;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flushing = this.flush(false).finally(() => {
        this.flushing = undefined;
        if (this.dirty.size > 0) this.schedule(this.nextDelay());
      });
    }, delayMs);
    this.timer.unref();
  }

  /** Until the soonest a dirty source may be written again (now when one is awaited). */
  private nextDelay(): number {
    if (this.waiters.size > 0) return 0;
    const now = performance.now();
    let soonest = Infinity;
    for (const source of this.dirty.keys()) soonest = Math.min(soonest, this.earliest.get(source) ?? now);
    return Math.max(this.delayMs, soonest - now);
  }

  /** Writes each dirty source that may be written now (every one when `all`), one at a time. */
  private async flush(all: boolean): Promise<void> {
    // Those awaited first: a change waits for them before it is served.
    const order = [...this.dirty.keys()].sort(
      (a, b) => Number(this.waiters.has(b)) - Number(this.waiters.has(a)),
    );
    for (const source of order) {
      if (this.paused) return;
      // Read now, not from the list taken before the writes of this pass: a source forgotten
      // meanwhile is not written.
      const read = this.dirty.get(source);
      if (read === undefined) continue;
      const waiting = this.waiters.get(source);
      if (!all && waiting === undefined && (this.earliest.get(source) ?? 0) > performance.now()) continue;
      this.waiters.delete(source);
      this.dirty.delete(source);
      const started = performance.now();
      let finished = (): void => undefined;
      const writing = { source, done: new Promise<void>((r) => (finished = r)), forgotten: false };
      this.writing = writing;
      try {
        const { bytes, again, superseded } = await this.sink.write(source, read(), waiting !== undefined);
        if (writing.forgotten || superseded === true) continue;
        const ms = performance.now() - started;
        // Slow writes are spaced out: the store is busy at most a tenth of the time for this source.
        this.earliest.set(source, performance.now() + Math.max(this.delayMs, 10 * ms));
        if (again === true && !this.dirty.has(source)) this.dirty.set(source, read);
        this.status.set(source, {
          source,
          lastWrite: new Date().toISOString(),
          bytes,
          writeMs: Math.round(ms),
        });
        this.options.hooks?.onWrite?.(source, bytes, ms);
      } catch (err) {
        // A source forgotten while it was written is not written again.
        if (writing.forgotten) continue;
        const error = toMeshmuxError(err, 'STATE', { file: this.sink.where(source) });
        const previous = this.status.get(source);
        if (previous?.lastError !== error.message) {
          this.options.log.error(
            { source, err: error.describe() },
            'could not persist the source state; serving goes on, the write is retried',
          );
        }
        this.status.set(source, { ...previous, source, lastError: error.message });
        this.options.hooks?.onWriteError?.(source, error);
        if (!this.dirty.has(source)) this.dirty.set(source, read);
        this.earliest.set(source, performance.now() + this.retryMs);
      } finally {
        this.writing = undefined;
        finished();
        for (const resolve of waiting ?? []) resolve();
      }
    }
  }
}
