import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, readlink, rename, rm, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { pino } from 'pino';
import type { SourceRecord } from '../../src/merge/source-record.js';
import { FileRecordStore } from '../../src/state/file-record-store.js';
import { encodeStateFile } from '../../src/state/state-file.js';
import type { ConfigResource } from '../../src/core/resource.js';
import { until } from '../support/deadline.js';
import { tempDir } from '../support/meshmux-harness.js';
import { fakeResource } from '../support/resources.js';

const log = pino({ level: 'silent' });

function record(source: string, names: string[]): SourceRecord {
  return {
    source,
    type: 'file',
    revision: names.join(','),
    savedMs: Date.now(),
    complete: true,
    answeredKinds: [],
    resources: names.map((n) => fakeResource(n)),
  };
}

const names = (n: number): string[] => Array.from({ length: n }, (_, i) => `object-${i}`);

/** `r` with the objects at `positions` replaced by new versions of themselves. */
function withChanged(r: SourceRecord, positions: readonly number[]): SourceRecord {
  const at = new Set(positions);
  const resources = [...r.resources].map((x, i): ConfigResource =>
    at.has(i) ? fakeResource(x.name, { body: `${x.name}-${r.revision.length}-${i}-${Math.random()}` }) : x,
  );
  return { ...r, revision: `${r.revision}+`, resources };
}

/** What a record holds, comparable across a round trip through bytes. */
const contentOf = (r: SourceRecord | undefined): string[] =>
  r === undefined ? [] : [r.revision, ...[...r.resources].map((x) => `${x.name} ${x.version}`)];

/** A store that writes at once, and a wait for its `n`th write; `onBytes` hears each write's size. */
async function countingStore(
  dir: string,
  onBytes?: (bytes: number) => void,
): Promise<{ store: FileRecordStore; written: (n: number) => Promise<void> }> {
  let writes = 0;
  const { store } = await FileRecordStore.open({
    dir,
    log,
    delayMs: 1,
    hooks: {
      onWrite: (_source, bytes) => {
        writes++;
        onBytes?.(bytes);
      },
    },
  });
  const written = (n: number): Promise<void> => until(() => writes >= n, 5_000, `write ${n}`);
  return { store, written };
}

/** How many of this process's open files are `file`, as it is or since removed (Linux's `/proc`). */
async function openCopies(file: string): Promise<number> {
  const fds = await readdir('/proc/self/fd');
  const targets = await Promise.all(fds.map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')));
  return targets.filter((t) => t === file || t === `${file} (deleted)`).length;
}

describe('FileRecordStore', () => {
  it('writes a record of several slices, a reused buffer at a time, byte for byte the encoded state file', async () => {
    const t = await tempDir();
    try {
      const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 5 });
      const big = record(
        'big',
        Array.from({ length: 7_001 }, (_, i) => `object-${i}`),
      );
      void store.changed('big', () => big);
      await store.close();
      const written = await readFile(path.join(t.dir, 'big.state'));
      assert.ok(written.equals(Buffer.concat(await encodeStateFile(big))));
      const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      const names = [...(loaded.records.get('big')?.resources ?? [])].map((r) => r.name);
      assert.equal(names.length, 7_001);
      assert.equal(names[6_999], 'object-6999');
      await again.close();
    } finally {
      await t.dispose();
    }
  });

  it('writes the latest record of a burst of changes once, and reads it back at the next open', async () => {
    const t = await tempDir();
    try {
      const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 20 });
      let reads = 0;
      for (const n of ['a', 'a,b', 'a,b,c']) {
        void store.changed('files', () => {
          reads++;
          return record('files', n.split(','));
        });
      }
      await store.close();
      assert.equal(reads, 1, 'one write for the burst');
      const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      assert.deepEqual(
        [...(loaded.records.get('files')?.resources ?? [])].map((r) => r.name),
        ['a', 'b', 'c'],
      );
      assert.deepEqual(loaded.problems, []);
      await again.close();
    } finally {
      await t.dispose();
    }
  });

  it('appends a change of a few objects to the journal, the state file as it was, and reads the latest back', async () => {
    const t = await tempDir();
    try {
      const { store, written } = await countingStore(t.dir);
      const first = record('mesh', names(300));
      void store.changed('mesh', () => first);
      await written(1);
      const second = withChanged(first, [7, 200]);
      void store.changed('mesh', () => second);
      await store.close();
      assert.ok(
        (await readFile(path.join(t.dir, 'mesh.state'))).equals(Buffer.concat(await encodeStateFile(first))),
      );
      const journal = await readFile(path.join(t.dir, 'mesh.journal'));
      const state = (await readFile(path.join(t.dir, 'mesh.state'))).byteLength;
      // Two objects and the record's fields (its revision names all 300 here), not 300 objects.
      assert.ok(journal.byteLength < state / 4, `journal ${journal.byteLength} bytes, state file ${state}`);
      const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      assert.deepEqual(contentOf(loaded.records.get('mesh')), contentOf(second));
      assert.deepEqual(loaded.problems, []);
      await again.close();
    } finally {
      await t.dispose();
    }
  });

  it(
    "appends a source's changes through one open journal, closed when it is emptied, the source removed or the store closed",
    {
      skip: process.platform !== 'linux' && 'reads /proc/self/fd',
    },
    async () => {
      const t = await tempDir();
      // The store's timers do not keep a process alive; a server's listeners do, and this here.
      const alive = setInterval(() => undefined, 1_000);
      try {
        const journal = path.join(t.dir, 'mesh.journal');
        const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1 });
        const first = record('mesh', names(300));
        await store.changed('mesh', () => first);
        assert.equal(await openCopies(journal), 0, 'no journal before the first change');
        let current = first;
        for (let i = 0; i < 3; i++) {
          current = withChanged(current, [i * 11]);
          const next = current;
          await store.changed('mesh', () => next);
          // Before, each entry opened the journal and closed it again.
          assert.equal(await openCopies(journal), 1, `after entry ${i + 1}`);
        }
        // A record with a held update is written whole, which empties the journal.
        const held: SourceRecord = {
          ...withChanged(current, [5]),
          held: { reason: 'empty', sinceMs: 5, deletions: 1, total: 300, resources: [], revision: 'h' },
        };
        await store.changed('mesh', () => held);
        assert.equal(await openCopies(journal), 0, 'after the whole write');
        assert.ok(!(await readdir(t.dir)).includes('mesh.journal'));
        const released = withChanged(current, [6]);
        await store.changed('mesh', () => released);
        assert.equal(await openCopies(journal), 1, 'a new journal');
        await store.close();
        assert.equal(await openCopies(journal), 0, 'after close');
        const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1 });
        assert.deepEqual(contentOf(loaded.records.get('mesh')), contentOf(released));
        await again.changed('mesh', () => released);
        const last = withChanged(released, [9]);
        await again.changed('mesh', () => last);
        assert.equal(await openCopies(journal), 1, "the reopened store's journal");
        again.removed('mesh');
        await until(async () => (await readdir(t.dir)).join() === 'lock', 5_000, 'the files removed');
        assert.equal(await openCopies(journal), 0, 'after the removal');
        await again.close();
      } finally {
        clearInterval(alive);
        await t.dispose();
      }
    },
  );

  it('writes the record whole again once the journal reaches half the state file, and empties the journal', async () => {
    const t = await tempDir();
    try {
      const sizes: number[] = [];
      const { store, written } = await countingStore(t.dir, (bytes) => sizes.push(bytes));
      let current = record('mesh', names(2_000));
      for (let i = 0; i < 120; i++) {
        if (i > 0) current = withChanged(current, [(i * 37) % 2_000, (i * 53) % 2_000]);
        const next = current;
        void store.changed('mesh', () => next);
        await written(i + 1);
      }
      await store.close();
      const whole = sizes.filter((b) => b > 100_000).length;
      assert.ok(whole >= 2, `whole writes ${whole} of ${sizes.length}: ${sizes.slice(0, 5).join(', ')}…`);
      const state = (await readFile(path.join(t.dir, 'mesh.state'))).byteLength;
      const journal = await readFile(path.join(t.dir, 'mesh.journal')).catch(() => Buffer.alloc(0));
      assert.ok(journal.byteLength <= state / 2, `journal ${journal.byteLength} bytes, state file ${state}`);
      const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      assert.deepEqual(contentOf(loaded.records.get('mesh')), contentOf(current));
      await again.close();
    } finally {
      await t.dispose();
    }
  });

  it('keeps the journal bounded under changes awaited faster than the record is written whole', async () => {
    const t = await tempDir();
    try {
      // The usual schedule: a whole record at most every second, so each awaited change is
      // appended to the journal, past its bound, until the bound of awaited changes.
      const { store } = await FileRecordStore.open({ dir: t.dir, log });
      // The store's timers do not keep a process alive; a server's listeners do, and this here.
      const alive = setInterval(() => undefined, 1_000);
      let current = record('mesh', names(2_000));
      let largest = 0;
      for (let i = 0; i < 200; i++) {
        if (i > 0) current = withChanged(current, [(i * 37) % 2_000, (i * 53) % 2_000]);
        const next = current;
        await store.changed('mesh', () => next);
        const journal = await readFile(path.join(t.dir, 'mesh.journal')).catch(() => Buffer.alloc(0));
        largest = Math.max(largest, journal.byteLength);
      }
      clearInterval(alive);
      const state = (await readFile(path.join(t.dir, 'mesh.state'))).byteLength;
      await store.close();
      assert.ok(largest <= 2 * state + 64 * 1024, `journal up to ${largest} bytes, state file ${state}`);
      const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      assert.deepEqual(contentOf(loaded.records.get('mesh')), contentOf(current));
      await again.close();
    } finally {
      await t.dispose();
    }
  });

  it('writes a record holding a held update whole, and the change that drops it to the journal', async () => {
    const t = await tempDir();
    try {
      const { store, written } = await countingStore(t.dir);
      const first = record('mesh', names(50));
      void store.changed('mesh', () => first);
      await written(1);
      const held: SourceRecord = {
        ...withChanged(first, [3]),
        held: { reason: 'empty', sinceMs: 5, deletions: 50, total: 50, resources: [], revision: 'h' },
      };
      void store.changed('mesh', () => held);
      await written(2);
      assert.ok(
        (await readFile(path.join(t.dir, 'mesh.state'))).equals(Buffer.concat(await encodeStateFile(held))),
      );
      const released = withChanged(first, [4]);
      void store.changed('mesh', () => released);
      await store.close();
      const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      assert.equal(loaded.records.get('mesh')?.held, undefined);
      assert.deepEqual(contentOf(loaded.records.get('mesh')), contentOf(released));
      await again.close();
    } finally {
      await t.dispose();
    }
  });

  it('restores a record written by a process killed while it appended, as one it wrote', async () => {
    const t = await tempDir();
    const script = `
      const [storeUrl, resourcesUrl, dir] = process.argv.slice(1);
      const { FileRecordStore } = await import(storeUrl);
      const { fakeResource } = await import(resourcesUrl);
      const { pino } = await import('pino');
      let writes = 0;
      const { store } = await FileRecordStore.open({
        dir, log: pino({ level: 'silent' }), delayMs: 0,
        hooks: { onWrite: () => { writes++; process.stdout.write('wrote ' + writes + '\\n'); } },
      });
      let resources = Array.from({ length: 3000 }, (_, i) => fakeResource('obj-' + i));
      for (let n = 1; ; n++) {
        const i = (n * 7919) % resources.length;
        resources = resources.map((r, k) => (k === i ? fakeResource(r.name, { body: 'v' + n }) : r));
        const rec = { source: 'mesh', type: 'file', revision: 'r' + n, savedMs: n, complete: true, answeredKinds: [], resources };
        store.changed('mesh', () => rec);
        while (writes < n) await new Promise((r) => setImmediate(r));
      }
    `;
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        script,
        new URL('../../src/state/file-record-store.js', import.meta.url).href,
        new URL('../support/resources.js', import.meta.url).href,
        t.dir,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      let acknowledged = 0;
      child.stdout.on('data', (d: Buffer) => {
        for (const m of d.toString().matchAll(/wrote (\d+)/g)) acknowledged = Number(m[1]);
      });
      await until(() => acknowledged >= 40, 20_000, '40 writes by the child');
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const { store, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      const restored = loaded.records.get('mesh');
      const n = Number(restored?.revision.slice(1));
      assert.ok(
        n >= acknowledged && n <= acknowledged + 1,
        `restored r${n}, the child had written r${acknowledged}`,
      );
      // The restored objects are exactly those of that record: one object changed per revision.
      let resources = Array.from({ length: 3000 }, (_, i) => fakeResource(`obj-${i}`));
      for (let k = 1; k <= n; k++) {
        const i = (k * 7919) % resources.length;
        resources = resources.map((r, j) => (j === i ? fakeResource(r.name, { body: `v${k}` }) : r));
      }
      assert.deepEqual(
        [...(restored?.resources ?? [])].map((r) => r.version),
        resources.map((r) => r.version),
      );
      assert.deepEqual(loaded.problems, []);
      await store.close();
    } finally {
      child.kill('SIGKILL');
      await t.dispose();
    }
  });

  it('ignores a corrupt file and one holding another source, naming each, and keeps the others', async () => {
    const t = await tempDir();
    try {
      const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1 });
      void store.changed('good', () => record('good', ['x']));
      void store.changed('bad', () => record('bad', ['y']));
      void store.changed('other', () => record('other', ['z']));
      await store.close();
      const bad = path.join(t.dir, 'bad.state');
      const bytes = await readFile(bad);
      bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 1;
      await writeFile(bad, bytes);
      await writeFile(path.join(t.dir, 'renamed.state'), await readFile(path.join(t.dir, 'other.state')));
      const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      assert.deepEqual([...loaded.records.keys()].sort(), ['good', 'other']);
      const problems = loaded.problems.map((p) => `${path.basename(p.location.file ?? '')}: ${p.message}`);
      assert.equal(problems.length, 2, problems.join('\n'));
      assert.match(problems[0] ?? '', /^bad\.state: checksum mismatch/);
      assert.match(problems[1] ?? '', /^renamed\.state: holds the state of source "other"/);
      await again.close();
    } finally {
      await t.dispose();
    }
  });

  it('keeps no file open of a state file it ignored as corrupt', async () => {
    const t = await tempDir();
    try {
      const { store, written } = await countingStore(t.dir);
      void store.changed('bad', () => record('bad', ['y']));
      await written(1);
      await store.close();
      const bad = path.join(t.dir, 'bad.state');
      const bytes = await readFile(bad);
      bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 1;
      await writeFile(bad, bytes);
      const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      assert.equal(loaded.problems.length, 1);
      assert.equal(await openCopies(bad), 0, 'bad.state still open');
      await again.close();
    } finally {
      await t.dispose();
    }
  });

  it('removes the file of a source that left the configuration, and leftovers of an interrupted write', async () => {
    const t = await tempDir();
    try {
      const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1 });
      void store.changed('gone', () => record('gone', ['x']));
      await store.close();
      await writeFile(path.join(t.dir, 'gone.state.123.tmp'), 'half a write');
      const { store: again } = await FileRecordStore.open({ dir: t.dir, log });
      again.removed('gone');
      await until(async () => !(await readdir(t.dir)).includes('gone.state'), 5_000, 'gone.state removed');
      assert.deepEqual((await readdir(t.dir)).sort(), ['lock']);
      await again.close();
    } finally {
      await t.dispose();
    }
  });

  it('keeps the file of a source removed while it is written removed', async () => {
    const t = await tempDir();
    try {
      const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1, retryMs: 50 });
      const big = record('gone', names(30_000));
      void store.changed('gone', () => {
        // Removed as the write begins: before, the file came back once the write finished.
        setImmediate(() => store.removed('gone'));
        return big;
      });
      await until(async () => !(await readdir(t.dir)).includes('gone.state'), 5_000, 'no gone.state');
      await new Promise((r) => setTimeout(r, 1_000));
      assert.deepEqual((await readdir(t.dir)).sort(), ['lock']);
      await store.close();
    } finally {
      await t.dispose();
    }
  });

  it('restores a source removed while it was written and configured again, later or at once', async () => {
    for (const when of ['later', 'at once'] as const) {
      const t = await tempDir();
      try {
        const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1, retryMs: 50 });
        // Short revisions: the change of one object then goes to the journal.
        const big = { ...record('s', names(30_000)), revision: 'r1' };
        const again = { ...withChanged(big, [5]), revision: 'r2' };
        void store.changed('s', () => {
          setImmediate(() => {
            store.removed('s');
            if (when === 'at once') void store.changed('s', () => again);
          });
          return big;
        });
        if (when === 'later') {
          // Past the write (some 100 ms) and the removal after it.
          await new Promise((r) => setTimeout(r, 500));
          void store.changed('s', () => again);
        }
        await new Promise((r) => setTimeout(r, 1_500));
        const files = (await readdir(t.dir)).sort();
        await store.close();
        // Before, the folder held its journal alone: the record was lost at the next start.
        const reopened = await FileRecordStore.open({ dir: t.dir, log });
        await reopened.store.close();
        assert.deepEqual(
          contentOf(reopened.loaded.records.get('s')),
          contentOf(again),
          `configured again ${when}: the folder holds ${files.join(' ')}`,
        );
      } finally {
        await t.dispose();
      }
    }
  });

  it('writes no source removed while another is written', async () => {
    const t = await tempDir();
    try {
      const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1, retryMs: 50 });
      void store.changed('a', () => {
        setImmediate(() => store.removed('b'));
        return record('a', names(30_000));
      });
      void store.changed('b', () => record('b', names(3)));
      await new Promise((r) => setTimeout(r, 1_500));
      const files = (await readdir(t.dir)).sort();
      await store.close();
      assert.deepEqual(files, ['a.state', 'lock']);
    } finally {
      await t.dispose();
    }
  });

  it('refuses a folder another live process has locked', async () => {
    const t = await tempDir();
    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
    try {
      await writeFile(path.join(t.dir, 'lock'), `${other.pid}\n`);
      await assert.rejects(
        FileRecordStore.open({ dir: t.dir, log }),
        new RegExp(`in use by process ${other.pid}`),
      );
      other.kill();
      await new Promise((r) => other.once('exit', r));
      const { store } = await FileRecordStore.open({ dir: t.dir, log });
      assert.equal((await readFile(path.join(t.dir, 'lock'), 'utf8')).trim(), String(process.pid));
      await store.close();
    } finally {
      other.kill();
      await t.dispose();
    }
  });

  it('restores a record and its journal from a read-only folder, and logs the lock it cannot write once', async (t: TestContext) => {
    const d = await tempDir();
    const dir = path.join(d.dir, 'state');
    await mkdir(dir);
    const mount = (args: string[]): string | undefined => {
      const r = spawnSync('mount', args, { encoding: 'utf8' });
      return r.status === 0
        ? undefined
        : `mount ${args.join(' ')}: ${r.stderr || r.error?.message || 'failed'}`;
    };
    const failure = mount(['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', dir]);
    if (failure !== undefined) {
      if (process.env['CI'] !== undefined)
        assert.fail(`CI must be able to mount a tmpfs (run as root): ${failure}`);
      t.skip(`needs root to mount a tmpfs: ${failure}`);
      await d.dispose();
      return;
    }
    // The store's timers do not hold the process open; this does while the test awaits them.
    const alive = setInterval(() => undefined, 1_000);
    try {
      const { store, written } = await countingStore(dir);
      const first = record('mesh', names(300));
      void store.changed('mesh', () => first);
      await written(1);
      const second = withChanged(first, [7, 200]);
      void store.changed('mesh', () => second);
      await store.close();
      assert.ok((await readdir(dir)).includes('mesh.journal'));
      const remounted = mount(['-o', 'remount,ro', dir]);
      assert.equal(remounted, undefined, remounted);
      const lines: string[] = [];
      const logged = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
      const { store: again, loaded } = await FileRecordStore.open({ dir, log: logged, checkMs: 20 });
      assert.deepEqual(loaded.problems, []);
      assert.deepEqual(contentOf(loaded.records.get('mesh')), contentOf(second));
      await new Promise((r) => setTimeout(r, 300));
      await again.close();
      const checks = lines.filter((l) => l.includes('could not put back'));
      assert.ok(checks.length <= 1, checks.join(''));
    } finally {
      clearInterval(alive);
      spawnSync('umount', [dir]);
      await d.dispose();
    }
  });

  describe('files removed from outside', () => {
    // The store's timers do not hold the process open; this does while these tests await them.
    let alive: NodeJS.Timeout | undefined;
    before(() => void (alive = setInterval(() => undefined, 1_000)));
    after(() => clearInterval(alive));

    it('writes back a state file and its journal removed while running, and the next open reads the latest record', async () => {
      const t = await tempDir();
      try {
        let writes = 0;
        const { store } = await FileRecordStore.open({
          dir: t.dir,
          log,
          delayMs: 1,
          checkMs: 20,
          hooks: { onWrite: () => void writes++ },
        });
        const first = record('mesh', names(300));
        await store.changed('mesh', () => first);
        const second = withChanged(first, [7, 200]);
        await store.changed('mesh', () => second);
        const state = path.join(t.dir, 'mesh.state');
        const journal = path.join(t.dir, 'mesh.journal');
        const before = [await readFile(state), await readFile(journal)];
        await unlink(state);
        await unlink(journal);
        await until(
          () => existsSync(state) && existsSync(journal),
          5_000,
          'mesh.state and mesh.journal written back',
        );
        assert.ok((await readFile(state)).equals(before[0] ?? Buffer.alloc(0)));
        assert.ok((await readFile(journal)).equals(before[1] ?? Buffer.alloc(0)));
        assert.equal(writes, 2, 'written back from the open files, not written anew');
        // A later change goes to the journal written back, and is read back with the rest.
        const third = withChanged(second, [9]);
        await store.changed('mesh', () => third);
        await store.close();
        const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
        assert.deepEqual(contentOf(loaded.records.get('mesh')), contentOf(third));
        assert.deepEqual(loaded.problems, []);
        await again.close();
      } finally {
        await t.dispose();
      }
    });

    it('writes back a state file it only read at its start, a file put in its place, and a whole folder removed', async () => {
      const t = await tempDir();
      try {
        const { store: first } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1 });
        const mesh = record('mesh', names(50));
        const other = record('other', names(5));
        await first.changed('mesh', () => mesh);
        await first.changed('other', () => other);
        await first.close();

        const { store } = await FileRecordStore.open({ dir: t.dir, log, checkMs: 20 });
        const state = path.join(t.dir, 'mesh.state');
        const written = await readFile(state);
        await unlink(state);
        await until(() => existsSync(state), 5_000, 'mesh.state written back');
        assert.ok((await readFile(state)).equals(written));

        // Another file renamed over it (as a copy or an editor puts one in place).
        await writeFile(`${state}.other`, 'not a state file');
        await rename(`${state}.other`, state);
        await until(
          async () => (await readFile(state)).equals(written),
          5_000,
          'mesh.state put back in place of another file',
        );

        // Moved away whole, then removed: a removal file by file would race the check putting back.
        await rename(t.dir, `${t.dir}.gone`);
        await rm(`${t.dir}.gone`, { recursive: true, force: true });
        await until(
          () => existsSync(state) && existsSync(path.join(t.dir, 'other.state')),
          5_000,
          'the folder and both state files written back',
        );
        assert.equal((await readFile(path.join(t.dir, 'lock'), 'utf8')).trim(), String(process.pid));
        await store.close();
        const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
        assert.deepEqual(contentOf(loaded.records.get('mesh')), contentOf(mesh));
        assert.deepEqual(contentOf(loaded.records.get('other')), contentOf(other));
        await again.close();
      } finally {
        await t.dispose();
      }
    });

    it('writes back the files of the other sources when one cannot be put back', async () => {
      const t = await tempDir();
      try {
        const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1, checkMs: 20 });
        await store.changed('first', () => record('first', names(3)));
        await store.changed('second', () => record('second', names(3)));
        const first = path.join(t.dir, 'first.state');
        const second = path.join(t.dir, 'second.state');
        const written = await readFile(second);
        // A folder in the place of one file: nothing can be renamed over it.
        await unlink(first);
        await mkdir(path.join(first, 'inside'), { recursive: true });
        await unlink(second);
        await until(() => existsSync(second), 5_000, 'second.state written back');
        assert.ok((await readFile(second)).equals(written));
        await rm(first, { recursive: true });
        await until(() => existsSync(first), 5_000, 'first.state written back once it can be');
        await store.close();
        assert.deepEqual((await readdir(t.dir)).sort(), ['first.state', 'second.state']);
      } finally {
        await t.dispose();
      }
    });

    it('writes back no file of a source removed from the configuration', async () => {
      const t = await tempDir();
      try {
        const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1, checkMs: 20 });
        await store.changed('gone', () => record('gone', names(3)));
        store.removed('gone');
        await until(() => !existsSync(path.join(t.dir, 'gone.state')), 5_000, 'gone.state removed');
        await new Promise((r) => setTimeout(r, 200));
        assert.equal(existsSync(path.join(t.dir, 'gone.state')), false);
        await store.close();
      } finally {
        await t.dispose();
      }
    });
  });
});
