import { ChunkedList } from '../core/chunked-list.js';
import { compareByName as compare, type ConfigResource } from '../core/resource.js';
import type { KindSnapshot } from '../merge/config-snapshot.js';
import { changesBetween } from '../merge/kind-changes.js';
import type { PartitionScheme } from './client-view.js';

/**
 * A kind split into more parts than this is served from each view's own list: a response takes a
 * chunk or more per part, and parts this many are small ones.
 */
export const MAX_PARTS = 32;

/** The parts of a kind, each sorted by namespace, then name: shared, never to be altered. */
export type KindParts = ReadonlyMap<string, ChunkedList<ConfigResource>>;

/** What is kept per kind: its parts as of one generation, and the snapshot they were derived from. */
interface Split {
  readonly scheme: PartitionScheme;
  readonly generation: number;
  readonly from: KindSnapshot;
  /** Undefined where the kind falls in more than {@link MAX_PARTS} parts. */
  readonly parts: KindParts | undefined;
}

/**
 * Past this many objects changed at once (or a 128th of the kind), the parts are split afresh
 * instead of edited: a walk of the kind costs less than that many searches and chunk copies.
 */
const REBUILD_AFTER_EDITS = 64;
const KIND_SHARE = 128;

/**
 * Each kind's objects split by a {@link PartitionScheme} into parts every view takes whole or not
 * at all, maintained from one generation of the kind to the next by the objects that changed, as
 * the views' own lists are (`ViewContents`). A view's response is the blocks of its parts: the
 * bytes of an object lie in one block whatever the number of views serving it, where a list per
 * view copies them once per view.
 */
export class KindPartitions {
  /** Per kind. */
  private readonly splits = new Map<string, Split>();

  /**
   * The parts of `kind` under `scheme`, or undefined when it splits into too many. A scheme of
   * another id than the one kept for the kind (a configuration whose policies filter otherwise)
   * splits it afresh; one of the same id splits it alike, and takes the parts kept.
   */
  of(scheme: PartitionScheme, kind: KindSnapshot): KindParts | undefined {
    const last = this.splits.get(kind.kind);
    const same = last?.scheme.id === scheme.id;
    if (same && last?.generation === kind.generation) return last.parts;
    const parts =
      same && last?.parts !== undefined
        ? (edited(scheme, last.from, last.parts, kind) ?? split(scheme, kind))
        : split(scheme, kind);
    this.splits.set(kind.kind, { scheme, generation: kind.generation, from: kind, parts });
    return parts;
  }

  /** Drops what is kept for a kind (no view serves it any more). */
  forget(kind: string): void {
    this.splits.delete(kind);
  }
}

/** `kind`'s objects by part, walked in order, so each part is in order too. */
function split(scheme: PartitionScheme, kind: KindSnapshot): KindParts | undefined {
  const members = new Map<string, ConfigResource[]>();
  let tooMany = false;
  const take = (r: ConfigResource): void => {
    const part = scheme.partOf(r);
    if (part === undefined || tooMany) return;
    let list = members.get(part);
    if (list === undefined) {
      if (members.size === MAX_PARTS) {
        tooMany = true;
        return;
      }
      members.set(part, (list = []));
    }
    list.push(r);
  };
  if (kind.list !== undefined) kind.list.forEach(take);
  else for (const r of kind.resources) take(r);
  if (tooMany) return undefined;
  const parts = new Map<string, ChunkedList<ConfigResource>>();
  for (const [part, list] of members) parts.set(part, ChunkedList.filtered(list));
  return parts;
}

/**
 * `parts` (of the kind as `from` held it) with the objects that left removed and those that came
 * inserted where their names sort; undefined when so many changed that splitting afresh costs
 * less, or when the kind now falls in too many parts.
 */
function edited(
  scheme: PartitionScheme,
  from: KindSnapshot,
  parts: KindParts,
  kind: KindSnapshot,
): KindParts | undefined {
  const changes = changesBetween(from, kind);
  const kindLength = kind.list?.length ?? kind.resources.length;
  if (changes.removed.length + changes.added.length > Math.max(REBUILD_AFTER_EDITS, kindLength / KIND_SHARE))
    return undefined;
  if (changes.removed.length + changes.added.length === 0) return parts;
  const next = new Map(parts);
  for (const r of changes.removed) {
    const part = scheme.partOf(r);
    const list = part === undefined ? undefined : next.get(part);
    if (list === undefined) continue;
    const at = list.position(r, compare);
    if (list.at(at) !== r) continue;
    const rest = list.removed(at);
    if (rest.length === 0) next.delete(part as string);
    else next.set(part as string, rest);
  }
  for (const r of changes.added) {
    const part = scheme.partOf(r);
    if (part === undefined) continue;
    const list = next.get(part) ?? ChunkedList.empty<ConfigResource>();
    next.set(part, list.inserted(list.position(r, compare), r));
    if (next.size > MAX_PARTS) return undefined;
  }
  return next;
}
