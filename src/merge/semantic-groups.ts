const NONE: readonly string[] = Object.freeze([]);

/**
 * Which served keys claim each semantic group (a host, say), and which groups each key claims.
 * Nearly every group has one member and nearly every key one group, so those are kept as the
 * string itself rather than a set or an array: at 50k objects the index would otherwise cost a set
 * and an array per object, which every full collection of the heap walks.
 */
export class SemanticGroups {
  private readonly members = new Map<string, string | Set<string>>();
  private readonly groups = new Map<string, string | readonly string[]>();

  /** The keys in `group` (none when it is unknown). Must not be altered. */
  membersOf(group: string): Iterable<string> {
    const m = this.members.get(group);
    if (m === undefined) return NONE;
    return typeof m === 'string' ? [m] : m;
  }

  /** How many keys claim `group`. */
  sizeOf(group: string): number {
    const m = this.members.get(group);
    return m === undefined ? 0 : typeof m === 'string' ? 1 : m.size;
  }

  /** Adds the keys in `group` to `into`: {@link membersOf} without a list for a group of one. */
  addMembersTo(group: string, into: Set<string>): void {
    const m = this.members.get(group);
    if (m === undefined) return;
    if (typeof m === 'string') into.add(m);
    else for (const key of m) into.add(key);
  }

  /** The groups `key` claims. Must not be altered. */
  groupsOf(key: string): readonly string[] {
    const g = this.groups.get(key);
    return g === undefined ? NONE : typeof g === 'string' ? [g] : g;
  }

  /** Calls `each` with every group `key` claims: {@link groupsOf} without a list for a key of one. */
  forEachGroupOf(key: string, each: (group: string) => void): void {
    const g = this.groups.get(key);
    if (g === undefined) return;
    if (typeof g === 'string') each(g);
    else for (const group of g) each(group);
  }

  /**
   * Makes `key` claim exactly `now` (groups without repeats), calling `each` as it goes with
   * every group it leaves (`claims` false) and every group it claims now (`claims` true), and
   * the group's size once `key` left or joined it. A group it claimed before and claims still is
   * not left and joined again, and is reported once.
   */
  move(
    key: string,
    now: readonly string[],
    each: (group: string, size: number, claims: boolean) => void,
  ): void {
    const old = this.groups.get(key);
    if (typeof old === 'string') this.leave(old, key, now, each);
    else if (old !== undefined) for (const g of old) this.leave(g, key, now, each);
    for (const g of now) {
      this.add(g, key);
      each(g, this.sizeOf(g), true);
    }
    if (now.length === 0) this.groups.delete(key);
    else this.groups.set(key, now.length === 1 ? (now[0] as string) : now);
  }

  private leave(
    group: string,
    key: string,
    now: readonly string[],
    each: (group: string, size: number, claims: boolean) => void,
  ): void {
    if (now.includes(group)) return;
    this.remove(group, key);
    each(group, this.sizeOf(group), false);
  }

  private add(group: string, key: string): void {
    const m = this.members.get(group);
    if (m === undefined) this.members.set(group, key);
    else if (typeof m === 'string') {
      if (m !== key) this.members.set(group, new Set([m, key]));
    } else m.add(key);
  }

  private remove(group: string, key: string): void {
    const m = this.members.get(group);
    if (m === undefined) return;
    if (typeof m === 'string') {
      if (m === key) this.members.delete(group);
      return;
    }
    m.delete(key);
    if (m.size === 1) this.members.set(group, m.values().next().value as string);
    else if (m.size === 0) this.members.delete(group);
  }
}
