import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { settledMemory, SETTLE, type MemoryReading } from '../../bench/settled-memory.js';

const MB = 1024 * 1024;

/** Readings of RSS in MB, one per call, the last repeated; and the time slept, in a clock of its own. */
function scripted(mbs: readonly number[]): {
  read: () => Promise<MemoryReading>;
  sleep: (ms: number) => Promise<void>;
  readonly slept: () => number;
} {
  let i = 0;
  let slept = 0;
  return {
    read: () => Promise.resolve({ rssBytes: (mbs[Math.min(i++, mbs.length - 1)] as number) * MB }),
    sleep: (ms) => {
      slept += ms;
      return Promise.resolve();
    },
    slept: () => slept,
  };
}

describe('memory once a server has settled', () => {
  it('waits for the drop V8 makes some seconds after the work, then for two readings that agree', async () => {
    // As a server read every 5 s after a sync: flat, a drop at 10 s, another at 15 s, then flat.
    const s = scripted([143.5, 143.5, 127.8, 123.8, 123.8, 123.8]);
    const { reading, afterMs } = await settledMemory(s.read, SETTLE, s.sleep);
    assert.equal(reading.rssBytes, 123.8 * MB);
    assert.equal(afterMs, 20_000);
    assert.equal(s.slept(), 20_000);
  });

  it('does not take readings that agree before the least wait as settled', async () => {
    const s = scripted([150, 150, 150, 150, 150, 150, 150]);
    const { afterMs } = await settledMemory(s.read, SETTLE, s.sleep);
    assert.equal(afterMs, SETTLE.leastMs);
  });

  it('goes on past the least wait while the memory still drops', async () => {
    const s = scripted([150, 150, 150, 150, 140, 130, 125, 125]);
    const { reading, afterMs } = await settledMemory(s.read, SETTLE, s.sleep);
    assert.equal(reading.rssBytes, 125 * MB);
    assert.equal(afterMs, 35_000);
  });

  it('gives up after the most it waits, with the last reading', async () => {
    const s = scripted(Array.from({ length: 40 }, (_, i) => 200 - 5 * i));
    const { reading, afterMs } = await settledMemory(s.read, SETTLE, s.sleep);
    assert.equal(afterMs, SETTLE.mostMs);
    assert.equal(reading.rssBytes, (200 - 5 * (SETTLE.mostMs / SETTLE.everyMs)) * MB);
  });
});
