import { ContentDigest } from '../core/content-digest.js';
import { compareByName as compare, type ConfigResource } from '../core/resource.js';
import { EMPTY_KIND_VERSION, type KindSnapshot } from '../merge/config-snapshot.js';
import { changesSince } from '../merge/kind-changes.js';
import type { ClientView } from './client-view.js';

/** Separates a served version's content part from the upstream revisions it names. */
export const REVISIONS_SEPARATOR = '~';

/** The objects of one kind a view admits, and the version they are served under. */
export interface ViewContent {
  /** `<content version>[~<revisions>]`. */
  readonly version: string;
  /** Sorted by namespace, then name. Must not be altered. */
  readonly resources: readonly ConfigResource[];
}

/** What is kept per (view, kind) between generations of the kind. */
interface ViewState extends ViewContent {
  readonly generation: number;
  /** The kind's objects this state was derived from, to diff the next generation against. */
  readonly from: readonly ConfigResource[];
  /** The `serial` of the kind snapshot those objects came from. */
  readonly serial: number | undefined;
  /** The digest of `resources`: the content version, maintained per change. */
  readonly digest: ContentDigest;
  readonly content: string;
}

const EMPTY: ViewContent = Object.freeze({ version: EMPTY_KIND_VERSION, resources: Object.freeze([]) });

/** Position of `r`'s key in a sorted list, or where it would go. */
function positionOf(list: readonly ConfigResource[], r: ConfigResource): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compare(list[mid] as ConfigResource, r) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * What each view holds of each kind, maintained from one kind generation to the next by the
 * objects that changed: a one-object change to a 50k-object kind costs pointer comparisons, a
 * policy check and a binary insertion per view, instead of filtering and hashing the kind again.
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
    let resources: readonly ConfigResource[];
    let digest: ContentDigest;
    let content: string;
    if (view.admitsAll) {
      // The kind's own version is already a content digest of exactly these objects.
      resources = kind.resources;
      digest = new ContentDigest();
      content = kind.version;
    } else if (last !== undefined) {
      const { removed, added } = changesSince(last.serial, last.from, kind);
      // Copied only once a change is the view's: a change to objects it does not admit (most
      // changes, for a small view; the small view's, for the large ones) leaves its list and
      // digest as they were, with no copy of a list as long as the view.
      let list: ConfigResource[] | undefined;
      let changed: ContentDigest | undefined;
      for (const r of removed) {
        if (!view.admits(r)) continue;
        const from = list ?? last.resources;
        const at = positionOf(from, r);
        if (from[at] !== r) continue;
        list ??= last.resources.slice();
        changed ??= last.digest.clone();
        list.splice(at, 1);
        changed.remove(r);
      }
      for (const r of added) {
        if (!view.admits(r)) continue;
        list ??= last.resources.slice();
        changed ??= last.digest.clone();
        list.splice(positionOf(list, r), 0, r);
        changed.add(r);
      }
      resources = list ?? last.resources;
      digest = changed ?? last.digest;
      content = changed === undefined ? last.content : changed.version();
    } else {
      const list = kind.resources.filter((r) => view.admits(r));
      digest = new ContentDigest();
      for (const r of list) digest.add(r);
      resources = list;
      content = digest.version();
    }
    // The revisions move with the content only: an unchanged view keeps its version.
    let version = last?.version ?? '';
    if (last?.content !== content) {
      const revisions = kind.sourceRevisions ?? [];
      version = revisions.length === 0 ? content : `${content}${REVISIONS_SEPARATOR}${revisions.join(',')}`;
    }
    const state: ViewState = {
      generation: kind.generation,
      from: kind.resources,
      serial: kind.serial,
      resources,
      digest,
      content,
      version,
    };
    kinds.set(kind.kind, state);
    return state;
  }
}
