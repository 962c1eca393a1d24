/**
 * The bytes of request bodies a listener holds at once, over every request: a body is read only
 * while what all of them hold stays within `maxBytes`, so many clients each sending most of an
 * allowed body cost at most `maxBytes`, not their number times the size allowed.
 */
export class BodyBudget {
  private held = 0;

  constructor(private readonly maxBytes: number) {}

  /** Takes `bytes` if they fit; the caller gives back whatever it took with {@link release}. */
  take(bytes: number): boolean {
    if (this.held + bytes > this.maxBytes) return false;
    this.held += bytes;
    return true;
  }

  /** Gives back `bytes` taken before. */
  release(bytes: number): void {
    this.held -= bytes;
  }

  /** Bytes held now. */
  get inUse(): number {
    return this.held;
  }
}
