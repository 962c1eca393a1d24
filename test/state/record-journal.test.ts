import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ChunkedList, type ReadList } from '../../src/core/chunked-list.js';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceRecord } from '../../src/merge/source-record.js';
import {
  journalEntry,
  listChange,
  replayJournal,
  JOURNAL_ENTRY_HEADER_BYTES,
} from '../../src/state/record-journal.js';
import { fakeResource } from '../support/resources.js';

const BASE = Buffer.alloc(32, 7);
const OTHER_BASE = Buffer.alloc(32, 9);

function record(resources: ReadList<ConfigResource>, revision: string): SourceRecord {
  return { source: 'mesh', type: 'xds', revision, savedMs: 1, complete: true, answeredKinds: [], resources };
}

/** What a record holds, comparable across a round trip through bytes. */
const content = (r: SourceRecord): string[] => [
  `${r.revision} ${String(r.complete)} ${r.answeredKinds.join(',')}`,
  ...[...r.resources].map((x) => `${x.namespace}/${x.name} ${x.version}`),
];

/** An edit of a list, drawn by fast-check. */
type Edit = readonly ['replace' | 'insert' | 'remove', number];
const edits = fc.array(
  fc.tuple(fc.constantFrom('replace' as const, 'insert' as const, 'remove' as const), fc.nat()),
  { minLength: 1, maxLength: 4 },
);

function edited(list: readonly ConfigResource[], changes: readonly Edit[], round: number): ConfigResource[] {
  const out = [...list];
  changes.forEach(([what, at], k) => {
    const i = at % Math.max(out.length, 1);
    const fresh = fakeResource(`obj-${round}-${k}`, { body: `${round}-${k}` });
    if (what === 'insert' || out.length === 0) out.splice(i, 0, fresh);
    else if (what === 'remove') out.splice(i, 1);
    else out[i] = fakeResource((out[i] as ConfigResource).name, { body: `changed-${round}-${k}` });
  });
  return out;
}

/** `edited`, on a list kept in chunks: the list it gives shares the chunks no edit fell in. */
function editedChunks(
  list: ChunkedList<ConfigResource>,
  changes: readonly Edit[],
  round: number,
): ChunkedList<ConfigResource> {
  let out = list;
  changes.forEach(([what, at], k) => {
    const i = at % Math.max(out.length, 1);
    const fresh = fakeResource(`obj-${round}-${k}`, { body: `${round}-${k}` });
    if (what === 'insert' || out.length === 0) out = out.inserted(i, fresh);
    else if (what === 'remove') out = out.removed(i);
    else {
      const name = (out.at(i) as ConfigResource).name;
      out = out.replaced(i, fakeResource(name, { body: `changed-${round}-${k}` }));
    }
  });
  return out;
}

/** A journal of `rounds` of edits onto `start`: the records written and the entries' bytes. */
function journalOf(start: readonly ConfigResource[], rounds: readonly (readonly Edit[])[]) {
  const records = [record(start, 'r0')];
  const entries: Buffer[] = [];
  for (const [n, changes] of rounds.entries()) {
    const before = records[records.length - 1] as SourceRecord;
    const next = record(edited([...before.resources], changes, n), `r${n + 1}`);
    const change = listChange(before.resources, next.resources);
    if (change === undefined) break;
    entries.push(journalEntry(BASE, next, change));
    records.push(next);
  }
  return { records, entries };
}

/** 3000 objects in chunks of a few hundred: records a change apart share all chunks but one. */
const chunkedStart = ChunkedList.filtered(
  Array.from({ length: 3000 }, (_, i) => fakeResource(`obj-${String(i).padStart(4, '0')}`)),
);

const start = Array.from({ length: 60 }, (_, i) => fakeResource(`obj-${String(i).padStart(3, '0')}`));

describe('record journal', () => {
  it('replays to the last record written, whatever the edits', () => {
    fc.assert(
      fc.property(fc.array(edits, { minLength: 1, maxLength: 8 }), (rounds) => {
        const { records, entries } = journalOf(start, rounds);
        const replayed = replayJournal(Buffer.concat(entries), BASE, records[0] as SourceRecord, 'j');
        assert.equal(replayed.entries, entries.length);
        assert.equal(replayed.problem, undefined);
        assert.deepEqual(content(replayed.record), content(records[records.length - 1] as SourceRecord));
      }),
    );
  });

  it('replays to the last record written when records keep their objects in chunks, each entry carrying only the objects its edits inserted', () => {
    fc.assert(
      fc.property(fc.array(edits, { minLength: 1, maxLength: 8 }), (rounds) => {
        const records = [record(chunkedStart, 'r0')];
        const entries: Buffer[] = [];
        for (const [n, changes] of rounds.entries()) {
          const before = records[records.length - 1] as SourceRecord;
          const next = record(
            editedChunks(before.resources as ChunkedList<ConfigResource>, changes, n),
            `r${n + 1}`,
          );
          const change = listChange(before.resources, next.resources);
          assert.ok(change !== undefined, 'a few edits among 3000 objects are a change');
          assert.ok(change.inserted.length <= changes.length, 'only what the edits inserted');
          entries.push(journalEntry(BASE, next, change));
          records.push(next);
        }
        const replayed = replayJournal(Buffer.concat(entries), BASE, records[0] as SourceRecord, 'j');
        assert.equal(replayed.entries, entries.length);
        assert.equal(replayed.problem, undefined);
        assert.deepEqual(content(replayed.record), content(records[records.length - 1] as SourceRecord));
      }),
      {
        endOnFailure: true,
        // Always among the runs: a change to the last object of a chunk, where the chunks two
        // records do not share end.
        examples: [
          [
            [
              [
                ['replace', 2211],
                ['replace', 2559],
                ['replace', 2455],
              ],
            ],
          ],
        ],
      },
    );
  });

  it('replays a journal cut anywhere to the last whole entry, never to a mix', () => {
    const { records, entries } = journalOf(
      start,
      Array.from({ length: 5 }, (_, i): Edit[] => [
        ['replace', i * 7],
        ['insert', i * 3],
      ]),
    );
    const journal = Buffer.concat(entries);
    const ends = entries.reduce<number[]>(
      (acc, e) => [...acc, (acc[acc.length - 1] ?? 0) + e.byteLength],
      [],
    );
    for (let cut = 0; cut <= journal.byteLength; cut++) {
      const whole = ends.filter((end) => end <= cut).length;
      const replayed = replayJournal(journal.subarray(0, cut), BASE, records[0] as SourceRecord, 'j');
      assert.equal(replayed.entries, whole, `cut at ${cut}`);
      assert.equal(replayed.problem, undefined);
      assert.equal(replayed.cutAt, cut === 0 || ends.includes(cut) ? undefined : (ends[whole - 1] ?? 0));
      assert.deepEqual(content(replayed.record), content(records[whole] as SourceRecord));
    }
  });

  it('stops at a corrupt entry, naming where, with the record as of the entry before it', () => {
    const { records, entries } = journalOf(start, [[['replace', 1]], [['replace', 2]], [['remove', 3]]]);
    const journal = Buffer.concat(entries);
    const second = (entries[0] as Buffer).byteLength;
    const at = second + JOURNAL_ENTRY_HEADER_BYTES + 3;
    journal[at] = (journal[at] ?? 0) ^ 0xff;
    const replayed = replayJournal(journal, BASE, records[0] as SourceRecord, 'mesh.journal');
    assert.equal(replayed.entries, 1);
    assert.match(replayed.problem?.message ?? '', new RegExp(`^entry at byte ${second}: checksum mismatch`));
    assert.equal(replayed.problem?.location.file, 'mesh.journal');
    assert.deepEqual(content(replayed.record), content(records[1] as SourceRecord));
  });

  it('passes over entries written onto another state file', () => {
    const { records, entries } = journalOf(start, [[['replace', 1]], [['replace', 2]]]);
    const replayed = replayJournal(Buffer.concat(entries), OTHER_BASE, records[0] as SourceRecord, 'j');
    assert.equal(replayed.entries, 0);
    assert.deepEqual(content(replayed.record), content(records[0] as SourceRecord));
  });

  it('finds one changed object among many as one splice carrying that object', () => {
    const after = start.map((r, i) => (i === 40 ? fakeResource(r.name, { body: 'new' }) : r));
    const change = listChange(start, after);
    assert.deepEqual(change?.splices, [{ at: 40, removed: 1, inserted: 1 }]);
    assert.deepEqual(change?.inserted, [after[40]]);
    const removed = listChange(
      start,
      start.filter((_, i) => i !== 10),
    );
    assert.deepEqual(removed, { splices: [{ at: 10, removed: 1, inserted: 0 }], inserted: [] });
  });

  it('keeps an addition and a removal far apart as two splices, not a span of everything between', () => {
    const added = fakeResource('obj-000a');
    const after = [start[0] as ConfigResource, added, ...start.slice(1, 50), ...start.slice(51)];
    assert.deepEqual(listChange(start, after), {
      splices: [
        { at: 1, removed: 0, inserted: 1 },
        { at: 50, removed: 1, inserted: 0 },
      ],
      inserted: [added],
    });
  });

  it('gives up, for a whole write, when more than an eighth of the objects change', () => {
    const big = Array.from({ length: 400 }, (_, i) => fakeResource(`o-${i}`));
    const some = big.map((r, i) => (i % 10 === 0 ? fakeResource(r.name, { body: 'x' }) : r));
    assert.ok(listChange(big, some) !== undefined, '40 of 400');
    const many = big.map((r, i) => (i % 5 === 0 ? fakeResource(r.name, { body: 'x' }) : r));
    assert.equal(listChange(big, many), undefined, '80 of 400');
  });
});
