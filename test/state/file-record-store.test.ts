import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { SourceRecord } from '../../src/merge/source-record.js';
import { FileRecordStore } from '../../src/state/file-record-store.js';
import { encodeStateFile } from '../../src/state/state-file.js';
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

/** Waits until `check` holds, polling; fails naming `what` after `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
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
      store.changed('big', () => big);
      await store.close();
      const written = await readFile(path.join(t.dir, 'big.state'));
      assert.ok(written.equals(Buffer.concat(await encodeStateFile(big))));
      const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      const names = loaded.records.get('big')?.resources.map((r) => r.name) ?? [];
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
        store.changed('files', () => {
          reads++;
          return record('files', n.split(','));
        });
      }
      await store.close();
      assert.equal(reads, 1, 'one write for the burst');
      const { store: again, loaded } = await FileRecordStore.open({ dir: t.dir, log });
      assert.deepEqual(
        loaded.records.get('files')?.resources.map((r) => r.name),
        ['a', 'b', 'c'],
      );
      assert.deepEqual(loaded.problems, []);
      await again.close();
    } finally {
      await t.dispose();
    }
  });

  it('ignores a corrupt file and one holding another source, naming each, and keeps the others', async () => {
    const t = await tempDir();
    try {
      const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1 });
      store.changed('good', () => record('good', ['x']));
      store.changed('bad', () => record('bad', ['y']));
      store.changed('other', () => record('other', ['z']));
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

  it('removes the file of a source that left the configuration, and leftovers of an interrupted write', async () => {
    const t = await tempDir();
    try {
      const { store } = await FileRecordStore.open({ dir: t.dir, log, delayMs: 1 });
      store.changed('gone', () => record('gone', ['x']));
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
});
