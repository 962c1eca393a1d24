import type { HoldReason } from './config-snapshot.js';
import type { SourcePolicy } from './source-rules.js';

/** An update held by the safety guards, waiting for confirmation or time. */
export interface HeldUpdate {
  readonly reason: HoldReason;
  readonly since: Date;
  /** Objects it would delete, and how many the source holds. */
  readonly deletions: number;
  readonly total: number;
  /**
   * The content digest of the held state (see `foldDigest`): equal on every replica holding the
   * same update, so a confirmation can name exactly what it applies.
   */
  readonly digest: string;
  /**
   * Reason `emptied-kind`: the kinds held alone, those it would take every object of (see
   * `UpdateEffect.listedEmpty`) and those it would cut (see `kindsCut`).
   */
  readonly emptiedKinds?: readonly string[];
}

/** What an admitted update would do to a source's committed state. */
export interface UpdateEffect {
  readonly deletions: number;
  /** Objects the source would hold afterwards. */
  readonly after: number;
  /** Some kind the source holds would become empty. */
  readonly emptiesKind: boolean;
  /**
   * Kinds, still the source's to send, of which a listing (`SourceSnapshotEvent.listed`) would
   * take every object where the source held more than one: a kind gone whole at once, as from an
   * upstream whose registry of it is not ready, not one object deleted.
   */
  readonly emptiedKinds: readonly string[];
  /**
   * Kinds, still the source's to send, that a listing would leave with no object, one object
   * before or more: those of `emptiedKinds`, and kinds a listing that takes one whole empties
   * beside it, held with it (see `SourceLedger`). Absent: `emptiedKinds`.
   */
  readonly listedEmpty?: readonly string[];
  /**
   * Kinds, still the source's to send, of which a listing deletes objects: how many, of how many
   * the source held. The guards judge each alone (see {@link kindsCut}). Absent: none.
   */
  readonly listedLosses?: readonly KindLoss[];
}

/** Objects of one kind a listing deletes, of those the source held of it. */
export interface KindLoss {
  readonly kind: string;
  readonly deletions: number;
  readonly before: number;
}

/** The guards a source's rules name, as they bear on one update. */
export type GuardRules = Pick<SourcePolicy, 'keepOnEmpty' | 'minDeletes' | 'maxDeleteRatio' | 'settleMs'>;

/** A deletion window as a record keeps it: when it started (ms since the epoch) and its peak. */
export interface WindowRecord {
  readonly startMs: number;
  readonly peak: number;
}

/**
 * The most objects a source held within a window of time, which the guards judge deletions from:
 * a source worn down a few objects per update is judged as if it had lost them in one. The window
 * starts at the first deleting update after the last one ended. While an update of the whole
 * source is held, the window stays open: each update judged meanwhile starts its time again and
 * keeps its peak, so a held wear-down is judged against what the source held before it, however
 * long the hold lasts, and for a window's time after an update ends the hold.
 */
export class DeletionWindow {
  private start = Number.NEGATIVE_INFINITY;
  private peak = 0;

  /**
   * The update's effect on a source holding `total` objects, as the guards judge it at `nowMs`:
   * when the update takes the source further below the window's peak than its own deletions, those
   * are the deletions, judged against the peak. An update that deletes nothing is judged alone.
   * `holding`: an update of the whole source is held, so the window does not end.
   */
  judged(
    effect: UpdateEffect,
    total: number,
    nowMs: number,
    windowMs: number,
    holding = false,
  ): { effect: UpdateEffect; total: number } {
    if (holding && windowMs > 0) this.start = nowMs;
    else if (effect.deletions > 0 && (windowMs === 0 || nowMs - this.start > windowMs)) {
      this.start = nowMs;
      this.peak = total;
    }
    if (total > this.peak) this.peak = total;
    const shrink = this.peak - effect.after;
    if (effect.deletions === 0 || shrink <= effect.deletions) return { effect, total };
    return { effect: { ...effect, deletions: shrink }, total: this.peak };
  }

  /** Judges from `total` from now on: a state an operator confirmed, restored, or re-admitted under new rules. */
  reset(total: number): void {
    this.peak = total;
  }

  /** Forgets `deletions` an operator confirmed, and only those: the rest still counts. */
  lower(deletions: number): void {
    this.peak = Math.max(0, this.peak - Math.max(0, deletions));
  }

  /** The window as a record keeps it; undefined before the first deleting update. */
  get record(): WindowRecord | undefined {
    return Number.isFinite(this.start) ? { startMs: this.start, peak: this.peak } : undefined;
  }

  /**
   * Goes on from a recorded window (`record`) and a hold that judged an update against `heldTotal`
   * objects (a record of an earlier release keeps no window, only its hold), since `heldSinceMs`:
   * a restart lets no deletion go that the process before it would have held.
   */
  restore(record: WindowRecord | undefined, heldTotal?: number, heldSinceMs?: number): void {
    if (record !== undefined) {
      this.start = record.startMs;
      this.peak = Math.max(0, record.peak);
    }
    if (heldTotal === undefined || heldTotal <= this.peak) return;
    this.peak = heldTotal;
    if (!Number.isFinite(this.start) && heldSinceMs !== undefined) this.start = heldSinceMs;
  }
}

/**
 * Kinds a listing cuts by more than the guards let one update delete of a kind: more than
 * `minDeletes` of its objects and more than `maxDeleteRatio` of them. Such a kind is held alone,
 * as one a listing takes whole is: an upstream answering a kind from a registry only partly
 * loaded cuts that kind, however small a share of the source it is.
 */
export function kindsCut(effect: UpdateEffect, rules: GuardRules): string[] {
  const cut: string[] = [];
  for (const { kind, deletions, before } of effect.listedLosses ?? []) {
    if (deletions > rules.minDeletes && deletions > rules.maxDeleteRatio * before) cut.push(kind);
  }
  return cut;
}

/**
 * The kinds the guards hold alone, apart from the rest of the update: those a listing takes whole
 * while `keepOnEmpty` (with the kinds it empties beside them, `listedEmpty`), and those it cuts
 * (see {@link kindsCut}). Empty when none is.
 */
export function kindsHeldAlone(effect: UpdateEffect, rules: GuardRules): string[] {
  const kinds =
    rules.keepOnEmpty && effect.emptiedKinds.length > 0
      ? [...(effect.listedEmpty ?? effect.emptiedKinds)]
      : [];
  for (const kind of kindsCut(effect, rules)) if (!kinds.includes(kind)) kinds.push(kind);
  return kinds;
}

/**
 * Whether an update is small enough to apply at once, without waiting for the rest of the
 * source's update or asking the guards: the source held nothing, it deletes nothing, or it
 * deletes no more than `minDeletes` and empties no kind.
 */
export function appliesAtOnce(effect: UpdateEffect, total: number, rules: GuardRules): boolean {
  if (total === 0 || effect.deletions === 0) return true;
  return effect.deletions <= rules.minDeletes && !effect.emptiesKind;
}

/**
 * The guards' verdict on an update to a source holding `total` objects: why it is held, or
 * undefined when it may be applied. `empty`: it would leave the source with nothing while
 * `keepOnEmpty`. `mass-delete`: it deletes more than `minDeletes` and more than
 * `maxDeleteRatio` of what the source holds. `emptied-kind`: it takes a kind whole
 * (`emptiedKinds`) while `keepOnEmpty`, however few objects that is, or cuts a kind (see
 * {@link kindsCut}), however small a share of the source the kind is. A source holding nothing
 * is never held.
 */
export function guardVerdict(
  effect: UpdateEffect,
  total: number,
  rules: GuardRules,
): Omit<HeldUpdate, 'since' | 'digest'> | undefined {
  if (total === 0) return undefined;
  const { deletions, after } = effect;
  if (after === 0 && rules.keepOnEmpty) return { reason: 'empty', deletions, total };
  if (deletions > rules.minDeletes && deletions > rules.maxDeleteRatio * total) {
    return { reason: 'mass-delete', deletions, total };
  }
  const alone = kindsHeldAlone(effect, rules);
  if (alone.length > 0) return { reason: 'emptied-kind', deletions, total, emptiedKinds: alone };
  return undefined;
}
