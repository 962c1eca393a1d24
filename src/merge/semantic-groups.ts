const NONE: readonly string[] = Object.freeze([]);

/**
 * Which keys claim each semantic group (a host, say). Nearly every group has one member, kept as
 * the key itself rather than a set: at 50k objects a set per group would be an object per object
 * for every marking to walk. The groups each key claims are its caller's to keep (the kind table
 * keeps them with the object that claims them), not a second map of this index's, keyed per object.
 */
export class SemanticGroups {
  private readonly members = new Map<string, string | Set<string>>();

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

  /**
   * Adds the keys in `group` to `into`, but those in `except`: {@link membersOf} without a list
   * for a group of one.
   */
  addMembersTo(group: string, into: Set<string>, except?: ReadonlySet<string>): void {
    const m = this.members.get(group);
    if (m === undefined) return;
    if (typeof m === 'string') {
      if (except?.has(m) !== true) into.add(m);
    } else for (const key of m) if (except?.has(key) !== true) into.add(key);
  }

  /**
   * Makes `key`, which claims exactly `old`, claim exactly `now` (groups without repeats), calling
   * `each` as it goes with every group it leaves (`claims` false) and every group it claims now
   * (`claims` true), and the group's size once `key` left or joined it. A group it claimed before
   * and claims still is not left and joined again, and is reported once.
   */
  move(
    key: string,
    old: readonly string[],
    now: readonly string[],
    each: (group: string, size: number, claims: boolean) => void,
  ): void {
    for (const g of old) this.leave(g, key, now, each);
    for (const g of now) {
      this.add(g, key);
      each(g, this.sizeOf(g), true);
    }
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
