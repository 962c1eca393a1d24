/**
 * The full collection meshmux runs once its state is first ready, when node was started with an
 * initial old generation: the flag read from node's arguments, and the collection run once, after
 * the first ready state only, in this process (V8's collector, as meshmux asks for it).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { BehaviorSubject } from 'rxjs';
import { collectOnceReady, initialOldSpaceMb } from '../../src/core/start-collection.js';

/** A logger whose lines are kept, parsed. */
function recording(): { log: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines };
}

/** Resolves after the turns the collection waits for, and the logger's write. */
async function turns(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

const COLLECTED = 'first full collection of the heap after the start';

describe('initialOldSpaceMb', () => {
  it('reads the last --initial-old-space-size among node’s arguments, in either spelling', () => {
    assert.equal(initialOldSpaceMb([]), undefined);
    assert.equal(initialOldSpaceMb(['--max-semi-space-size=8', '--initial-old-space-size=256']), 256);
    assert.equal(initialOldSpaceMb(['--initial_old_space_size=64']), 64);
    assert.equal(initialOldSpaceMb(['--initial-old-space-size=64', '--initial-old-space-size=128']), 128);
    // Another flag that starts alike, or no size: not this one.
    assert.equal(initialOldSpaceMb(['--initial-heap-size=64', '--initial-old-space-size=']), undefined);
  });
});

describe('collectOnceReady', () => {
  it('collects once, after the first ready state, when node was given an initial old generation', async () => {
    const states = new BehaviorSubject({ ready: false });
    const { log, lines } = recording();
    const waiting = collectOnceReady(states, log, ['--initial-old-space-size=256']);
    assert.ok(waiting !== undefined);
    await turns();
    assert.equal(lines.length, 0, 'nothing before the state is ready');
    states.next({ ready: true });
    states.next({ ready: false });
    states.next({ ready: true });
    await turns();
    const collected = lines.filter((l) => l['msg'] === COLLECTED);
    assert.equal(collected.length, 1, JSON.stringify(lines));
    assert.equal(collected[0]?.['initialOldSpaceMb'], 256);
    assert.equal(typeof collected[0]?.['ms'], 'number');
    assert.ok(waiting.closed, 'it stops listening once it has collected');
  });

  it('collects when the first state it sees is ready already, and not at all without the flag', async () => {
    const { log, lines } = recording();
    collectOnceReady(new BehaviorSubject({ ready: true }), log, ['--initial-old-space-size=64']);
    assert.equal(
      collectOnceReady(new BehaviorSubject({ ready: true }), log, ['--max-semi-space-size=8']),
      undefined,
    );
    await turns();
    assert.deepEqual(
      lines.map((l) => [l['msg'], l['initialOldSpaceMb']]),
      [[COLLECTED, 64]],
    );
  });
});
