import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LatestOnlyWriter } from '../../src/core/latest-only-writer.js';

describe('LatestOnlyWriter', () => {
  it('writes one value at a time, and of those handed in meanwhile only the latest', async () => {
    const written: number[] = [];
    let running = 0;
    let most = 0;
    const writer = new LatestOnlyWriter(async (value: number) => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 5));
      written.push(value);
      running--;
    });
    writer.write(1);
    writer.write(2);
    writer.write(3);
    await writer.flushed();
    assert.deepEqual(written, [1, 3]);
    assert.equal(most, 1, 'never two writes at once');
    writer.write(4);
    await writer.flushed();
    assert.deepEqual(written, [1, 3, 4], 'writes again once idle');
  });
});
