import { MeshmuxError } from '../../core/errors.js';
import { appendAll } from '../../core/append-all.js';
import type { ReadResult } from '../mcp-resource-reader.js';

/** An object read well, as the notes keep it. */
export type GoodRead = Extract<ReadResult, { readonly ok: true }>;

/** At most this many objects with unknown body fields are named in their warning; the count is exact. */
const NAMED_LIMIT = 20;

/**
 * What was pruned or tolerated in the objects a channel holds, kept per object so that a change of
 * a few objects updates it in as many steps, and its warnings, made once, are the same instances
 * until it changes: fields of the MCP envelope our proto does not define (counted per field
 * number), body fields the kind's message does not define, and each object's own warnings. A key
 * is the one its object is held under in the channel's state.
 */
export class ChannelNotes {
  /** Per object with unknown envelope fields, their numbers. */
  private readonly envelope: Map<string, readonly number[]>;
  /** Per unknown envelope field number, how many objects carry it. */
  private readonly fieldCounts: Map<number, number>;
  /** Objects with unknown body fields, in the order they came. */
  private readonly body: Map<string, GoodRead>;
  /** Objects with warnings of their own, in the order they came. */
  private readonly warned: Map<string, readonly MeshmuxError[]>;
  /** The warnings as last made; undefined once something changed. */
  private made: readonly MeshmuxError[] | undefined;

  constructor(
    /** Where the objects come from (`xds://host:port <type URL>`), for messages. */
    private readonly where: string,
    from?: ChannelNotes,
  ) {
    this.envelope = new Map(from?.envelope);
    this.fieldCounts = new Map(from?.fieldCounts);
    this.body = new Map(from?.body);
    this.warned = new Map(from?.warned);
    this.made = from?.made;
  }

  /** A copy to change apart from this one (an incremental response built from the state). */
  copy(): ChannelNotes {
    return new ChannelNotes(this.where, this);
  }

  /** Whether no object holds a note. */
  get empty(): boolean {
    return this.envelope.size === 0 && this.body.size === 0 && this.warned.size === 0;
  }

  /** `result` is held under `key` now: its notes replace those of what was held there. */
  note(key: string, result: GoodRead): void {
    const fields = result.unknownEnvelopeFields;
    const bodyFields = result.unknownBodyFields;
    const warnings = result.warnings;
    const plain =
      fields.length === 0 && bodyFields.length === 0 && (warnings === undefined || warnings.length === 0);
    if (plain) {
      if (!this.empty) this.drop(key);
      return;
    }
    this.setFields(key, fields);
    if (bodyFields.length > 0) {
      this.body.set(key, result);
      this.made = undefined;
    } else if (this.body.delete(key)) this.made = undefined;
    if (warnings !== undefined && warnings.length > 0) {
      // Another version of an object warned of alike (its name in upper case, say): the warnings
      // made stand.
      const before = this.warned.get(key);
      if (before === undefined || !sameWarnings(before, warnings)) {
        this.warned.set(key, warnings);
        this.made = undefined;
      }
    } else if (this.warned.delete(key)) this.made = undefined;
  }

  /** Nothing is held under `key` any more (or what is carries no note). */
  drop(key: string): void {
    if (this.empty) return;
    this.setFields(key, NO_FIELDS);
    if (this.body.delete(key)) this.made = undefined;
    if (this.warned.delete(key)) this.made = undefined;
  }

  /** Takes `from`'s notes of `key` (an object kept from the state `from` describes). */
  adopt(key: string, from: ChannelNotes): void {
    this.drop(key);
    this.setFields(key, from.envelope.get(key) ?? NO_FIELDS);
    const body = from.body.get(key);
    if (body !== undefined) this.body.set(key, body);
    const warnings = from.warned.get(key);
    if (warnings !== undefined) this.warned.set(key, warnings);
    if (body !== undefined || warnings !== undefined) this.made = undefined;
  }

  /**
   * The warnings the notes make: each object's own, then one for the unknown envelope fields and
   * one for the unknown body fields. The same array until a note changes.
   */
  get warnings(): readonly MeshmuxError[] {
    return (this.made ??= this.make());
  }

  private make(): readonly MeshmuxError[] {
    if (this.empty) return NO_WARNINGS;
    const warnings: MeshmuxError[] = [];
    for (const own of this.warned.values()) appendAll(warnings, own);
    if (this.envelope.size > 0) {
      const numbers = [...this.fieldCounts.keys()].sort((a, b) => a - b);
      warnings.push(
        new MeshmuxError(
          'SCHEMA',
          `${this.envelope.size} objects carried fields istio.mcp.v1alpha1.Resource does not define ` +
            `(${numbers.join(', ')}); the envelope is rebuilt without them`,
          { file: this.where },
        ),
      );
    }
    if (this.body.size > 0) {
      const named: string[] = [];
      for (const result of this.body.values()) {
        named.push(`${result.name}: ${result.unknownBodyFields.join(', ')}`);
        if (named.length === NAMED_LIMIT) break;
      }
      warnings.push(
        new MeshmuxError(
          'SCHEMA',
          `${this.body.size} objects carry body fields their message does not define, kept as sent: ${named.join('; ')}`,
          { file: this.where },
        ),
      );
    }
    return Object.freeze(warnings);
  }

  /** The unknown envelope fields of the object under `key` are `fields` now. */
  private setFields(key: string, fields: readonly number[]): void {
    const before = this.envelope.get(key);
    if (before === undefined && fields.length === 0) return;
    if (before !== undefined && sameNumbers(before, fields)) return;
    if (before !== undefined) {
      for (const f of before) {
        const n = (this.fieldCounts.get(f) ?? 1) - 1;
        if (n === 0) this.fieldCounts.delete(f);
        else this.fieldCounts.set(f, n);
      }
    }
    if (fields.length === 0) this.envelope.delete(key);
    else {
      this.envelope.set(key, fields);
      for (const f of fields) this.fieldCounts.set(f, (this.fieldCounts.get(f) ?? 0) + 1);
    }
    // The count of objects or the fields named changed.
    this.made = undefined;
  }
}

function sameWarnings(a: readonly MeshmuxError[], b: readonly MeshmuxError[]): boolean {
  return a.length === b.length && a.every((w, i) => w.describe() === b[i]?.describe());
}

function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((n, i) => n === b[i]);
}

const NO_WARNINGS: readonly MeshmuxError[] = Object.freeze([]);
const NO_FIELDS: readonly number[] = Object.freeze([]);
