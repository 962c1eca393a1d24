import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { measureBareReceive, receiveFigures } from '../../bench/bare-receive.js';
import { SHIPPED } from '../../bench/server-process.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// Real processes: a receiver and a sender over HTTP/2 on 127.0.0.1.
describe("the benchmark's floor under receiving an upstream's state", () => {
  it('receives every byte each round, in a process set up as the server is', async () => {
    const bytes = 3 * 1024 * 1024 + 17;
    const measured = await measureBareReceive(bytes, 3);
    assert.equal(measured.bytes, bytes);
    assert.deepEqual(measured.streams, [bytes]);
    assert.deepEqual(measured.receivedBytes, [bytes, bytes, bytes]);
    assert.equal(measured.cpuMs.length, 3);
    assert.equal(measured.pageFaults.length, 3);
    for (const ms of measured.cpuMs) assert.ok(ms > 0, `a round took ${ms} ms of CPU`);
    assert.equal(measured.setup.tunables, SHIPPED.tunables);
    assert.ok(measured.setup.execArgv.includes(SHIPPED.semiSpaceFlag), measured.setup.execArgv.join(' '));
    // Neither process outlives the measurement (a sender left running would hold the test
    // runner's output open).
    for (const pid of measured.pids) {
      for (let i = 0; i < 100 && alive(pid); i++) await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(alive(pid), false, `process ${pid} still runs`);
    }
    const { p50Ms, lowestMs } = receiveFigures(measured);
    assert.ok(lowestMs <= p50Ms);
    assert.ok(measured.cpuMs.includes(lowestMs));
  });

  it('receives one message of each size at once, each on a connection of its own, as a resync brings them', async () => {
    const sizes = [2 * 1024 * 1024 + 5, 1024 * 1024 + 3, 64 * 1024];
    const measured = await measureBareReceive(sizes, 3);
    assert.deepEqual(measured.streams, sizes);
    assert.equal(
      measured.bytes,
      sizes.reduce((sum, size) => sum + size, 0),
    );
    assert.equal(measured.cpuMs.length, 3);
    for (const ms of measured.cpuMs) assert.ok(ms > 0, `a round took ${ms} ms of CPU`);
    // Every round read every stream whole.
    assert.deepEqual(measured.receivedBytes, [measured.bytes, measured.bytes, measured.bytes]);
  });

  it('refuses to measure nothing', async () => {
    await assert.rejects(measureBareReceive([], 1), /nothing to receive/);
  });
});
