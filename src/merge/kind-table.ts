import { SemanticGroups } from './semantic-groups.js';
import { ChunkedList } from '../core/chunked-list.js';
import { ContentDigest } from '../core/content-digest.js';
import { compareByName, mergedByName, sortByName, type ConfigResource } from '../core/resource.js';
import type { Conflict, ConflictParty, ConflictType, KindChanges, KindSnapshot } from './config-snapshot.js';
import type { KindState } from './source-ledger.js';

/** A source as ranked by precedence. */
export interface SourceRank {
  readonly name: string;
  readonly priority: number;
  /** Position in the configuration; lower wins a priority tie. */
  readonly order: number;
}

interface Holder {
  readonly rank: SourceRank;
  readonly resource: ConfigResource;
  /**
   * The semantic groups the index has this holder's object claim its key under while it is the
   * key's winner (none before): kept here, not in a map of the index's keyed per object.
   */
  groups: Groups;
  /** Whether this holder's object is the one served under its key (its winner's, unless withheld). */
  served: boolean;
}

/** Groups as a holder keeps them: one (nearly every object claims one) as the string itself. */
type Groups = string | readonly string[];

/** `groups` as a list. */
function listOf(groups: Groups): readonly string[] {
  return typeof groups === 'string' ? [groups] : groups;
}

/** What a bulk change did to the served set, for `reorder()`. */
interface BulkChange {
  /** Objects no longer served (removed, or replaced by another of their key). */
  readonly left: Set<ConfigResource>;
  /** Objects served since, in no order. */
  readonly came: ConfigResource[];
  /**
   * Whether the served set was the last snapshot's when the change began: what the change did
   * is then the next snapshot's change set.
   */
  readonly fromSnapshot: boolean;
}

/** The objects a bulk change made leave and come, each in served order (see `reorder`). */
interface BulkDifference {
  readonly removed: readonly ConfigResource[];
  readonly added: readonly ConfigResource[];
}

/** What to serve when objects clash semantically (two ServiceEntries for one host, ...). */
export type SemanticConflictPolicy = 'serve-all' | 'highest-priority';

/**
 * How objects of one kind clash semantically: the type of the clash, and the subjects each object
 * claims (a host, ...); objects claiming one subject clash. One type per kind, so a group is its
 * subject alone, the string an object claims it with.
 */
export interface SemanticRule {
  readonly type: Exclude<ConflictType, 'same-key'>;
  readonly subjects: (resource: ConfigResource) => readonly string[];
}

/** The semantic rule of each kind that has one (by the kind's key). */
export type SemanticRules = (kind: string) => SemanticRule | undefined;

/** What a source change may tell the table beyond its two states. */
export interface ApplyHints {
  /**
   * Keys whose object differs between `before` and `after`, when the caller knows them without a
   * scan; the table then visits only these instead of comparing both states whole.
   */
  readonly changed?: ReadonlySet<string> | undefined;
  /** The source's revision that produced `after`; recorded only if the change alters anything. */
  readonly revision?: string | undefined;
}

const NO_GROUPS: readonly string[] = Object.freeze([]);

/** The next kind snapshot's `serial`: unique in the process, whichever table builds it. */
let nextSerial = 0;

function isHolderList(held: Holder | readonly Holder[] | undefined): held is readonly Holder[] {
  return Array.isArray(held);
}

function compareRank(a: Holder, b: Holder): number {
  return b.rank.priority - a.rank.priority || a.rank.order - b.rank.order;
}

/**
 * The merged state of one kind, maintained incrementally: each source change touches only the keys
 * it changed. The highest-priority holder of a key is served (configuration order breaks ties),
 * and when it drops the key the next holder takes over in the same step. The version is an
 * order-independent digest of the served objects, so it costs O(changed) and is equal on every
 * replica for equal content.
 */
export class KindTable {
  /**
   * Per key, its holder, or its holders (two or more) in precedence order: a key nearly always has
   * one, and a list of one would be two more heap objects per object for every marking to walk.
   */
  private readonly holders = new Map<string, Holder | readonly Holder[]>();
  /**
   * Keys served: their holders marked `served`, each its key's winner (a map of them was an entry
   * more per object). Every map and set of the table is keyed by the sources' own `namespace/name`
   * strings: a key of its own per object (one that sorts as responses list objects, say) would be
   * a string more per object, and a string built per look-up.
   */
  private servedCount = 0;
  /**
   * The served objects by namespace, then name (the order of responses), in chunks: a snapshot
   * takes the list as it stands, and a change copies the chunks it touches, not the kind.
   */
  private ordered = ChunkedList.empty<ConfigResource>();
  /** Per source holding objects of this kind: its position and the revision of its last effective change. */
  private readonly revisions = new Map<string, { readonly order: number; readonly revision: string }>();
  /** Semantic groups with two or more members: the only ones `conflicts()` has to look at. */
  private readonly clashing = new Set<string>();
  private readonly digest = new ContentDigest();
  private readonly semantic = new SemanticGroups();
  private readonly suppressed = new Set<string>();
  /** Keys held by more than one source. */
  private readonly contested = new Set<string>();
  /** The last list `conflicts()` returned; returned again while every conflict stays as it was. */
  private cachedConflicts: readonly Conflict[] | undefined;
  /** Whether a change since `cachedConflicts` may have altered a conflict. */
  private conflictsStale = false;
  /** Whether a key became or stopped being contested, or a group clashing, since `cachedConflicts`. */
  private conflictSetChanged = false;
  /** Same-key conflicts by key, rebuilt only for keys a change touched (`staleKeys`). */
  private readonly sameKeyConflicts = new Map<string, Conflict>();
  /** Semantic clashes by group, rebuilt only for groups a change touched (`staleGroups`). */
  private readonly groupConflicts = new Map<string, Conflict>();
  private readonly staleKeys = new Set<string>();
  private readonly staleGroups = new Set<string>();
  private generation = 0;
  private lastVersion = '';
  private cached: KindSnapshot | undefined;
  /** The `serial` of the last snapshot built. */
  private lastSerial = 0;
  /**
   * Keys served differently since the last snapshot, with what that snapshot served under each:
   * the next snapshot's `changes`. Undefined when there is no snapshot to lead from, or after a
   * bulk change (see `bulkDifference`).
   */
  private pending: Map<string, ConfigResource | undefined> | undefined;
  /** During a bulk change: what it did to the served set (see {@link reorder}). */
  private bulk: BulkChange | undefined;
  /**
   * What a bulk change made of the last snapshot's served set, when nothing else changed it
   * since: the next snapshot's change set, so its readers (the ADS server, the metrics, each view)
   * need not walk both lists of the kind to find it.
   */
  private bulkDifference: BulkDifference | undefined;
  /** The groups {@link reindex} adds to, for the change being applied. */
  private touchedGroups = new Set<string>();

  constructor(
    readonly kind: string,
    private readonly semanticRule: SemanticRule | undefined,
    private readonly policy: SemanticConflictPolicy,
    private readonly nextGeneration: () => number,
  ) {}

  /**
   * Applies one source's change of this kind. With `hints.changed` only those keys are visited,
   * which makes a one-object change O(1) however many objects the source holds.
   */
  apply(rank: SourceRank, before: KindState, after: KindState, hints: ApplyHints = {}): void {
    // Each key at most once: a change drops keys `after` lacks and holds those it has anew, and
    // `hints.changed` is a set. A list, not a set: a first sync touches every key of the source.
    const touched: string[] = [];
    // The winner of each touched key that had one, before this change: the one served, if any,
    // and whose groups the index holds for the key. A first sync, all of whose keys are new, notes none.
    const was = new Map<string, Holder>();
    const noteWinner = (key: string, current: Holder | readonly Holder[] | undefined): void => {
      if (current === undefined || was.has(key)) return;
      was.set(key, isHolderList(current) ? (current[0] as Holder) : current);
    };
    const drop = (key: string): void => {
      noteWinner(key, this.holders.get(key));
      const list = this.holdersOf(key).filter((h) => h.rank.name !== rank.name);
      if (list.length === 0) this.holders.delete(key);
      else this.holders.set(key, list.length === 1 ? (list[0] as Holder) : list);
      this.setContested(key, list.length > 1);
      touched.push(key);
    };
    const hold = (key: string, r: ConfigResource): void => {
      const held: Holder = { rank, resource: r, groups: NO_GROUPS, served: false };
      const current = this.holders.get(key);
      noteWinner(key, current);
      // Held by nobody, or by this source alone (nearly every key): no lists to build.
      if (current === undefined || (!isHolderList(current) && current.rank.name === rank.name)) {
        this.holders.set(key, held);
        touched.push(key);
        return;
      }
      const others = this.holdersOf(key).filter((h) => h.rank.name !== rank.name);
      if (others.length === 0) this.holders.set(key, held);
      else {
        this.holders.set(key, [...others, held].sort(compareRank));
        this.setContested(key, true);
      }
      touched.push(key);
    };
    if (hints.changed !== undefined) {
      for (const key of hints.changed) {
        const b = before.get(key);
        const a = after.get(key);
        if (a === b) continue;
        if (a !== undefined) hold(key, a);
        else if (b !== undefined) drop(key);
      }
    } else {
      // forEach, not for-of: a first sync walks every object, and an iterator's step is an object each.
      before.forEach((_, key) => {
        if (!after.has(key)) drop(key);
      });
      after.forEach((r, key) => {
        if (before.get(key) !== r) hold(key, r);
      });
    }
    if (touched.length === 0) return;
    // A bulk change's difference leads from the last snapshot only while nothing follows it.
    this.bulkDifference = undefined;
    // Only a change that alters what the source holds moves its revision: a re-sent state does not.
    if (after.size === 0) this.revisions.delete(rank.name);
    else {
      const previous = this.revisions.get(rank.name)?.revision ?? '';
      this.revisions.set(rank.name, { order: rank.order, revision: hints.revision ?? previous });
    }
    this.cached = undefined;
    this.conflictsStale = true;
    const groups = new Set<string>();
    this.touchedGroups = groups;
    // Each touched key's winner, looked up once: nothing from here on changes who holds a key.
    const winners = new Array<Holder | undefined>(touched.length);
    for (let i = 0; i < touched.length; i++) {
      const key = touched[i] as string;
      const winner = this.winner(key);
      winners[i] = winner;
      this.reindex(key, winner, was.get(key));
    }
    // Keys of other sources in the groups touched are looked at again too: kept apart from the
    // touched ones (a first sync, which touches every key of the source, touches next to no group).
    const others = new Set<string>();
    if (groups.size > 0) {
      const except = new Set(touched);
      for (const g of groups) this.semantic.addMembersTo(g, others, except);
    }
    if (this.policy === 'highest-priority') this.suppress(touched, others);
    // Many keys at once (a first sync, a restore): insert them unordered and sort once, instead of
    // one insertion into the ordered list each (a chunk copied per key).
    const visited = touched.length + others.size;
    const bulk = visited > 256 && visited * 8 > this.ordered.length;
    if (bulk) {
      // An empty record: nothing was served differently since the last snapshot. No record at all:
      // no snapshot to lead from, or a bulk change came first, and the next snapshot walks the kind.
      this.bulk = { left: new Set(), came: [], fromSnapshot: this.pending?.size === 0 };
      // What each key served before is not recorded key by key (a second source's first sync
      // would record 50k): the objects that left and came are the change's difference.
      this.pending = undefined;
    }
    let done = false;
    try {
      const recheck = (key: string, winner: Holder | undefined): void => {
        this.serve(key, winner, was.get(key), bulk);
        this.staleKey(key);
        // What a clash says of a member (its holder, withheld or served) may have changed.
        const claimed = winner?.groups ?? NO_GROUPS;
        if (typeof claimed === 'string') this.staleGroup(claimed);
        else for (let i = 0; i < claimed.length; i++) this.staleGroup(claimed[i] as string);
      };
      for (let i = 0; i < touched.length; i++) recheck(touched[i] as string, winners[i]);
      others.forEach((key) => recheck(key, this.winner(key)));
      for (const g of groups) this.staleGroup(g);
      done = true;
    } finally {
      // Whatever the change got to, the order follows the served set: the next bulk change
      // starts from it. Only a change that ran to its end says what it did.
      if (bulk) {
        this.pending = undefined;
        this.reorder(done);
      }
    }
  }

  /**
   * Brings the served order in line with a bulk change: the objects that came are sorted on their
   * own and merged into those still served, which are in order already, so a first sync from a
   * second source sorts its own objects, not every object served. With `complete` (the change ran
   * to its end) and the change following the last snapshot, what left and came is kept as the
   * next snapshot's change set.
   */
  private reorder(complete: boolean): void {
    const bulk = this.bulk;
    this.bulk = undefined;
    if (bulk === undefined) return;
    const kept: ConfigResource[] = [];
    const removed: ConfigResource[] = [];
    this.ordered.forEach((r) => {
      if (!bulk.left.has(r)) kept.push(r);
      else removed.push(r);
    });
    // Those that came, sorted on their own (the change set's `added`), then merged into those
    // kept, in order already: no key is in both.
    const added = sortByName(bulk.came);
    this.ordered = ChunkedList.filtered(kept.length === 0 ? added : mergedByName(kept, added));
    if (complete && bulk.fromSnapshot) this.bulkDifference = { removed, added };
  }

  /** The served objects, or undefined when there are none. Reused until the next change. */
  snapshot(): KindSnapshot | undefined {
    if (this.servedCount === 0) {
      // Content that comes back after a gap is a new generation, so no response is reused across it.
      this.lastVersion = '';
      this.pending = undefined;
      this.bulkDifference = undefined;
      return undefined;
    }
    if (this.cached !== undefined) return this.cached;
    const from = this.lastVersion === '' ? undefined : this.lastSerial;
    const version = this.digest.version();
    if (version !== this.lastVersion) {
      this.lastVersion = version;
      this.generation = this.nextGeneration();
    }
    const sourceRevisions = [...this.revisions.values()]
      .sort((a, b) => a.order - b.order)
      .map((r) => r.revision);
    const changes = from === undefined ? undefined : this.takeChanges(from);
    this.pending = new Map();
    this.bulkDifference = undefined;
    this.lastSerial = ++nextSerial;
    this.cached = new TableSnapshot(
      this.kind,
      version,
      this.generation,
      this.lastSerial,
      this.ordered,
      Object.freeze(sourceRevisions),
      changes,
    );
    return this.cached;
  }

  /**
   * The pending keys, or the bulk change that followed the last snapshot, as the difference from
   * the snapshot numbered `from`, in served order; undefined when neither tells it.
   */
  private takeChanges(from: number): KindChanges | undefined {
    const pending = this.pending;
    if (pending === undefined) {
      const bulk = this.bulkDifference;
      if (bulk === undefined) return undefined;
      return Object.freeze({ from, removed: Object.freeze(bulk.removed), added: Object.freeze(bulk.added) });
    }
    const removed: ConfigResource[] = [];
    const added: ConfigResource[] = [];
    const moved: {
      readonly before: ConfigResource | undefined;
      readonly after: ConfigResource | undefined;
    }[] = [];
    for (const [key, before] of pending) {
      const holder = this.winner(key);
      const after = holder?.served === true ? holder.resource : undefined;
      if (before !== after) moved.push({ before, after });
    }
    // Both name the key's object, so either tells its place.
    const of = (m: (typeof moved)[number]): ConfigResource => (m.before ?? m.after) as ConfigResource;
    moved.sort((a, b) => compareByName(of(a), of(b)));
    for (const { before, after } of moved) {
      if (before !== undefined) removed.push(before);
      if (after !== undefined) added.push(after);
    }
    return Object.freeze({ from, removed: Object.freeze(removed), added: Object.freeze(added) });
  }

  /**
   * Keys held by several sources, and semantic clashes, as they stand now. The same list (the
   * same instance) as last time while no conflict changed: a change that leaves the same keys
   * contested and every conflict it touched as it was costs a check of those conflicts; any other,
   * a pass over the conflicts, copying the list only from the first that differs.
   */
  conflicts(): readonly Conflict[] {
    const previous = this.cachedConflicts;
    if (previous !== undefined && !this.conflictsStale) return previous;
    if (previous !== undefined && !this.conflictSetChanged && this.staleUnchanged()) return previous;
    // Built only from the first conflict that differs from the last list.
    let out: Conflict[] | undefined = previous === undefined ? [] : undefined;
    let n = 0;
    const take = (c: Conflict): void => {
      if (out === undefined) {
        if (previous?.[n] === c) {
          n++;
          return;
        }
        out = (previous ?? []).slice(0, n);
      }
      out.push(c);
      n++;
    };
    for (const key of this.contested) {
      const conflict = this.sameKeyConflict(key);
      if (conflict !== undefined) take(conflict);
    }
    for (const group of this.clashing) {
      const conflict = this.groupConflict(group);
      if (conflict !== undefined) take(conflict);
    }
    if (out === undefined && n !== previous?.length) out = (previous ?? []).slice(0, n);
    this.conflictsChecked();
    this.conflictSetChanged = false;
    // Kept until a conflict changes: every snapshot of the merge asks for it.
    this.cachedConflicts = out ?? previous ?? [];
    return this.cachedConflicts;
  }

  /**
   * With the same keys contested and groups clashing as in the last list: whether each conflict
   * a change touched says what it said (then that list stands, found without a pass over every
   * conflict). Marks them checked when so.
   */
  private staleUnchanged(): boolean {
    for (const key of this.staleKeys) {
      const known = this.sameKeyConflicts.get(key);
      if (this.sameKeyConflict(key) !== known) return false;
    }
    for (const group of this.staleGroups) {
      const known = this.groupConflicts.get(group);
      if (this.groupConflict(group) !== known) return false;
    }
    this.conflictsChecked();
    return true;
  }

  private setContested(key: string, contested: boolean): void {
    if (contested === this.contested.has(key)) return;
    if (contested) this.contested.add(key);
    else this.contested.delete(key);
    this.conflictSetChanged = true;
  }

  private setClashing(group: string, clashing: boolean): void {
    if (clashing === this.clashing.has(group)) return;
    if (clashing) this.clashing.add(group);
    else this.clashing.delete(group);
    this.conflictSetChanged = true;
  }

  /** Every conflict a change touched has been checked against the list about to be returned. */
  private conflictsChecked(): void {
    this.staleKeys.clear();
    this.staleGroups.clear();
    this.conflictsStale = false;
  }

  /** A change touched `key`: its conflict is checked again, or forgotten if it has none now. */
  private staleKey(key: string): void {
    if (this.contested.has(key)) this.staleKeys.add(key);
    else this.sameKeyConflicts.delete(key);
  }

  private staleGroup(group: string): void {
    if (this.clashing.has(group)) this.staleGroups.add(group);
    else this.groupConflicts.delete(group);
  }

  /** The conflict of a key held by several sources, rebuilt if a change touched it. */
  private sameKeyConflict(key: string): Conflict | undefined {
    const known = this.sameKeyConflicts.get(key);
    if (known !== undefined && !this.staleKeys.has(key)) return known;
    const list = this.holdersOf(key);
    if (list.length < 2) return undefined;
    const [first, second] = list as [Holder, Holder];
    const r = first.resource;
    const conflict: Conflict = {
      type: 'same-key',
      subject: `${this.kind}|${r.namespace}/${r.name}`,
      resolution: first.rank.priority === second.rank.priority ? 'config-order' : 'priority',
      parties: list.map((h, i) => this.party(h, i === 0 && h.served)),
    };
    // Unchanged (a new version of one of the objects): the instance the last list holds.
    if (known !== undefined && sameConflict(known, conflict)) return known;
    this.sameKeyConflicts.set(key, conflict);
    return conflict;
  }

  /** The conflict of a semantic group with two or more members, rebuilt if a change touched it. */
  private groupConflict(group: string): Conflict | undefined {
    if (this.semantic.sizeOf(group) < 2) return undefined;
    const known = this.groupConflicts.get(group);
    if (known !== undefined && !this.staleGroups.has(group)) return known;
    const members = this.semantic.membersOf(group);
    const parties: ConflictParty[] = [];
    let anySuppressed = false;
    for (const key of members) {
      const h = this.winner(key);
      if (h !== undefined) parties.push(this.party(h, h.served));
      if (this.suppressed.has(key)) anySuppressed = true;
    }
    const conflict: Conflict = {
      // A group exists only with a rule.
      type: (this.semanticRule as SemanticRule).type,
      subject: group,
      resolution: anySuppressed ? 'priority' : 'served-all',
      parties,
    };
    if (known !== undefined && sameConflict(known, conflict)) return known;
    this.groupConflicts.set(group, conflict);
    return conflict;
  }

  private party(h: Holder, served: boolean): ConflictParty {
    const r = h.resource;
    return {
      source: h.rank.name,
      priority: h.rank.priority,
      kind: r.kind,
      namespace: r.namespace,
      name: r.name,
      served,
    };
  }

  private winner(key: string): Holder | undefined {
    const held = this.holders.get(key);
    return isHolderList(held) ? held[0] : held;
  }

  /** The holders of `key`, in precedence order. */
  private holdersOf(key: string): readonly Holder[] {
    const held = this.holders.get(key);
    if (held === undefined) return [];
    return isHolderList(held) ? held : [held];
  }

  /**
   * Moves a key's semantic-index entries to its current winner, and adds to `touched` the groups
   * whose members other than `key` must be looked at again: one it left that still has members,
   * one of two or more it claims. A group it alone claims says nothing of anyone else, and it
   * held no conflict before (a group clashes only with two members, and one that stops clashing
   * is touched when it does), so at a first sync, where nearly every group has one member, next
   * to no group is touched.
   */
  private reindex(key: string, winner: Holder | undefined, was: Holder | undefined): void {
    if (this.semanticRule === undefined) return;
    const old = was === undefined ? NO_GROUPS : listOf(was.groups);
    // The same holder still winning claims what it claimed: its object is not read again.
    const now =
      winner === undefined ? NO_GROUPS : winner === was ? old : this.semanticRule.subjects(winner.resource);
    this.semantic.move(key, old, now, this.moved);
    if (winner !== undefined && winner !== was) winner.groups = now.length === 1 ? (now[0] as string) : now;
  }

  /** What {@link reindex} does with each group a key left or claims, bound once. */
  private readonly moved = (group: string, size: number, claims: boolean): void => {
    this.setClashing(group, size > 1);
    if (claims ? size > 1 : size > 0) this.touchedGroups.add(group);
  };

  /**
   * In each clashing group, objects from sources of lower priority than the group's best are
   * withheld: the keys a change touched and `others`, the other members of the groups it touched.
   * The touched keys are decided too: a key that left every group (its object no longer claims the
   * host, or was deleted) must not stay withheld.
   */
  private suppress(touched: readonly string[], others: ReadonlySet<string>): void {
    for (let i = 0; i < touched.length; i++) this.decideWithheld(touched[i] as string);
    others.forEach(this.decideWithheld);
  }

  /** Withholds `key` when a member of one of its groups comes from a source of higher priority. */
  private readonly decideWithheld = (key: string): void => {
    const me = this.winner(key);
    let beaten = false;
    for (const g of me === undefined ? NO_GROUPS : listOf(me.groups)) {
      for (const other of this.semantic.membersOf(g)) {
        const rival = other === key ? undefined : this.winner(other);
        if (rival !== undefined && me !== undefined && rival.rank.priority > me.rank.priority) beaten = true;
      }
    }
    if (beaten) this.suppressed.add(key);
    else this.suppressed.delete(key);
  };

  /**
   * Brings the served set, its order and its digest in line with `now`, the winner of `key`; with
   * `unordered`, the served order is left to `reorder()`. `was`: the key's winner before the
   * change being applied, when the change touched the key and it had one (else it is the winner).
   */
  private serve(key: string, now: Holder | undefined, was: Holder | undefined, unordered: boolean): void {
    const winner = now === undefined || this.suppressed.has(key) ? undefined : now;
    const before = was ?? now;
    const current = before?.served === true ? before : undefined;
    if (current !== undefined && current.resource === winner?.resource) {
      // The same object, held anew (by another holder of the key): the mark moves with it.
      if (current !== winner) {
        current.served = false;
        winner.served = true;
      }
      return;
    }
    if (this.pending !== undefined && !this.pending.has(key)) this.pending.set(key, current?.resource);
    if (current !== undefined) {
      current.served = false;
      this.digest.remove(current.resource);
    }
    if (winner !== undefined) {
      winner.served = true;
      this.digest.add(winner.resource);
    }
    this.servedCount += (winner === undefined ? 0 : 1) - (current === undefined ? 0 : 1);
    if (unordered) {
      const bulk = this.bulk as BulkChange;
      if (current !== undefined) bulk.left.add(current.resource);
      if (winner !== undefined) bulk.came.push(winner.resource);
      return;
    }
    if (current !== undefined && winner === undefined)
      this.ordered = this.ordered.removed(this.indexOf(current.resource));
    if (winner !== undefined) {
      const at = this.indexOf(winner.resource);
      this.ordered =
        current === undefined
          ? this.ordered.inserted(at, winner.resource)
          : this.ordered.replaced(at, winner.resource);
    }
  }

  /** Binary search: the position of `r`'s name in the served order, or where it would go. */
  private indexOf(r: ConfigResource): number {
    return this.ordered.position(r, compareByName);
  }
}

/**
 * A table's snapshot of its kind: the served list in chunks, shared with the table's later
 * lists where a change left them alone, and as an array only for those who ask for one (built
 * once): views, metrics and change sets read the chunks, so a change to a kind of 50k objects
 * copies no list of its size.
 */
class TableSnapshot implements KindSnapshot {
  private array: readonly ConfigResource[] | undefined;
  readonly changes?: KindChanges;

  constructor(
    readonly kind: string,
    readonly version: string,
    readonly generation: number,
    readonly serial: number,
    readonly list: ChunkedList<ConfigResource>,
    readonly sourceRevisions: readonly string[],
    changes: KindChanges | undefined,
  ) {
    if (changes !== undefined) this.changes = changes;
  }

  get resources(): readonly ConfigResource[] {
    return (this.array ??= Object.freeze(this.list.toArray()));
  }
}

/** Whether two conflicts say the same: type, subject, resolution and every party. */
function sameConflict(a: Conflict, b: Conflict): boolean {
  if (a.type !== b.type || a.subject !== b.subject || a.resolution !== b.resolution) return false;
  if (a.parties.length !== b.parties.length) return false;
  for (let i = 0; i < a.parties.length; i++) {
    const x = a.parties[i] as ConflictParty;
    const y = b.parties[i] as ConflictParty;
    if (
      x.source !== y.source ||
      x.priority !== y.priority ||
      x.kind !== y.kind ||
      x.namespace !== y.namespace ||
      x.name !== y.name ||
      x.served !== y.served
    )
      return false;
  }
  return true;
}
