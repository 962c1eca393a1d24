import { ChunkedList } from '../core/chunked-list.js';
import { ContentDigest } from '../core/content-digest.js';
import { compareByName as compare, type ConfigResource } from '../core/resource.js';
import { EMPTY_KIND_VERSION, type KindSnapshot } from '../merge/config-snapshot.js';
import { changesBetween, type KindDifference } from '../merge/kind-changes.js';
import type { ClientView } from './client-view.js';

/** Separates a served version's content part from the upstream revisions it names. */
export const REVISIONS_SEPARATOR = '~';

/** The objects of one kind a view admits, and the version they are served under. */
export interface ViewContent {
  /** `<content version>[~<revisions>]`. */
  readonly version: string;
  /**
   * Sorted by namespace, then name. A view's list shares all but the chunks a change touched
   * with the list before it.
   */
  readonly list: ChunkedList<ConfigResource>;
  /** The same objects in an array, built when first asked for. Must not be altered. */
  readonly resources: readonly ConfigResource[];
}

/** What is kept per (view, kind) between generations of the kind. */
class ViewState implements ViewContent {
  private array: readonly ConfigResource[] | undefined;

  constructor(
    readonly generation: number,
    /** The kind's snapshot this state was derived from, to diff the next generation against. */
    readonly from: KindSnapshot,
    readonly list: ChunkedList<ConfigResource>,
    /** The digest of `list`: the content version, maintained per change. */
    readonly digest: ContentDigest,
    readonly content: string,
    readonly version: string,
    /** The objects in an array already, if built. */
    array?: readonly ConfigResource[],
    /** For a view that admits everything: the kind, whose own array is the view's. */
    private readonly whole?: KindSnapshot,
  ) {
    this.array = array;
  }

  get resources(): readonly ConfigResource[] {
    return (this.array ??= this.whole?.resources ?? Object.freeze(this.list.toArray()));
  }

  /** The array of {@link resources} if it was built, for a state with the same list to share. */
  get builtArray(): readonly ConfigResource[] | undefined {
    return this.array;
  }
}

const EMPTY: ViewContent = Object.freeze({
  version: EMPTY_KIND_VERSION,
  list: ChunkedList.empty<ConfigResource>(),
  resources: Object.freeze([]),
});

/**
 * What each view holds of each kind, maintained from one kind generation to the next by the
 * objects that changed: a one-object change to a 50k-object kind costs pointer comparisons, a
 * policy check and a binary insertion per view, instead of filtering and hashing the kind again.
 * A change of many of a view's objects (a source's new state, a large commit) builds the view's
 * content again instead, which then costs less than editing it.
 *
 * The content version is an order-independent XOR of per-object digests plus the count, equal on
 * every replica for equal content. The served version appends the revisions of the kind's
 * sources as of the last change that altered this view's content (see `ResponseCache`).
 */
export class ViewContents {
  /** Per view id, per kind. */
  private readonly states = new Map<string, Map<string, ViewState>>();

  /** Views with state kept. */
  get views(): number {
    return this.states.size;
  }

  /** (view, kind) pairs with state kept. */
  get entries(): number {
    let n = 0;
    for (const kinds of this.states.values()) n += kinds.size;
    return n;
  }

  /** Drops what is kept for a view; returns the kinds it held. */
  forget(viewId: string): string[] {
    const kinds = this.states.get(viewId);
    this.states.delete(viewId);
    return kinds === undefined ? [] : [...kinds.keys()];
  }

  /** Drops what is kept for one kind of a view; returns whether there was anything. */
  forgetKind(viewId: string, kind: string): boolean {
    const kinds = this.states.get(viewId);
    if (kinds?.delete(kind) !== true) return false;
    if (kinds.size === 0) this.states.delete(viewId);
    return true;
  }

  /** The view's content of a kind (absent kind: empty). */
  of(view: ClientView, kind: KindSnapshot | undefined): ViewContent {
    if (kind === undefined) return EMPTY;
    let kinds = this.states.get(view.id);
    if (kinds === undefined) this.states.set(view.id, (kinds = new Map<string, ViewState>()));
    const last = kinds.get(kind.kind);
    if (last?.generation === kind.generation) return last;
    let list: ChunkedList<ConfigResource>;
    let array: readonly ConfigResource[] | undefined;
    let digest: ContentDigest;
    let content: string;
    let whole: KindSnapshot | undefined;
    let edits: KindDifference | undefined;
    if (view.admitsAll) {
      // The kind's own version is already a content digest of exactly these objects.
      whole = kind;
      list = kind.list ?? ChunkedList.wrapping(kind.resources);
      digest = new ContentDigest();
      content = kind.version;
    } else if (last !== undefined && (edits = fewEdits(view, last, kind)) !== undefined) {
      // A change to objects the view does not admit (most changes, for a small view; the small
      // view's, for the large ones) leaves its list and digest as they were; one it admits copies
      // the chunk it falls in, not the list.
      list = last.list;
      let changed: ContentDigest | undefined;
      for (const r of edits.removed) {
        if (!view.admits(r)) continue;
        const at = list.position(r, compare);
        if (list.at(at) !== r) continue;
        list = list.removed(at);
        changed ??= last.digest.clone();
        changed.remove(r);
      }
      for (const r of edits.added) {
        if (!view.admits(r)) continue;
        list = list.inserted(list.position(r, compare), r);
        changed ??= last.digest.clone();
        changed.add(r);
      }
      if (changed === undefined) array = last.builtArray;
      digest = changed ?? last.digest;
      content = changed === undefined ? last.content : changed.version();
    } else {
      list = ChunkedList.filtered(kind.list ?? kind.resources, (r) => view.admits(r));
      digest = new ContentDigest();
      list.forEach((r) => digest.add(r));
      content = digest.version();
    }
    // The revisions move with the content only: an unchanged view keeps its version.
    let version = last?.version ?? '';
    if (last?.content !== content) {
      const revisions = kind.sourceRevisions ?? [];
      version = revisions.length === 0 ? content : `${content}${REVISIONS_SEPARATOR}${revisions.join(',')}`;
    }
    const state = new ViewState(kind.generation, kind, list, digest, content, version, array, whole);
    kinds.set(kind.kind, state);
    return state;
  }
}

/**
 * A view's content is edited object by object while a change brings it few edits (each searches
 * the list and copies the chunk it falls in: some 5–8 µs at 50k objects), and built again from the
 * kind past that (a filtering walk of the kind, some 0.05 µs an object, and a digest of what
 * passes, some 0.15 µs an object): past a 128th of the kind plus a 32nd of the view, and past
 * {@link REBUILD_AFTER_EDITS}.
 */
const KIND_SHARE = 128;
const VIEW_SHARE = 32;
const REBUILD_AFTER_EDITS = 64;

/**
 * The objects that left (`removed`) or came (`added`) between the kind `last` was derived from and
 * `kind`, when the view admits few enough of them to edit its content by them; undefined when
 * building the content afresh costs less. Stops counting once past the bound.
 */
function fewEdits(view: ClientView, last: ViewState, kind: KindSnapshot): KindDifference | undefined {
  const changes = changesBetween(last.from, kind);
  const kindLength = kind.list?.length ?? kind.resources.length;
  const most = Math.max(REBUILD_AFTER_EDITS, kindLength / KIND_SHARE + last.list.length / VIEW_SHARE);
  if (changes.removed.length + changes.added.length <= most) return changes;
  let edits = 0;
  for (const r of changes.removed) if (view.admits(r) && ++edits > most) return undefined;
  for (const r of changes.added) if (view.admits(r) && ++edits > most) return undefined;
  return changes;
}
