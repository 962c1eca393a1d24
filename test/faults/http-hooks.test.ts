import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TestRepo, serviceEntry } from '../support/git-fixtures.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';

const ANNOUNCED = 1024 * 1024;
const PIECE = Buffer.alloc(64 * 1024, 0x61);

/**
 * A client that POSTs to `target`, announcing a 1 MiB body and sending `sent` bytes of it,
 * never the rest. `status` resolves to the status of the answer, or 'closed' when the connection
 * ended without one; `close` drops the connection.
 */
function slowPost(
  port: number,
  target: string,
  sent: number,
): { status: Promise<number | 'closed'>; close: () => void } {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  socket.write(
    `POST ${target} HTTP/1.1\r\nHost: meshmux\r\nContent-Type: application/json\r\nContent-Length: ${ANNOUNCED}\r\n\r\n`,
  );
  for (let left = sent; left > 0; left -= PIECE.byteLength) {
    socket.write(PIECE.subarray(0, Math.min(left, PIECE.byteLength)));
  }
  const status = new Promise<number | 'closed'>((resolve) => {
    let head = '';
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const found = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (found !== null) resolve(Number(found[1]));
    });
    socket.on('close', () => resolve('closed'));
  });
  return { status, close: () => socket.destroy() };
}

/** `promise`, or `fallback` once `ms` have passed. */
function orAfter<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(fallback), ms);
    void promise.then((value) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}

function tally(statuses: ReadonlyArray<number | string>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const s of statuses) counts[String(s)] = (counts[String(s)] ?? 0) + 1;
  return counts;
}

describe('webhooks on the public HTTP port', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;
  let port: number;
  let repo: TestRepo;

  before(async () => {
    ({ dir, dispose } = await tempDir());
    repo = await TestRepo.create(dir);
    await repo.write({ 'se.yaml': serviceEntry('a', 'shop', 'a.example.com') });
    await repo.commit('one');
    await repo.push();
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'se.yaml'), serviceEntry('b', 'shop', 'b.example.com'));
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      [
        'sources:',
        '  - {name: mesh, type: file, path: ./mesh}',
        `  - {name: open, type: git, url: '${repo.fileUrl}', interval: 1h, cacheDir: cache, webhook: {insecure: true}}`,
        `  - {name: closed, type: git, url: '${repo.fileUrl}', interval: 1h, cacheDir: cache2}`,
        '',
      ].join('\n'),
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    port = Number(new URL(meshmux.http).port);
  });

  after(async () => {
    await meshmux.kill();
    await dispose();
  });

  it('answers a webhook to no source, or to one that takes none, before reading its body', async () => {
    // Before: each body was read whole (up to 1 MiB) before the source was looked up; 3,000
    // clients sending 960 KiB each took the process from 83 MB to 1.8 GB, and got no answer.
    const rssBefore = (await meshmux.counters()).process.rssBytes;
    const targets = ['/hooks/git/no-such-source', '/hooks/file/mesh', '/hooks/git/closed'];
    const clients = Array.from({ length: 300 }, (_, i) =>
      slowPost(port, targets[i % targets.length] as string, 960 * 1024),
    );
    const statuses = await Promise.all(clients.map((c) => orAfter(c.status, 15_000, 'none')));
    const rssAfter = (await meshmux.counters()).process.rssBytes;
    for (const c of clients) c.close();
    console.log(
      `# 300 clients sending 960 KiB of 1 MiB to no webhook: ${JSON.stringify(tally(statuses))}; RSS ${Math.round(rssBefore / 2 ** 20)} -> ${Math.round(rssAfter / 2 ** 20)} MB`,
    );
    assert.deepEqual(tally(statuses), { '401': 100, '404': 200 });
  });

  it('holds at most 8 MiB of webhook bodies at once, answers 503 beyond, and cuts off a body never finished', async () => {
    const clients = Array.from({ length: 40 }, () => slowPost(port, '/hooks/git/open', 960 * 1024));
    const early = await Promise.all(clients.map((c) => orAfter(c.status, 10_000, 'pending')));
    console.log(`# 40 clients sending 960 KiB of 1 MiB to a webhook: ${JSON.stringify(tally(early))}`);
    // 38 MiB sent; at most 8 MiB of it read.
    assert.ok(
      early.filter((s) => s === 503).length >= 30,
      `answers within 10 s: ${JSON.stringify(tally(early))}`,
    );
    // Those left are cut off by the request deadline (15 s), not held for good.
    const late = await Promise.all(clients.map((c) => orAfter(c.status, 30_000, 'pending')));
    for (const c of clients) c.close();
    assert.equal(late.filter((s) => s === 'pending').length, 0, JSON.stringify(tally(late)));
  });

  it('says nothing at error level of clients that went away mid-body, and still takes a webhook', async () => {
    const from = meshmux.logs.length;
    const clients = Array.from({ length: 200 }, () => slowPost(port, '/hooks/git/open', 1024));
    // Each request reached the handler: the server holds its first KiB.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (const c of clients) c.close();
    // A later push announced: once it is fetched, the requests dropped before it are handled.
    await repo.write({ 'se2.yaml': serviceEntry('c', 'shop', 'c.example.com') });
    await repo.commit('two');
    await repo.push();
    const answer = await fetch(`${meshmux.http}/hooks/git/open`, { method: 'POST', body: '{}' });
    assert.equal(answer.status, 202);
    await meshmux.waitForLog((l) => l.msg === 'ref moved', from, 20_000, 'the fetch the webhook started');
    const errors = meshmux.logs.slice(from).filter((l) => l['level'] === 50);
    assert.deepEqual(
      errors.map((l) => l.msg),
      [],
    );
  });
});
