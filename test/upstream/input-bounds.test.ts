import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import { FileSource } from '../../src/upstream/file/file-source.js';
import { GitSource } from '../../src/upstream/git/git-source.js';
import { TestRepo, serviceEntry } from '../support/git-fixtures.js';
import { tempDir } from '../support/meshmux-harness.js';
import { SourceEventRecorder } from '../support/source-event-recorder.js';

function names(snapshot: SourceSnapshotEvent): string[] {
  return [...snapshot.resources].map((r) => r.name).sort();
}

/** Bytes of `text` with one byte that is not UTF-8 put at the start of `line` (1-based). */
function withBadByteOnLine(text: string, line: number): Buffer {
  const lines = text.split('\n');
  lines[line - 1] = `\uFFFF${lines[line - 1] ?? ''}`;
  const bytes = Buffer.from(lines.join('\n'), 'utf8');
  // U+FFFF encodes as EF BF BF; EF BF FF is not UTF-8.
  const at = bytes.indexOf(Buffer.from([0xef, 0xbf, 0xbf]));
  bytes[at + 2] = 0xff;
  return bytes;
}

describe('bounded inputs', () => {
  let root: string;
  let dispose: () => Promise<void>;
  let counter = 0;
  const running: SourceEventRecorder[] = [];

  before(async () => {
    ({ dir: root, dispose } = await tempDir('meshmux-input-bounds-'));
  });
  afterEach(() => {
    for (const r of running.splice(0)) r.close();
  });
  after(async () => {
    await dispose();
  });

  async function fileSource(
    files: Record<string, string | Buffer>,
    maxFileBytes?: number,
  ): Promise<{ dir: string; recorder: SourceEventRecorder }> {
    const dir = path.join(root, `files-${++counter}`);
    await mkdir(dir);
    for (const [name, content] of Object.entries(files)) await writeFile(path.join(dir, name), content);
    const source = new FileSource({
      name: 'local',
      path: dir,
      defaultNamespace: 'default',
      rescanMs: 30,
      ...(maxFileBytes === undefined ? {} : { maxFileBytes }),
    });
    const recorder = new SourceEventRecorder(source.events$);
    running.push(recorder);
    return { dir, recorder };
  }

  it('refuses a file larger than maxFileSize with an error naming it and the cap, and keeps serving what it held', async () => {
    const { dir, recorder } = await fileSource(
      {
        'a.yaml': serviceEntry('cart', 'shop', 'cart.example.com'),
        'b.yaml': serviceEntry('ledger', 'shop', 'ledger.example.com'),
      },
      4096,
    );
    assert.deepEqual(names(await recorder.snapshot()), ['cart', 'ledger']);
    const from = recorder.count;
    const padding = `# ${'x'.repeat(200)}\n`.repeat(30);
    await writeFile(path.join(dir, 'a.yaml'), serviceEntry('cart', 'shop', 'cart.internal') + padding);
    const refused = (await recorder.next(
      (e) => e.type === 'snapshot' && e.errors.length > 0,
      from,
    )) as SourceSnapshotEvent;
    assert.equal(refused.errors.length, 1);
    assert.equal(refused.errors[0]?.code, 'LIMIT');
    assert.match(
      refused.errors[0]?.describe() ?? '',
      /a\.yaml: file too large: \d+ bytes is more than the limit of 4 KiB \(maxFileSize\)/,
    );
    assert.deepEqual(names(refused), ['cart', 'ledger']);
    const cart = [...refused.resources].find((r) => r.name === 'cart');
    assert.ok(
      cart !== undefined && Buffer.from(cart.body).includes('cart.example.com'),
      'the old cart is served',
    );

    // Back under the cap: read again.
    const fixed = recorder.count;
    await writeFile(path.join(dir, 'a.yaml'), serviceEntry('cart', 'shop', 'cart.internal'));
    const read = (await recorder.next(
      (e) => e.type === 'snapshot' && e.errors.length === 0,
      fixed,
    )) as SourceSnapshotEvent;
    const newCart = [...read.resources].find((r) => r.name === 'cart');
    assert.ok(newCart !== undefined && Buffer.from(newCart.body).includes('cart.internal'));
  });

  it('refuses a file that is not UTF-8 with the line and column of the first bad byte, and keeps what it held', async () => {
    const good = serviceEntry('cart', 'shop', 'cart.example.com');
    const { dir, recorder } = await fileSource({ 'a.yaml': good });
    assert.deepEqual(names(await recorder.snapshot()), ['cart']);
    const from = recorder.count;
    await writeFile(
      path.join(dir, 'a.yaml'),
      withBadByteOnLine(serviceEntry('cart', 'shop', 'cart.changed'), 3),
    );
    const refused = (await recorder.next(
      (e) => e.type === 'snapshot' && e.errors.length > 0,
      from,
    )) as SourceSnapshotEvent;
    assert.match(
      refused.errors[0]?.describe() ?? '',
      /a\.yaml line 3: invalid UTF-8: byte 0xef at column 1 \(byte offset \d+\)/,
    );
    const cart = [...refused.resources].find((r) => r.name === 'cart');
    assert.ok(
      cart !== undefined && Buffer.from(cart.body).includes('cart.example.com'),
      'the old cart is served',
    );
  });

  it('refuses a git blob larger than maxFileSize without reading it, and keeps what the file held', async () => {
    const repo = await TestRepo.create(root, `repo-${++counter}`);
    await repo.commitAndPush(
      {
        'a.yaml': serviceEntry('cart', 'shop', 'cart.example.com'),
        'b.yaml': serviceEntry('ledger', 'shop', 'ledger.example.com'),
      },
      'first',
    );
    const source = new GitSource({
      name: 'git',
      url: repo.fileUrl,
      ref: 'main',
      defaultNamespace: 'default',
      intervalMs: 3_600_000,
      cacheDir: path.join(root, 'cache'),
      maxFileBytes: 4096,
    });
    const recorder = new SourceEventRecorder(source.events$);
    running.push(recorder);
    assert.deepEqual(names(await recorder.snapshot()), ['cart', 'ledger']);
    const from = recorder.count;
    await repo.commitAndPush(
      {
        'a.yaml': serviceEntry('cart', 'shop', 'cart.internal') + `# ${'x'.repeat(8000)}\n`,
        'b.yaml': serviceEntry('ledger', 'shop', 'ledger.internal'),
      },
      'second',
    );
    await source.fetchNow();
    const next = (await recorder.next(
      (e) => e.type === 'snapshot' && e.errors.length > 0,
      from,
    )) as SourceSnapshotEvent;
    assert.match(
      next.errors[0]?.describe() ?? '',
      /^a\.yaml: file too large: \d+ bytes is more than the limit of 4 KiB/,
    );
    const cart = [...next.resources].find((r) => r.name === 'cart');
    const ledger = [...next.resources].find((r) => r.name === 'ledger');
    assert.ok(
      cart !== undefined && Buffer.from(cart.body).includes('cart.example.com'),
      'the old cart stays',
    );
    assert.ok(
      ledger !== undefined && Buffer.from(ledger.body).includes('ledger.internal'),
      'other files move on',
    );
  });
});
