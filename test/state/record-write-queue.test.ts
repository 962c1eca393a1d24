import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import { pino } from 'pino';
import type { SourceRecord } from '../../src/merge/source-record.js';
import { RecordWriteQueue } from '../../src/state/record-write-queue.js';
import { until } from '../support/deadline.js';
import { fakeResource } from '../support/resources.js';

const log = pino({ level: 'silent' });

function record(revision: string): SourceRecord {
  return {
    source: 'mesh',
    type: 'xds',
    revision,
    savedMs: Date.now(),
    complete: true,
    answeredKinds: [],
    resources: [fakeResource('a')],
  };
}

describe('RecordWriteQueue', () => {
  it('goes on writing changes on schedule after the wall clock is stepped back an hour', async () => {
    const written: string[] = [];
    const queue = new RecordWriteQueue(
      {
        write: (_source, r) => {
          written.push(r.revision);
          return Promise.resolve({ bytes: 1 });
        },
        where: () => 'mesh',
      },
      { log, delayMs: 20 },
    );
    const alive = setInterval(() => undefined, 1_000);
    try {
      void queue.changed('mesh', () => record('first'));
      await until(() => written.includes('first'), 5_000, 'the first record written');
      const wall = Date.now();
      mock.method(Date, 'now', () => wall - 3_600_000);
      void queue.changed('mesh', () => record('second'));
      await until(() => written.includes('second'), 5_000, 'the change after the step written', {
        describe: () => JSON.stringify(written),
      });
      assert.deepEqual(written, ['first', 'second']);
    } finally {
      mock.restoreAll();
      clearInterval(alive);
      await queue.close();
    }
  });

  it('with quietDelayMs, writes the first change after a quiet spell soon, and the rest of its burst once', async () => {
    const written: Array<{ revision: string; atMs: number }> = [];
    const queue = new RecordWriteQueue(
      {
        write: (_source, r) => {
          written.push({ revision: r.revision, atMs: performance.now() });
          return Promise.resolve({ bytes: 1 });
        },
        where: () => 'mesh',
      },
      { log, delayMs: 3_000, quietDelayMs: 50 },
    );
    try {
      // Before the delay is out: without quietDelayMs it is written after 3 s.
      void queue.changed('mesh', () => record('first'));
      await until(() => written.length === 1, 2_000, 'the first change written');
      // The burst that follows, within the spacing: one write of its last record, after it.
      for (const revision of ['second', 'third', 'fourth'])
        void queue.changed('mesh', () => record(revision));
      await until(() => written.length === 2, 8_000, 'the rest of the burst written');
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual(
        written.map((w) => w.revision),
        ['first', 'fourth'],
      );
      assert.ok((written[1]?.atMs ?? 0) - (written[0]?.atMs ?? 0) >= 2_900, 'the rest after the spacing');
    } finally {
      await queue.close();
    }
  });

  it('with quietDelayMs, writes a quiet source soon while another source waits out its spacing', async () => {
    const written: string[] = [];
    const queue = new RecordWriteQueue(
      {
        write: (source) => {
          written.push(source);
          return Promise.resolve({ bytes: 1 });
        },
        where: (source) => source,
      },
      { log, delayMs: 3_000, quietDelayMs: 50 },
    );
    try {
      void queue.changed('busy', () => record('1'));
      await until(() => written.length === 1, 2_000, 'the busy source written once');
      // Its next change waits for its spacing (3 s); the quiet one's must not wait with it.
      void queue.changed('busy', () => record('2'));
      void queue.changed('quiet', () => record('1'));
      await until(() => written.includes('quiet'), 2_000, 'the quiet source written', {
        describe: () => JSON.stringify(written),
      });
      assert.deepEqual(written, ['busy', 'quiet']);
    } finally {
      await queue.close();
    }
  });
});
