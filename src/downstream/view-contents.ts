import { createHash } from 'node:crypto';
import { compareByName as compare, type ConfigResource } from '../core/resource.js';
import { EMPTY_KIND_VERSION, type KindSnapshot } from '../merge/config-snapshot.js';
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
  /** XOR of the digests of `resources`: the content version, maintained per change. */
  readonly digest: Uint32Array;
  readonly content: string;
}

const EMPTY: ViewContent = Object.freeze({ version: EMPTY_KIND_VERSION, resources: Object.freeze([]) });

/** Per object instance, a 128-bit digest of what a client receives of it (computed once). */
const digests = new WeakMap<ConfigResource, Uint32Array>();

function digestOf(r: ConfigResource): Uint32Array {
  let d = digests.get(r);
  if (d === undefined) {
    const bytes = createHash('md5')
      .update(`${r.namespace}/${r.name}@${r.version}@${r.createTime.seconds}.${r.createTime.nanos}`)
      .digest();
    d = new Uint32Array(bytes.buffer, bytes.byteOffset, 4).slice();
    digests.set(r, d);
  }
  return d;
}

function toggle(into: Uint32Array, r: ConfigResource): void {
  const d = digestOf(r);
  for (let i = 0; i < 4; i++) into[i] = (into[i] ?? 0) ^ (d[i] ?? 0);
}

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
 * The objects in only one of two lists sorted by namespace and name. Identical instances are
 * skipped with a pointer comparison, so two generations of a kind that differ by a few objects
 * cost O(n) pointer comparisons and O(changes) key comparisons.
 */
function diffSorted(
  before: readonly ConfigResource[],
  after: readonly ConfigResource[],
): { vanished: ConfigResource[]; added: ConfigResource[] } {
  const vanished: ConfigResource[] = [];
  const added: ConfigResource[] = [];
  let i = 0;
  let j = 0;
  while (i < before.length && j < after.length) {
    const a = before[i] as ConfigResource;
    const b = after[j] as ConfigResource;
    if (a === b) {
      i++;
      j++;
      continue;
    }
    const c = compare(a, b);
    if (c <= 0) {
      vanished.push(a);
      i++;
    }
    if (c >= 0) {
      added.push(b);
      j++;
    }
  }
  for (; i < before.length; i++) vanished.push(before[i] as ConfigResource);
  for (; j < after.length; j++) added.push(after[j] as ConfigResource);
  return { vanished, added };
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
  private readonly states = new Map<string, ViewState>();

  /** The view's content of a kind (absent kind: empty). */
  of(view: ClientView, kind: KindSnapshot | undefined): ViewContent {
    if (kind === undefined) return EMPTY;
    const key = `${view.id}|${kind.kind}`;
    const last = this.states.get(key);
    if (last?.generation === kind.generation) return last;
    let resources: readonly ConfigResource[];
    let digest: Uint32Array;
    let content: string;
    if (view.admitsAll) {
      // The kind's own version is already a content digest of exactly these objects.
      resources = kind.resources;
      digest = new Uint32Array(4);
      content = kind.version;
    } else if (last !== undefined) {
      const { vanished, added } = diffSorted(last.from, kind.resources);
      const list = last.resources.slice();
      digest = last.digest.slice();
      for (const r of vanished) {
        if (!view.admits(r)) continue;
        const at = positionOf(list, r);
        if (list[at] === r) {
          list.splice(at, 1);
          toggle(digest, r);
        }
      }
      for (const r of added) {
        if (!view.admits(r)) continue;
        list.splice(positionOf(list, r), 0, r);
        toggle(digest, r);
      }
      resources = list;
      content = versionOf(digest, list.length);
    } else {
      const list = kind.resources.filter((r) => view.admits(r));
      digest = new Uint32Array(4);
      for (const r of list) toggle(digest, r);
      resources = list;
      content = versionOf(digest, list.length);
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
      resources,
      digest,
      content,
      version,
    };
    this.states.set(key, state);
    return state;
  }
}

function versionOf(digest: Uint32Array, count: number): string {
  return `${Array.from(digest, (n) => n.toString(16).padStart(8, '0')).join('')}-${count}`;
}
