import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFile, mkdir, rename, rm, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import { FileSource, type FileSourceOptions } from '../../src/upstream/file/file-source.js';
import { tempDir } from '../support/meshmux-harness.js';
import { SourceEventRecorder } from '../support/source-event-recorder.js';

function serviceEntry(name: string, host = `${name}.example.com`): string {
  return (
    `apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ${name}, namespace: shop}\n` +
    `spec: {hosts: [${host}], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}\n`
  );
}

function names(snapshot: SourceSnapshotEvent): string[] {
  return [...snapshot.resources].map((r) => r.name).sort();
}

/**
 * A separate node process that rewrites `file` `rounds` times in place, as a program writing in
 * pieces does: truncate, write the first `split` documents, stop for `pauseMs`, write the rest,
 * close, then wait `gapMs`. Round `i` gives every host a `v<i>` label. `firstWrite` settles once
 * the first round's first write is done, `done` once the process has ended well.
 */
function rewriteInTwoWrites(
  file: string,
  options: { count: number; split: number; rounds: number; pauseMs: number; gapMs: number },
): { firstWrite: Promise<void>; done: Promise<void> } {
  const writer = `
    const { closeSync, openSync, writeSync } = require('node:fs');
    const [file, count, split, rounds, pauseMs, gapMs] = process.argv.slice(1);
    const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(ms));
    const doc = (j, i) =>
      'apiVersion: networking.istio.io/v1\\nkind: ServiceEntry\\n' +
      'metadata: {name: se-' + j + ', namespace: shop}\\n' +
      'spec: {hosts: [se-' + j + '.v' + i + '.example.com], resolution: DNS,' +
      ' ports: [{number: 443, name: https, protocol: TLS}]}\\n---\\n';
    const docs = (from, to, i) => Array.from({ length: to - from }, (_, k) => doc(from + k, i)).join('');
    for (let i = 0; i < Number(rounds); i++) {
      const fd = openSync(file, 'w');
      writeSync(fd, docs(0, Number(split), i));
      if (i === 0) writeSync(1, 'first\\n');
      sleep(pauseMs);
      writeSync(fd, docs(Number(split), Number(count), i));
      closeSync(fd);
      sleep(gapMs);
    }`;
  const { count, split, rounds, pauseMs, gapMs } = options;
  const child = spawn(
    process.execPath,
    ['-e', writer, file, ...[count, split, rounds, pauseMs, gapMs].map(String)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const done = once(child, 'exit').then(([code]) => {
    assert.equal(code, 0, 'the writer process ended well');
  });
  const firstWrite = Promise.race([
    once(child.stdout, 'data').then(() => undefined),
    done.then(() => assert.fail('the writer ended before its first write')),
  ]);
  return { firstWrite, done };
}

describe('the file source', () => {
  let root: string;
  let dispose: () => Promise<void>;
  let counter = 0;
  const running: SourceEventRecorder[] = [];

  before(async () => {
    ({ dir: root, dispose } = await tempDir('meshmux-file-source-'));
  });
  afterEach(() => {
    for (const r of running.splice(0)) r.close();
  });
  after(async () => {
    await dispose();
  });

  async function start(
    files: Record<string, string>,
    options: Partial<FileSourceOptions> = {},
  ): Promise<{ dir: string; recorder: SourceEventRecorder; first: SourceSnapshotEvent }> {
    const dir = path.join(root, `case-${++counter}`);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir);
    for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
    const source = new FileSource({
      name: 'local',
      path: dir,
      defaultNamespace: 'default',
      rescanMs: 30,
      ...options,
    });
    const recorder = new SourceEventRecorder(source.events$);
    running.push(recorder);
    return { dir, recorder, first: await recorder.snapshot() };
  }

  /** The first snapshot from `from` on that holds an object named `name`. */
  function snapshotWith(
    recorder: SourceEventRecorder,
    name: string,
    from: number,
  ): Promise<SourceSnapshotEvent> {
    return recorder.next(
      (e) => e.type === 'snapshot' && [...e.resources].some((r) => r.name === name),
      from,
    ) as Promise<SourceSnapshotEvent>;
  }

  it('keeps the objects of a file caught empty between truncation and write, then keeps them through a bad write', async () => {
    const { dir, recorder, first } = await start(
      { 'a.yaml': serviceEntry('cart') + '---\n' + serviceEntry('checkout') },
      { vanishGraceMs: 60_000 },
    );
    assert.deepEqual(names(first), ['cart', 'checkout']);
    const from = recorder.count;
    await writeFile(path.join(dir, 'a.yaml'), '');
    // One scan reads every file: once the marker arrives, the empty file has been read as well.
    await writeFile(path.join(dir, 'marker.yaml'), serviceEntry('marker'));
    const seen = await snapshotWith(recorder, 'marker', from);
    assert.deepEqual(names(seen), ['cart', 'checkout', 'marker']);

    const broken = recorder.count;
    await writeFile(
      path.join(dir, 'a.yaml'),
      serviceEntry('cart').replace('resolution: DNS', 'resolution: NOPE'),
    );
    const rejected = (await recorder.next(
      (e) => e.type === 'snapshot' && e.errors.length > 0,
      broken,
    )) as SourceSnapshotEvent;
    assert.match(rejected.errors[0]?.describe() ?? '', /a\.yaml doc 0 .*spec\.resolution/);
    assert.deepEqual(
      names(rejected),
      ['cart', 'checkout', 'marker'],
      'the objects from before the truncation',
    );
    for (const e of recorder.events.slice(from)) {
      if (e.type === 'snapshot')
        assert.ok(names(e).includes('cart'), `cart is never deleted: ${names(e).join(',')}`);
    }
  });

  it('deletes the objects of a removed file once the grace period is over, and keeps them if it returns in time', async () => {
    const graceMs = 400;
    const { dir, recorder } = await start(
      { 'a.yaml': serviceEntry('cart'), 'b.yaml': serviceEntry('ledger') },
      { vanishGraceMs: graceMs },
    );
    // Removed and written again at once, as editors that save through a new file do.
    let from = recorder.count;
    await rm(path.join(dir, 'b.yaml'));
    await writeFile(path.join(dir, 'marker.yaml'), serviceEntry('marker'));
    assert.deepEqual(names(await snapshotWith(recorder, 'marker', from)), ['cart', 'ledger', 'marker']);
    await writeFile(path.join(dir, 'b.yaml'), serviceEntry('ledger', 'ledger.internal'));
    const back = (await recorder.next(
      (e) =>
        e.type === 'snapshot' &&
        [...e.resources].some((r) => r.name === 'ledger' && Buffer.from(r.body).includes('ledger.internal')),
      from,
    )) as SourceSnapshotEvent;
    assert.deepEqual(names(back), ['cart', 'ledger', 'marker']);
    for (const e of recorder.events.slice(from)) {
      if (e.type === 'snapshot') assert.ok(names(e).includes('ledger'), 'ledger is never deleted');
    }

    // When exactly the grace period ends is shown on virtual time (test/upstream/runtime/source-timing.test.ts).
    from = recorder.count;
    await rm(path.join(dir, 'a.yaml'));
    const gone = (await recorder.next(
      (e) => e.type === 'snapshot' && ![...e.resources].some((r) => r.name === 'cart'),
      from,
    )) as SourceSnapshotEvent;
    assert.deepEqual(names(gone), ['ledger', 'marker']);
  });

  it('announces synced again when its path comes back with the content it served before it went away', async () => {
    const { dir, recorder } = await start({ 'a.yaml': serviceEntry('cart') });
    const from = recorder.count;
    await rm(dir, { recursive: true });
    await recorder.next((e) => e.type === 'status' && e.state === 'stale', from);
    const lost = recorder.count;
    await mkdir(dir);
    await writeFile(path.join(dir, 'a.yaml'), serviceEntry('cart'));
    // Same objects, same revision: nothing to serve again, but the source is no longer stale.
    const back = await recorder.next((e) => e.type === 'status' && e.state === 'synced', lost);
    assert.equal(back.type, 'status');
    assert.ok(
      recorder.events.slice(lost).every((e) => e.type !== 'snapshot'),
      'the unchanged state is not served again',
    );
  });

  it('announces synced again when its path is moved away and back with every file untouched', async () => {
    const { dir, recorder } = await start({ 'a.yaml': serviceEntry('cart'), 'b.yaml': serviceEntry('shoe') });
    const from = recorder.count;
    await rename(dir, `${dir}.away`);
    await recorder.next((e) => e.type === 'status' && e.state === 'stale', from);
    const lost = recorder.count;
    // The files keep their times and sizes: the rescans find each as it was read before.
    await rename(`${dir}.away`, dir);
    const back = await recorder.next((e) => e.type === 'status' && e.state === 'synced', lost);
    assert.equal(back.type, 'status');
    assert.ok(
      recorder.events.slice(lost).every((e) => e.type !== 'snapshot'),
      'the unchanged state is not served again',
    );
  });

  it('serves the later of two definitions in one file, and the other once they swap places', async () => {
    const one = serviceEntry('cart', 'one.example.com');
    const two = serviceEntry('cart', 'two.example.com');
    const { dir, recorder, first } = await start({ 'a.yaml': `${one}---\n${two}` });
    const host = (snapshot: SourceSnapshotEvent): string =>
      Buffer.from(snapshot.resources.at(0)?.body ?? []).toString('latin1');
    assert.match(host(first), /two\.example\.com/);
    const from = recorder.count;
    // The same documents, the same size: only their order tells what is served.
    await writeFile(path.join(dir, 'a.yaml'), `${two}---\n${one}`);
    const next = (await recorder.next(
      (e) => e.type === 'snapshot' && /one\.example\.com/.test(host(e)),
      from,
    )) as SourceSnapshotEvent;
    assert.equal(next.resources.length, 1);
  });

  it('serves the objects of an edited file that did not change as the instances it served before', async () => {
    const docs = (host: string): string =>
      [serviceEntry('cart'), serviceEntry('shoe', host), serviceEntry('sock')].join('---\n');
    const { dir, recorder, first } = await start({ 'a.yaml': docs('shoe.example.com') });
    const from = recorder.count;
    await writeFile(path.join(dir, 'a.yaml'), docs('boot.example.com'));
    const next = (await recorder.next((e) => e.type === 'snapshot', from)) as SourceSnapshotEvent;
    const byName = (s: SourceSnapshotEvent, name: string) => [...s.resources].find((r) => r.name === name);
    assert.equal(byName(next, 'cart'), byName(first, 'cart'));
    assert.equal(byName(next, 'sock'), byName(first, 'sock'));
    assert.notEqual(byName(next, 'shoe')?.version, byName(first, 'shoe')?.version);
  });

  it('never serves a file caught between two writes of a process writing it in place', async (t) => {
    const count = 12;
    const all = Array.from({ length: count }, (_, j) => `se-${j}`).sort();
    const dir = path.join(root, `case-${++counter}`);
    await mkdir(dir);
    const file = path.join(dir, 'a.yaml');
    // Started in the writer's first pause: its first state waits for the whole file.
    const firstRound = rewriteInTwoWrites(file, { count, split: 6, rounds: 1, pauseMs: 50, gapMs: 0 });
    await firstRound.firstWrite;
    // Rescans every 5 ms look at the file in each pause; the settle window outlasts the pause by
    // 100 ms, for a writer the machine's load keeps waiting.
    const { recorder, first } = await start({}, { path: file, rescanMs: 5, settleMs: 150 });
    await firstRound.done;
    assert.deepEqual(names(first), all, 'the first state');
    const from = recorder.count;
    const rounds = 8;
    await rewriteInTwoWrites(file, { count, split: 6, rounds, pauseMs: 30, gapMs: 200 }).done;
    const last = `se-0.v${rounds - 1}.example.com`;
    const final = (await recorder.next(
      (e) =>
        e.type === 'snapshot' &&
        [...e.resources].some((r) => r.name === 'se-0' && Buffer.from(r.body).includes(last)),
      from,
    )) as SourceSnapshotEvent;
    const snapshots = recorder.events.slice(from).filter((e) => e.type === 'snapshot');
    const partial = snapshots.filter((s) => names(s).length !== count);
    assert.deepEqual(
      partial.map(names),
      [],
      `${partial.length} of ${snapshots.length} snapshots lacked objects of the file`,
    );
    for (const r of final.resources) {
      assert.ok(Buffer.from(r.body).includes(`.v${rounds - 1}.`), `${r.name} is of the last round`);
    }
    // Later rounds were read as they came, not only the last one.
    const versions = new Set(
      snapshots.map((s) => /\.v(\d+)\./.exec(Buffer.from([...s.resources][0]?.body ?? []).toString())?.[1]),
    );
    assert.ok(versions.size >= rounds / 2, `rounds seen: ${[...versions].join(',')}`);
    t.diagnostic(`${snapshots.length} states served over ${rounds} rounds, ${versions.size} rounds seen`);
  });

  it('serves its first state without a file written without end once the grace period is over, and the file once it is left alone', async () => {
    const dir = path.join(root, `case-${++counter}`);
    await mkdir(dir);
    await writeFile(path.join(dir, 'other.yaml'), serviceEntry('other'));
    const busy = rewriteInTwoWrites(path.join(dir, 'busy.yaml'), {
      count: 4,
      split: 2,
      rounds: 150,
      pauseMs: 0,
      gapMs: 10,
    });
    await busy.firstWrite;
    const writing = { done: false };
    void busy.done.then(() => (writing.done = true));
    const { recorder, first } = await start({}, { path: dir, settleMs: 100, vanishGraceMs: 300 });
    assert.deepEqual(names(first), ['other'], 'the first state, without the file being written');
    assert.ok(!writing.done, 'served while the file was still being written');
    const from = recorder.count;
    await busy.done;
    const read = await recorder.next(
      (e) =>
        e.type === 'snapshot' &&
        [...e.resources].some((r) => r.name === 'se-0' && Buffer.from(r.body).includes('.v149.')),
      from,
    );
    assert.deepEqual(names(read as SourceSnapshotEvent), ['other', 'se-0', 'se-1', 'se-2', 'se-3']);
  });

  it('holds its first state for a file put off at the start of a first scan that outlasts the grace period', async () => {
    const dir = path.join(root, `case-${++counter}`);
    await mkdir(dir);
    for (let f = 0; f < 20; f++) {
      const docs = Array.from({ length: 100 }, (_, i) => serviceEntry(`f${f}-${i}`)).join('---\n');
      await writeFile(path.join(dir, `f${String(f).padStart(2, '0')}.yaml`), docs);
    }
    // Left alone past the settle window; only a.yaml is fresh when the source starts.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await writeFile(path.join(dir, 'a.yaml'), serviceEntry('fresh'));
    const { first } = await start({}, { path: dir, settleMs: 150, vanishGraceMs: 20 });
    assert.equal(first.resources.length, 2001, 'every file, the fresh one too');
    assert.ok(names(first).includes('fresh'));
  });
  it('reads again a file copied over with its size and modification time kept, as cp -p and rsync -a do', async () => {
    const { dir, recorder } = await start({ 'cart.yaml': serviceEntry('cart', 'cart-a.example.com') });
    const build = path.join(root, `build-${counter}.yaml`);
    const served = path.join(dir, 'cart.yaml');
    /** A build output of fixed time (as reproducible builds leave it) copied over the served file. */
    const copyBuild = async (host: string): Promise<void> => {
      await writeFile(build, serviceEntry('cart', host));
      await utimes(build, 1, 1);
      await copyFile(build, served);
      await utimes(served, 1, 1);
    };
    const hosting = (host: string, from: number) =>
      recorder.next(
        (e) => e.type === 'snapshot' && [...e.resources].some((r) => Buffer.from(r.body).includes(host)),
        from,
        5_000,
      );
    let from = recorder.count;
    await copyBuild('cart-b.example.com');
    await hosting('cart-b.example.com', from);
    from = recorder.count;
    // Same length, same time, same inode: only its status-change time tells it was written.
    await copyBuild('cart-c.example.com');
    await hosting('cart-c.example.com', from);
  });

  it('follows a single-file source updated by renaming a new copy over it, edit after edit', async () => {
    const dir = path.join(root, `case-${++counter}`);
    await mkdir(dir);
    const file = path.join(dir, 'mesh.yaml');
    await writeFile(file, serviceEntry('v0'));
    // Rescans far apart: only file-system events can bring the edits in time.
    const recorder = new SourceEventRecorder(
      new FileSource({ name: 'local', path: file, defaultNamespace: 'default', rescanMs: 60_000 }).events$,
    );
    running.push(recorder);
    await snapshotWith(recorder, 'v0', 0);
    for (let i = 1; i <= 3; i++) {
      const from = recorder.count;
      await writeFile(`${file}.tmp`, serviceEntry(`v${i}`));
      await rename(`${file}.tmp`, file);
      const next = await snapshotWith(recorder, `v${i}`, from);
      assert.deepEqual(names(next), [`v${i}`]);
    }
  });
});
