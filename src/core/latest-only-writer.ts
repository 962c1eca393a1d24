/**
 * Writes values one at a time, and of the values handed in while a write runs only the latest:
 * a record rewritten whole, where each write makes the ones before it moot. `writeNow` must not
 * throw (it reports its own failures).
 */
export class LatestOnlyWriter<T> {
  private pending: { readonly value: T } | undefined;
  private writing: Promise<void> | undefined;

  constructor(private readonly writeNow: (value: T) => Promise<void>) {}

  write(value: T): void {
    this.pending = { value };
    this.writing ??= this.drain();
  }

  /** Resolves once every value handed in has been written (or failed). */
  async flushed(): Promise<void> {
    while (this.writing !== undefined) await this.writing;
  }

  private async drain(): Promise<void> {
    try {
      while (this.pending !== undefined) {
        const { value } = this.pending;
        this.pending = undefined;
        await this.writeNow(value);
      }
    } finally {
      this.writing = undefined;
    }
  }
}
