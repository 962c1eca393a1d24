import { createHash } from 'node:crypto';
import { ChunkedList, type ReadList } from '../core/chunked-list.js';
import { MeshmuxError } from '../core/errors.js';
import type { ConfigResource } from '../core/resource.js';
import { identitySplices, type ListSplice } from '../merge/identity-diff.js';
import type { SourceRecord } from '../merge/source-record.js';
import { decodeRecordChange, encodeRecordChange } from './state-file.js';

/**
 * The journal beside a state file: the changes written since the file, one entry each, so a change
 * of a few objects among 50k writes those objects instead of the whole record. An entry:
 *
 *   bytes 0–3    `MMXJ`
 *   bytes 4–7    payload length, big-endian
 *   bytes 8–39   SHA-256 of the payload of the state file it applies to (the file's checksum)
 *   bytes 40–71  SHA-256 of the entry's payload
 *   then the payload, one `meshmux.state.v1.RecordChange`
 *
 * Entries are replayed in order onto the state file they name; a journal left from an earlier
 * state file (a crash between writing a new one and emptying the journal) names another and is
 * passed over. An entry cut short by a crash ends the replay, as does a corrupt one.
 */
const MAGIC = Buffer.from('MMXJ', 'ascii');
export const JOURNAL_ENTRY_HEADER_BYTES = 72;

/** Above this share of a list's objects changed (or inserted), the record is written whole. */
const MOST_CHANGED = 1 / 8;

/** How `after` differs from `before`, object by object (identity), and the objects it inserts. */
export interface ListChange {
  readonly splices: readonly ListSplice[];
  readonly inserted: readonly ConfigResource[];
}

/**
 * The splices that turn `before` into `after` (see {@link identitySplices}); undefined when more
 * than an eighth of `after` (at least 16 objects) would be inserted, or the lists do not re-align:
 * the record is written whole then.
 */
export function listChange(
  before: ReadList<ConfigResource>,
  after: ReadList<ConfigResource>,
): ListChange | undefined {
  // Records a change apart share their chunks but those it fell in: only those are walked, each
  // stretch between shared chunks on its own, its splices placed where it starts.
  const most = Math.max(16, Math.floor(after.length * MOST_CHANGED));
  const splices: ListSplice[] = [];
  const inserted: ConfigResource[] = [];
  for (const stretch of ChunkedList.unsharedStretches(before, after)) {
    const change = identitySplices(stretch.was, stretch.now, most - inserted.length);
    if (change === undefined) return undefined;
    for (const s of change.splices)
      splices.push(stretch.wasFrom === 0 ? s : { ...s, at: s.at + stretch.wasFrom });
    for (let i = 0; i < change.inserted.length; i++) inserted.push(change.inserted[i] as ConfigResource);
  }
  return { splices, inserted };
}

/**
 * The journal entry of `record`, which `change` makes of the last record written, for the state
 * file whose checksum is `base`.
 */
export function journalEntry(base: Buffer, record: SourceRecord, change: ListChange): Buffer {
  const payload = encodeRecordChange({
    record: { ...record, resources: change.inserted },
    splices: change.splices,
  });
  const entry = Buffer.allocUnsafe(JOURNAL_ENTRY_HEADER_BYTES + payload.byteLength);
  MAGIC.copy(entry, 0);
  entry.writeUInt32BE(payload.byteLength, 4);
  base.copy(entry, 8, 0, 32);
  createHash('sha256').update(payload).digest().copy(entry, 40);
  payload.copy(entry, JOURNAL_ENTRY_HEADER_BYTES);
  return entry;
}

/** A record replayed from its state file and journal. */
export interface Replayed {
  readonly record: SourceRecord;
  /** Entries applied. */
  readonly entries: number;
  /** Where the last entry was cut short (a crash while it was appended), in bytes. */
  readonly cutAt?: number;
  /** A corrupt entry that ended the replay: the record is as of the entry before it. */
  readonly problem?: MeshmuxError;
}

/** Replays `journal` onto `record`, read from the state file whose checksum is `base`. */
export function replayJournal(journal: Buffer, base: Buffer, record: SourceRecord, file: string): Replayed {
  let at = 0;
  let entries = 0;
  let current = record;
  while (at < journal.byteLength) {
    const fail = (why: string, cause?: unknown): never => {
      throw new MeshmuxError(
        'STATE',
        `entry at byte ${at}: ${why}; restored as of the entry before it`,
        { file },
        cause === undefined ? {} : { cause },
      );
    };
    if (journal.byteLength - at < JOURNAL_ENTRY_HEADER_BYTES) return { record: current, entries, cutAt: at };
    try {
      if (!journal.subarray(at, at + 4).equals(MAGIC)) fail('not a journal entry');
      const length = journal.readUInt32BE(at + 4);
      const start = at + JOURNAL_ENTRY_HEADER_BYTES;
      if (start + length > journal.byteLength) return { record: current, entries, cutAt: at };
      const payload = journal.subarray(start, start + length);
      if (
        !createHash('sha256')
          .update(payload)
          .digest()
          .equals(journal.subarray(at + 40, at + 72))
      ) {
        fail('checksum mismatch: the journal is corrupt');
      }
      if (journal.subarray(at + 8, at + 40).equals(base.subarray(0, 32))) {
        const change = decodeRecordChange(payload, fail);
        current = { ...change.record, resources: applySplices(current.resources, change, fail) };
        entries++;
      }
      at = start + length;
    } catch (err) {
      if (!(err instanceof MeshmuxError)) throw err;
      return { record: current, entries, problem: err };
    }
  }
  return { record: current, entries };
}

/** `list` with a change's splices applied, or `fail` when they do not fit it. */
function applySplices(
  list: ReadList<ConfigResource>,
  change: { readonly record: SourceRecord; readonly splices: readonly ListSplice[] },
  fail: (why: string) => never,
): ConfigResource[] {
  const inserted = change.record.resources;
  const out: ConfigResource[] = [];
  let from = 0;
  let next = 0;
  for (const s of change.splices) {
    if (s.at < from || s.at + s.removed > list.length || next + s.inserted > inserted.length) {
      fail('its changes do not fit the record');
    }
    for (let i = from; i < s.at; i++) out.push(list.at(i) as ConfigResource);
    for (let i = 0; i < s.inserted; i++) out.push(inserted.at(next++) as ConfigResource);
    from = s.at + s.removed;
  }
  if (next !== inserted.length) fail('it carries objects none of its changes place');
  for (let i = from; i < list.length; i++) out.push(list.at(i) as ConfigResource);
  return out;
}
