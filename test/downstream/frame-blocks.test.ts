import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ChunkedList } from '../../src/core/chunked-list.js';
import { compareByName, makeResource, type ConfigResource } from '../../src/core/resource.js';
import { FrameBlocks } from '../../src/downstream/frame-blocks.js';

function resource(name: string, body = name): ConfigResource {
  return makeResource({
    kind: 'networking.istio.io/ServiceEntry',
    namespace: 'ns',
    name,
    labels: {},
    annotations: {},
    createTime: { seconds: 1, nanos: 0 },
    body: Buffer.from(body),
    origin: { file: 'test' },
  });
}

/** Stands in for the encoder: distinct bytes per object instance. */
const framed = (r: ConfigResource): Uint8Array =>
  Buffer.from(`[${r.name}:${Buffer.from(r.body).toString()}]`);
const joined = (list: readonly ConfigResource[]): string =>
  list.map((r) => Buffer.from(framed(r)).toString()).join('');
/** A body large enough to be framed alone. */
const LARGE = 'x'.repeat(70_000);
/**
 * A list of `n` objects framed once by new blocks, and where its chunk `k` starts and how many
 * objects it holds (at least `least`).
 */
function framedList(
  n: number,
  k: number,
  least: number,
): { list: ConfigResource[]; blocks: FrameBlocks; first: Buffer[]; start: number; size: number } {
  const list = names(n).map((name) => resource(name));
  const blocks = new FrameBlocks();
  const first = blocks.chunks('v|k', list, { framed });
  const { start, size } = chunkAt(first, k);
  assert.ok(size >= least, `a block of ${size} objects`);
  return { list, blocks, first, start, size };
}

/** Where chunk `k` of a list's chunks starts in the list, and how many objects it holds. */
function chunkAt(chunks: readonly Buffer[], k: number): { start: number; size: number } {
  const count = (chunk: Buffer | undefined): number =>
    (chunk ?? Buffer.alloc(0)).toString().split('][').length;
  let start = 0;
  for (let i = 0; i < k; i++) start += count(chunks[i]);
  return { start, size: count(chunks[k]) };
}
const names = (n: number): string[] =>
  Array.from({ length: n }, (_, i) => `svc-${String(i).padStart(5, '0')}`);

describe('FrameBlocks', () => {
  it('chunks concatenate to every framed object, in order, for any list, large objects among them', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/), { maxLength: 600 }),
        fc.array(fc.nat(), { maxLength: 4 }),
        (raw, large) => {
          const big = new Set(large.map((i) => raw[i % Math.max(raw.length, 1)]));
          const list = raw.map((n) => resource(n, big.has(n) ? LARGE : n)).sort(compareByName);
          const chunks = new FrameBlocks().chunks('v|k', list, { framed });
          assert.equal(Buffer.concat(chunks).toString(), joined(list));
        },
      ),
    );
  });

  it('chunks concatenate to every framed object after any sequence of changes to the list', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/), { minLength: 1, maxLength: 400 }),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom('add', 'remove', 'replace', 'grow')), {
          maxLength: 12,
        }),
        (raw, edits) => {
          const blocks = new FrameBlocks();
          let list = raw.map((n) => resource(n)).sort(compareByName);
          assert.equal(Buffer.concat(blocks.chunks('v|k', list, { framed })).toString(), joined(list));
          for (const [at, edit] of edits) {
            const i = at % Math.max(list.length, 1);
            const r = list[i];
            if (edit === 'add') list = [...list, resource(`zz-added-${at}`)].sort(compareByName);
            else if (edit === 'remove') list = list.filter((_, k) => k !== i);
            else if (edit === 'replace' && r !== undefined)
              list = list.map((x, k) => (k === i ? resource(x.name, `${x.name}-v${at}`) : x));
            else if (edit === 'grow' && r !== undefined)
              list = list.map((x, k) => (k === i ? resource(x.name, `${LARGE}${at}`) : x));
            const chunks = blocks.chunks('v|k', list, { framed });
            assert.equal(Buffer.concat(chunks).toString(), joined(list));
            assert.ok(
              chunks.every((c) => c.byteLength > 0),
              'every chunk holds bytes',
            );
          }
        },
      ),
    );
  });

  it('copies only the objects appended after the last block, not the block before them', () => {
    const blocks = new FrameBlocks();
    const list = names(300).map((n) => resource(n));
    blocks.chunks('v|k', list, { framed });
    const copied = blocks.counters.bytesCopied;
    const added = resource('zzz-last');
    const next = [...list, added];
    assert.equal(Buffer.concat(blocks.chunks('v|k', next, { framed })).toString(), joined(next));
    assert.equal(blocks.counters.bytesCopied - copied, framed(added).byteLength);
  });

  it('serves an object with a large body as a chunk of its own, never copied, whatever changes beside it', () => {
    const blocks = new FrameBlocks();
    const list = names(40).map((n, i) => resource(n, i % 10 === 3 ? `${LARGE}${i}` : n));
    const bytes = new Map(list.map((r) => [r, framed(r)]));
    const own = (r: ConfigResource): Uint8Array => bytes.get(r) ?? framed(r);
    const first = blocks.chunks('v|k', list, { framed: own });
    assert.equal(Buffer.concat(first).toString(), joined(list));
    for (const r of list.filter((_, i) => i % 10 === 3)) {
      const chunk = first.find((c) => c.buffer === bytes.get(r)?.buffer);
      assert.ok(chunk !== undefined && chunk.byteLength === bytes.get(r)?.byteLength, `${r.name} as it is`);
    }
    assert.ok(blocks.counters.bytesCopied < 2000, `${blocks.counters.bytesCopied} bytes copied into blocks`);
    const next = list.map((r, i) => (i === 4 ? resource(r.name, 'changed') : r));
    const copied = blocks.counters.bytesCopied;
    assert.equal(Buffer.concat(blocks.chunks('v|k', next, { framed: own })).toString(), joined(next));
    assert.ok(
      blocks.counters.bytesCopied - copied < 2000,
      'the change beside a large object copies the small ones only',
    );
  });

  it('a second call with the same objects copies nothing', () => {
    const blocks = new FrameBlocks();
    const list = names(5000).map((n) => resource(n));
    const first = blocks.chunks('v|k', list, { framed });
    const built = blocks.counters.blocksBuilt;
    assert.ok(first.length > 10 && first.length < 200, `${first.length} blocks for 5000 objects`);
    const second = blocks.chunks('v|k', list, { framed });
    assert.equal(blocks.counters.blocksBuilt, built);
    assert.deepEqual(second, first);
    second.forEach((c, i) => assert.equal(c, first[i], 'the same buffers'));
  });

  it('changing, adding or removing one object rebuilds one block (two at most when it moves a boundary)', () => {
    const base = names(5000).map((n) => resource(n));
    const edits: Array<[string, (l: ConfigResource[]) => ConfigResource[]]> = [
      ['change', (l) => l.map((r, i) => (i === 2500 ? resource(r.name, 'changed') : r))],
      ['add', (l) => [...l, resource('svc-02500-b')].sort(compareByName)],
      ['remove', (l) => l.filter((_, i) => i !== 2500)],
    ];
    for (const [what, edit] of edits) {
      const blocks = new FrameBlocks();
      blocks.chunks('v|k', base, { framed });
      const made = (): number => blocks.counters.blocksBuilt + blocks.counters.blocksSpliced;
      const before = made();
      const next = edit(base);
      const chunks = blocks.chunks('v|k', next, { framed });
      assert.ok(made() - before <= 2, `${what}: ${made() - before} blocks rebuilt`);
      assert.ok(made() - before >= 1, `${what}: something was rebuilt`);
      assert.equal(Buffer.concat(chunks).toString(), joined(next), what);
    }
  });

  it('tells the source where each member of a block it builds lives, and only then', () => {
    const blocks = new FrameBlocks();
    const moved = new Map<ConfigResource, Uint8Array>();
    const source = {
      framed: (r: ConfigResource): Uint8Array => moved.get(r) ?? framed(r),
      rehome: (r: ConfigResource, block: Uint8Array, offset: number, length: number): void =>
        void moved.set(r, block.subarray(offset, offset + length)),
    };
    const list = names(1000).map((n, i) => resource(n, i === 500 ? `${LARGE}${i}` : n));
    const chunks = blocks.chunks('v|k', list, source);
    assert.equal(Buffer.concat(chunks).toString(), joined(list));
    assert.equal(moved.size, list.length - 1, 'every member of a block, not the object framed alone');
    for (const [r, bytes] of moved) {
      assert.equal(Buffer.from(bytes).toString(), Buffer.from(framed(r)).toString(), r.name);
      assert.ok(
        chunks.some((c) => c.buffer === bytes.buffer),
        `${r.name} lives in a chunk`,
      );
    }
    // Blocks taken whole tell nothing; a change tells the members of the blocks rebuilt, copied
    // from where they live now.
    const calls = (): number => moved.size;
    moved.clear();
    blocks.chunks('v|k', list, source);
    assert.equal(calls(), 0);
    // A change tells the changed object only: the block around it is spliced, its other members
    // left where they live.
    const next = list.map((r, i) => (i === 200 ? resource(r.name, 'changed') : r));
    const after = blocks.chunks('v|k', next, source);
    assert.equal(Buffer.concat(after).toString(), joined(next));
    assert.deepEqual([...moved.keys()], [next[200]]);
  });

  it('a change to any object of a block copies that object alone, wherever it lies in the block', () => {
    // The second block's members: its first, one in the middle, its last.
    const { list, blocks, start, size } = framedList(3000, 1, 3);
    let current = list;
    for (const at of [start, start + Math.floor(size / 2), start + size - 1]) {
      const copied = blocks.counters.bytesCopied;
      const built = blocks.counters.blocksBuilt;
      current = current.map((r, i) => (i === at ? resource(r.name, `changed at ${at}`) : r));
      const chunks = blocks.chunks('v|k', current, { framed });
      assert.equal(Buffer.concat(chunks).toString(), joined(current), `change at ${at}`);
      assert.equal(blocks.counters.bytesCopied - copied, framed(current[at] as ConfigResource).byteLength);
      assert.equal(blocks.counters.blocksBuilt, built, `change at ${at}: no block built whole`);
    }
  });

  it('copies only the objects changed in a block since the last response, however far apart', () => {
    const { list, blocks, first, start, size } = framedList(3000, 3, 4);
    // Its first object and one near its end (a block whose first and last objects both changed
    // is found by neither, and built whole).
    const changedAt = new Set([start, start + size - 2]);
    const next = list.map((r, i) => (changedAt.has(i) ? resource(r.name, 'changed') : r));
    const copied = blocks.counters.bytesCopied;
    const chunks = blocks.chunks('v|k', next, { framed });
    assert.equal(Buffer.concat(chunks).toString(), joined(next));
    const changedBytes = [...changedAt].reduce((n, i) => n + framed(next[i] as ConfigResource).byteLength, 0);
    assert.equal(blocks.counters.bytesCopied - copied, changedBytes);
    assert.equal(chunks.length, first.length + 3, 'the block in four pieces: two new, two kept');
  });

  it('copies neighbours changed together into one new piece', () => {
    const { list, blocks, first, start } = framedList(3000, 2, 6);
    const changedAt = new Set([start + 2, start + 3, start + 4]);
    const next = list.map((r, i) => (changedAt.has(i) ? resource(r.name, 'changed together') : r));
    const chunks = blocks.chunks('v|k', next, { framed });
    assert.equal(Buffer.concat(chunks).toString(), joined(next));
    assert.equal(chunks.length, first.length + 2, 'the block in three pieces: kept, new, kept');
    const fresh = chunks[3] as Buffer;
    assert.equal(fresh.toString(), joined([...changedAt].map((i) => next[i] as ConfigResource)));
  });

  it('builds a block whole again once changes would leave it in more than five pieces', () => {
    const { list, blocks, first, start } = framedList(2000, 2, 12);
    let current = list;
    let most = 0;
    const builtBefore = blocks.counters.blocksBuilt;
    // Changes to every other object of the block, each leaving a new piece and a cut.
    for (let k = 1; k < 11; k += 2) {
      current = current.map((r, i) => (i === start + k ? resource(r.name, `v${k}`) : r));
      const chunks = blocks.chunks('v|k', current, { framed });
      assert.equal(Buffer.concat(chunks).toString(), joined(current));
      most = Math.max(most, chunks.length - first.length);
    }
    assert.ok(most <= 4, `the block came in ${most + 1} pieces`);
    assert.ok(blocks.counters.blocksBuilt > builtBefore, 'built whole again');
  });

  it('a list edited in chunks frames every object, in order, after any sequence of edits', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3000 }),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom('add', 'remove', 'replace', 'grow', 'rebuild')), {
          maxLength: 16,
        }),
        (size, edits) => {
          const blocks = new FrameBlocks();
          let list = ChunkedList.filtered(names(size).map((n) => resource(n)));
          const check = (what: string): void => {
            const items = list.toArray();
            const chunks = blocks.chunks('v|k', list, { framed });
            assert.equal(Buffer.concat(chunks).toString(), joined(items), what);
            assert.ok(
              chunks.every((c) => c.byteLength > 0),
              `${what}: every chunk holds bytes`,
            );
          };
          check('first');
          for (const [at, edit] of edits) {
            const i = at % Math.max(list.length, 1);
            const r = list.at(i);
            if (edit === 'add') {
              const added = resource(`svc-${String(at % 4000).padStart(5, '0')}-b`);
              list = list.inserted(list.position(added, compareByName), added);
            } else if (edit === 'remove' && r !== undefined) list = list.removed(i);
            else if (edit === 'replace' && r !== undefined)
              list = list.replaced(i, resource(r.name, `v${at}`));
            else if (edit === 'grow' && r !== undefined)
              list = list.replaced(i, resource(r.name, `${LARGE}${at}`));
            else if (edit === 'rebuild') list = ChunkedList.filtered(list.toArray());
            check(`${edit} at ${i}`);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('walks only the part of a list a change fell in, for a list edited in chunks', () => {
    const base = names(20_000).map((n) => resource(n));
    const blocks = new FrameBlocks();
    let list = ChunkedList.filtered(base);
    blocks.chunks('v|k', list, { framed });
    assert.equal(blocks.counters.objectsWalked, 20_000);
    for (const at of [0, 7_777, 19_999]) {
      const walked = blocks.counters.objectsWalked;
      list = list.replaced(at, resource(`svc-${String(at).padStart(5, '0')}`, 'changed'));
      const chunks = blocks.chunks('v|k', list, { framed });
      assert.equal(Buffer.concat(chunks).toString(), joined(list.toArray()));
      // The chunk of the list the change fell in (at most 1024 objects) and the blocks reaching
      // over its ends (at most 1024 objects each).
      assert.ok(
        blocks.counters.objectsWalked - walked <= 3 * 1024,
        `${blocks.counters.objectsWalked - walked} walked`,
      );
    }
    // Two changes far apart: the stretch between them is not walked either.
    const before = blocks.counters.objectsWalked;
    for (const at of [3_000, 15_000])
      list = list.replaced(at, resource(`svc-${String(at).padStart(5, '0')}`, 'changed too'));
    assert.equal(Buffer.concat(blocks.chunks('v|k', list, { framed })).toString(), joined(list.toArray()));
    assert.ok(
      blocks.counters.objectsWalked - before <= 6 * 1024,
      `${blocks.counters.objectsWalked - before} walked`,
    );
    // The same list again walks nothing; a list in an array of its own is walked whole.
    const walked = blocks.counters.objectsWalked;
    blocks.chunks('v|k', list, { framed });
    assert.equal(blocks.counters.objectsWalked, walked);
    blocks.chunks('v|k', list.toArray(), { framed });
    assert.equal(blocks.counters.objectsWalked - walked, 20_000);
  });

  it("a list whose objects run as another list's takes its blocks, copying nothing", () => {
    const blocks = new FrameBlocks();
    const all = names(3000).map((n) => resource(n));
    const first = blocks.chunks('a|k', all, { framed });
    const copied = blocks.counters.bytesCopied;
    // A stretch of the first list, as a view admitting some of its namespaces serves it.
    const stretch = all.slice(1000, 2000);
    const chunks = blocks.chunks('b|k', stretch, { framed });
    assert.equal(Buffer.concat(chunks).toString(), joined(stretch));
    assert.equal(blocks.counters.bytesCopied, copied, 'no byte copied');
    const memory = new Set(first.map((c) => c.buffer));
    assert.ok(
      chunks.every((c) => memory.has(c.buffer)),
      "every chunk lies in the first list's memory",
    );
    assert.ok(blocks.counters.blocksShared > 0, 'blocks taken whole');
    assert.ok(chunks.length <= first.length, `${chunks.length} chunks`);
  });

  it('copies an object that two lists share once when it changes, whichever list comes first', () => {
    for (const order of [
      ['a', 'b'],
      ['b', 'a'],
    ]) {
      const blocks = new FrameBlocks();
      const all = names(3000).map((n) => resource(n));
      const lists = { a: all, b: all.slice(1000, 2000) };
      for (const view of order) blocks.chunks(`${view}|k`, lists[view as 'a' | 'b'], { framed });
      const copied = blocks.counters.bytesCopied;
      const changed = resource((all[1500] as ConfigResource).name, 'changed');
      const next = all.map((r, i) => (i === 1500 ? changed : r));
      const nextLists = { a: next, b: next.slice(1000, 2000) };
      for (const view of order) {
        const list = nextLists[view as 'a' | 'b'];
        assert.equal(Buffer.concat(blocks.chunks(`${view}|k`, list, { framed })).toString(), joined(list));
      }
      assert.equal(
        blocks.counters.bytesCopied - copied,
        framed(changed).byteLength,
        `${order.join(' then ')}: the changed object copied once`,
      );
    }
  });

  it('frames every list right, lists over the same objects built and edited in any order', () => {
    // Lists as views make them: every object, a stretch, every third one, and those a mask admits.
    const filters: Array<(r: ConfigResource, i: number) => boolean> = [
      () => true,
      (_, i) => i >= 200 && i < 700,
      (_, i) => i % 3 === 0,
      (r) => r.name.charCodeAt(r.name.length - 1) % 2 === 0,
    ];
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1200 }),
        fc.array(
          fc.tuple(fc.nat(), fc.constantFrom('add', 'remove', 'replace', 'grow'), fc.subarray([0, 1, 2, 3])),
          { maxLength: 10 },
        ),
        (size, edits) => {
          const blocks = new FrameBlocks();
          let base = names(size).map((n) => resource(n));
          const check = (views: readonly number[], what: string): void => {
            for (const v of views) {
              const list = base.filter((r, i) =>
                (filters[v] as (r: ConfigResource, i: number) => boolean)(r, i),
              );
              const chunks = blocks.chunks(`${v}|k`, list, { framed });
              assert.equal(Buffer.concat(chunks).toString(), joined(list), `${what}, list ${v}`);
              assert.ok(
                chunks.every((c) => c.byteLength > 0),
                `${what}, list ${v}: every chunk holds bytes`,
              );
            }
          };
          check([3, 2, 1, 0], 'first');
          for (const [at, edit, views] of edits) {
            const i = at % Math.max(base.length, 1);
            const r = base[i];
            if (edit === 'add') base = [...base, resource(`svc-${String(at % 2000).padStart(5, '0')}-b`)];
            else if (edit === 'remove') base = base.filter((_, k) => k !== i);
            else if (edit === 'replace' && r !== undefined)
              base = base.map((x, k) => (k === i ? resource(x.name, `${x.name}-v${at}`) : x));
            else if (edit === 'grow' && r !== undefined)
              base = base.map((x, k) => (k === i ? resource(x.name, `${LARGE}${at}`) : x));
            base = [...new Map(base.map((x) => [x.name, x])).values()].sort(compareByName);
            check(views, `${edit} at ${i}`);
          }
          check([0, 1, 2, 3], 'last');
        },
      ),
      { numRuns: 80 },
    );
  });

  it('keeps separate lists apart', () => {
    const blocks = new FrameBlocks();
    const all = names(300).map((n) => resource(n));
    const some = all.filter((_, i) => i % 2 === 0);
    assert.equal(Buffer.concat(blocks.chunks('a|k', all, { framed })).toString(), joined(all));
    assert.equal(Buffer.concat(blocks.chunks('b|k', some, { framed })).toString(), joined(some));
    assert.equal(Buffer.concat(blocks.chunks('a|k', all, { framed })).toString(), joined(all));
  });
});
