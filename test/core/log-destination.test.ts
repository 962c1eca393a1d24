import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync, readSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { LogDestination } from '../../src/core/log-destination.js';

/** A real pipe (a FIFO) nobody reads yet: its writer end never blocks, a full pipe answers EAGAIN. */
async function withPipe(
  body: (pipe: { writer: number; readAll: () => string }) => Promise<void> | void,
): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'log-destination-'));
  const fifo = path.join(dir, 'out');
  execFileSync('mkfifo', [fifo]);
  const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writer = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  const buffer = Buffer.alloc(1024 * 1024);
  const readAll = (): string => {
    let text = '';
    for (;;) {
      try {
        const n = readSync(reader, buffer);
        if (n === 0) return text;
        text += buffer.toString('utf8', 0, n);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return text;
        throw err;
      }
    }
  };
  try {
    await body({ writer, readAll });
  } finally {
    closeSync(writer);
    closeSync(reader);
    await rm(dir, { recursive: true, force: true });
  }
}

const line = (i: number): string => `${JSON.stringify({ i, pad: 'x'.repeat(90) })}\n`;

function until(done: () => boolean, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + 10_000;
    const poll = (): void => {
      if (done()) resolve();
      else if (Date.now() > deadline) reject(new Error(`not within 10 s: ${what}`));
      else setTimeout(poll, 5);
    };
    poll();
  });
}

describe('LogDestination', () => {
  it('never waits for a full pipe: it holds lines up to its bound, drops and counts the rest, and says how many once the pipe takes lines again', async () => {
    await withPipe(async ({ writer, readAll }) => {
      const reports: number[] = [];
      const destination = new LogDestination(writer, {
        maxBytes: 64 * 1024,
        retryMs: 5,
        onDrained: (dropped) => reports.push(dropped),
      });
      const lines = 5_000; // about 500 KB: the pipe's 64 KiB, the bound's 64 KiB, the rest dropped
      const started = performance.now();
      for (let i = 0; i < lines; i++) destination.write(line(i));
      // Each write only queues or drops: no write waited for the pipe.
      assert.ok(performance.now() - started < 2_000);
      await until(() => destination.dropped > 0, 'lines dropped');
      assert.deepEqual(reports, []);

      let text = '';
      await until(() => {
        text += readAll();
        return destination.idle && reports.length > 0;
      }, 'the backlog written and the drop reported');
      const received = text.split('\n').filter((l) => l !== '');
      assert.equal(received.length + destination.dropped, lines);
      assert.deepEqual(reports, [destination.dropped]);
      // What was kept came out whole and in order: the first lines, then none torn.
      const numbers = received.map((l) => (JSON.parse(l) as { i: number }).i);
      assert.deepEqual(
        numbers,
        numbers.map((_, k) => k),
      );
    });
  });

  it('writes what it holds at exit within its deadline, and gives up on a pipe that stays full', async () => {
    await withPipe(({ writer, readAll }) => {
      const destination = new LogDestination(writer, { maxBytes: 1024 * 1024, retryMs: 5 });
      for (let i = 0; i < 2_000; i++) destination.write(line(i));
      // About 200 KB: more than the pipe holds, nobody reads.
      const started = performance.now();
      assert.equal(destination.flushSync(200), false);
      const tookMs = performance.now() - started;
      assert.ok(tookMs < 2_000, `flushSync took ${tookMs} ms`);

      readAll();
      const small = new LogDestination(writer, { retryMs: 5 });
      small.write(line(1));
      small.write(line(2));
      assert.equal(small.flushSync(200), true);
    });
  });
});
