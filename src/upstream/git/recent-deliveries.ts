/**
 * Webhook delivery ids seen recently, so that a forge's redelivery (or a replayed request) within
 * the window costs no second fetch. Bounded: the oldest ids go first.
 */
export class RecentDeliveries {
  /** Id → when it was first seen (ms), in insertion order. */
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly windowMs = 10 * 60_000,
    private readonly max = 1_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records `id`; true when it was already seen within the window. */
  repeated(id: string): boolean {
    const now = this.now();
    for (const [old, at] of this.seen) {
      if (now - at <= this.windowMs && this.seen.size < this.max) break;
      this.seen.delete(old);
    }
    const at = this.seen.get(id);
    if (at !== undefined && now - at <= this.windowMs) return true;
    this.seen.set(id, now);
    return false;
  }
}
