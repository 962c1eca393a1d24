/**
 * Each served object's framed bytes are held once: in the block of the served list that last took
 * them, not also in memory of their own, and a block rebuilt lets the one it replaces go. Checked
 * with the real encoder and blocks, and weak references across full collections.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { makeResource, type ConfigResource } from '../../src/core/resource.js';
import { FrameBlocks } from '../../src/downstream/frame-blocks.js';
import { ResourceEncoder } from '../../src/downstream/resource-encoder.js';
import { KINDS } from '../../src/schema/kinds.js';

// A full collection on demand, without starting the test process with --expose-gc.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function serviceEntry(name: string, body: string): ConfigResource {
  return makeResource({
    kind: 'networking.istio.io/ServiceEntry',
    namespace: 'shop',
    name,
    labels: { app: name },
    annotations: {},
    createTime: { seconds: 1_700_000_000, nanos: 0 },
    body: Buffer.from(body),
    origin: { file: 'test' },
  });
}

/**
 * How many of `refs` survive full collections, each in a turn of its own (a WeakRef's target lives
 * at least until the turn ends), for up to two seconds: one in a few thousand has been seen to
 * outlive ten turns in a row while the whole suite ran beside it on a loaded machine; a buffer
 * kept for good survives them all.
 */
async function survivors(refs: readonly WeakRef<object>[]): Promise<number> {
  let alive = refs.length;
  const deadline = performance.now() + 2000;
  for (let i = 0; alive > 0 && (i < 10 || performance.now() < deadline); i++) {
    await new Promise((resolve) => (i < 10 ? setImmediate(resolve) : setTimeout(resolve, 20)));
    gc();
    alive = refs.filter((r) => r.deref() !== undefined).length;
  }
  return alive;
}

/**
 * 2000 objects framed once by new blocks and the real encoder, with the memory of chunk `which`
 * picks (held weakly: nothing here keeps it), where that chunk starts and how many objects it holds.
 */
function framedOnce(which: (chunks: readonly Buffer[]) => number): {
  readonly encoder: ResourceEncoder;
  readonly blocks: FrameBlocks;
  /** The list as it stands: the caller replaces it here as it changes it. */
  list: ConfigResource[];
  readonly chunk: WeakRef<ArrayBufferLike>;
  readonly start: number;
  readonly size: number;
} {
  const encoder = new ResourceEncoder(KINDS);
  const blocks = new FrameBlocks();
  const list = names(2000).map((n) => serviceEntry(n, `body of ${n}`));
  const chunks = blocks.chunks('v|k', list, encoder);
  const chunk = chunks[which(chunks)];
  assert.ok(chunk !== undefined);
  const start = list.findIndex((r) => encoder.framed(r).buffer === chunk.buffer);
  const size = list.filter((r) => encoder.framed(r).buffer === chunk.buffer).length;
  assert.ok(size > 12, `a block of ${size}`);
  return { encoder, blocks, list, chunk: new WeakRef(chunk.buffer), start, size };
}

/**
 * Changes the objects `pick` names (from the list as it stands), one per response, until a change has `blocks` build a block
 * whole again (within six changes), each response checked against the objects' framed bytes and
 * each replaced object forgotten by `encoder`; `spliced` hears of every change spliced instead.
 * Returns the list as it ends.
 */
function changeUntilBuiltWhole(
  list: ConfigResource[],
  blocks: FrameBlocks,
  encoder: ResourceEncoder,
  pick: (round: number, current: readonly ConfigResource[]) => ConfigResource,
  spliced: (chunks: readonly Buffer[], changed: ConfigResource) => void = () => undefined,
): ConfigResource[] {
  const built = blocks.counters.blocksBuilt;
  for (let round = 0; blocks.counters.blocksBuilt === built; round++) {
    assert.ok(round < 6, 'built whole within six changes');
    const replaced = pick(round, list);
    const changed = serviceEntry(replaced.name, `changed ${round}`);
    list = list.map((r) => (r === replaced ? changed : r));
    const chunks = blocks.chunks('v|k', list, encoder);
    assert.deepEqual(Buffer.concat(chunks), Buffer.concat(list.map((r) => Buffer.from(encoder.framed(r)))));
    if (blocks.counters.blocksBuilt === built) spliced(chunks, changed);
    encoder.forget([replaced], [changed]);
  }
  return list;
}

const names = (n: number): string[] =>
  Array.from({ length: n }, (_, i) => `svc-${String(i).padStart(5, '0')}`);

describe('framed bytes held once', () => {
  it("lets an object's own encoding go once a block holds it", async () => {
    const encoder = new ResourceEncoder(KINDS);
    const blocks = new FrameBlocks();
    const list = names(2000).map((n) => serviceEntry(n, `body of ${n}`));
    const own = list.map((r) => new WeakRef(encoder.framed(r).buffer));
    const expected = Buffer.concat(list.map((r) => encoder.framed(r)));
    const chunks = blocks.chunks('v|k', list, encoder);
    assert.ok(chunks.length > 3, `${chunks.length} blocks`);
    assert.deepEqual(Buffer.concat(chunks), expected);
    assert.equal(await survivors(own), 0, 'no object keeps bytes of its own beside the blocks');
    // What the encoder hands out now is the blocks' bytes, equal to what it encoded.
    assert.deepEqual(Buffer.concat(list.map((r) => encoder.framed(r))), expected);
    assert.equal(encoder.encodes, list.length);
  });

  it('frames objects ahead into shared slabs, each let go once blocks hold its objects', async () => {
    const encoder = new ResourceEncoder(KINDS);
    const reference = new ResourceEncoder(KINDS);
    // Bodies of 500 bytes: some 600 bytes framed each, two thousand of them more than one slab.
    const list = names(2000).map((n) => serviceEntry(n, n.padEnd(500, '.')));
    const expected = Buffer.concat(list.map((r) => reference.framed(r)));
    const ahead = list.map((r) => encoder.framedAhead(r));
    assert.deepEqual(Buffer.concat(ahead), expected);
    const slabs = [...new Set(ahead.map((b) => b.buffer))];
    assert.ok(slabs.length >= 2 && slabs.length <= 3, `${slabs.length} slabs for ${list.length} objects`);
    assert.ok(
      slabs.every((s) => s.byteLength >= 128 * 1024),
      'a slab is large enough for malloc to map it apart',
    );
    assert.equal(encoder.aheadSlabs, slabs.length, 'every slab counted');
    // Framed again, the same bytes: nothing is encoded twice.
    const again = encoder.framedAhead(list[7] as ConfigResource);
    assert.equal(again.buffer, ahead[7]?.buffer);
    assert.equal(again.byteOffset, ahead[7]?.byteOffset);
    assert.equal(encoder.encodes, list.length);
    encoder.endAhead();
    const refs = slabs.map((s) => new WeakRef(s));
    ahead.length = 0;
    slabs.length = 0;
    // A list of every object but the first: its slab stays for that one, the others go.
    const blocks = new FrameBlocks();
    const chunks = blocks.chunks('v|k', list.slice(1), encoder);
    assert.deepEqual(
      Buffer.concat(chunks),
      expected.subarray(reference.framed(list[0] as ConfigResource).length),
    );
    assert.equal(await survivors(refs), 1, 'only the slab of the object no block holds is kept');
    assert.equal(encoder.framed(list[0] as ConfigResource).buffer, refs[0]?.deref());
    assert.equal(encoder.encodes, list.length);
  });

  it('gives an object too large for a slab memory of its own, the slab going on after it', () => {
    const encoder = new ResourceEncoder(KINDS);
    const small = serviceEntry('svc-a', 'small body');
    const large = serviceEntry('svc-b', 'x'.repeat(200 * 1024));
    const after = serviceEntry('svc-c', 'another small body');
    const first = encoder.framedAhead(small);
    const alone = encoder.framedAhead(large);
    const next = encoder.framedAhead(after);
    assert.equal(alone.byteLength, alone.buffer.byteLength, 'the large object fills a buffer of its own');
    assert.equal(next.buffer, first.buffer, 'the small ones share the slab');
    assert.equal(next.byteOffset, first.byteOffset + first.byteLength);
    assert.equal(encoder.aheadSlabs, 1);
    const reference = new ResourceEncoder(KINDS);
    assert.deepEqual(Buffer.from(alone), Buffer.from(reference.framed(large)));
  });

  it('encodes an object first met in a block straight into it: no memory of its own', () => {
    const encoder = new ResourceEncoder(KINDS);
    const blocks = new FrameBlocks();
    const list = names(2000).map((n) => serviceEntry(n, `body of ${n}`));
    const chunks = blocks.chunks('v|k', list, encoder);
    const reference = new ResourceEncoder(KINDS);
    assert.deepEqual(Buffer.concat(chunks), Buffer.concat(list.map((r) => reference.framed(r))));
    const inChunks = new Set(chunks.map((c) => c.buffer));
    assert.ok(
      list.every((r) => inChunks.has(encoder.framed(r).buffer)),
      "every object's bytes lie in a chunk",
    );
    assert.equal(encoder.encodes, list.length);
    // Another list of the same objects copies them from where they lie, encoding nothing.
    assert.deepEqual(
      Buffer.concat(blocks.chunks('w|k', list.slice(500), encoder)),
      Buffer.concat(list.slice(500).map((r) => reference.framed(r))),
    );
    assert.equal(encoder.encodes, list.length);
  });

  it('lets the memory of a block go once changes had it built whole again and the replaced objects are forgotten', async () => {
    const encoder = new ResourceEncoder(KINDS);
    const blocks = new FrameBlocks();
    let list = names(2000).map((n) => serviceEntry(n, `body of ${n}`));
    const first = blocks.chunks('v|k', list, encoder);
    // The block's memory, and every buffer a change adds to it, until it is built whole again;
    // every other member of the block changes in turn, each change a cut more.
    const { origin, members } = ((): { origin: WeakRef<ArrayBufferLike>; members: ConfigResource[] } => {
      const where = first.find((c) => c.buffer === encoder.framed(list[1000] as ConfigResource).buffer);
      assert.ok(where !== undefined, 'the object lives in a block');
      const held = list.filter((r) => encoder.framed(r).buffer === where.buffer);
      return { origin: new WeakRef(where.buffer), members: held };
    })();
    const gone: Array<WeakRef<object>> = [origin];
    assert.ok(members.length >= 12, `a block of ${members.length}`);
    first.length = 0;
    list = changeUntilBuiltWhole(
      list,
      blocks,
      encoder,
      (round) => members[1 + 2 * round] as ConfigResource,
      (chunks, changed) => {
        // Spliced: the pieces around the change are the block's memory, the change a buffer more.
        assert.ok(
          chunks.some((c) => c.buffer === origin.deref()),
          'the block before the change is spliced',
        );
        gone.push(new WeakRef(encoder.framed(changed).buffer));
      },
    );
    assert.ok(gone.length >= 3, `${gone.length - 1} changes spliced before the block was built whole`);
    members.length = 0;
    assert.equal(await survivors(gone), 0, 'the memory the block was in before is let go');
  });

  it('lets the memory of a block go once a removal joined it to the block before it and that was built whole again', async () => {
    // The second block, and the last object of the first: removed, it joins the two.
    // (The list is read and replaced where the setup holds it: a second reference to the first
    // list would keep the objects it replaces, and their bytes' memory, alive.)
    const setup = framedOnce(() => 1);
    const { encoder, blocks, chunk: second } = setup;
    const joinAt = setup.start - 1;
    const removed = setup.list[joinAt] as ConfigResource;
    setup.list = setup.list.filter((r) => r !== removed);
    assert.equal(
      Buffer.concat(blocks.chunks('v|k', setup.list, encoder)).toString('latin1'),
      Buffer.concat(setup.list.map((r) => Buffer.from(encoder.framed(r)))).toString('latin1'),
    );
    encoder.forget([removed], []);
    // Changes to the joined block until it is built whole again.
    setup.list = changeUntilBuiltWhole(
      setup.list,
      blocks,
      encoder,
      (round, current) => current[1 + 2 * round] as ConfigResource,
    );
    // The second block's first object is served still; it keeps no block the response lost.
    assert.equal(await survivors([second]), 0, 'the second block is let go');
  });

  it('lets the memory of the last block go once an object appended after it had it built whole again', async () => {
    // The list's last block, which ends where the list does: its last object, served still, ends it
    // no more once an object is appended.
    const setup = framedOnce((c) => c.length - 1);
    const { encoder, blocks, chunk: block, start: from } = setup;
    setup.list = [...setup.list, serviceEntry('zzz-appended', 'appended')];
    assert.deepEqual(
      Buffer.concat(blocks.chunks('v|k', setup.list, encoder)),
      Buffer.concat(setup.list.map((r) => Buffer.from(encoder.framed(r)))),
    );
    setup.list = changeUntilBuiltWhole(
      setup.list,
      blocks,
      encoder,
      (round, current) => current[from + 1 + 2 * round] as ConfigResource,
    );
    assert.equal(await survivors([block]), 0, 'the last block is let go');
  });
});
