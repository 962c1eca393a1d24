/**
 * An upstream that is never done, against meshmux running as its own process: it answers every
 * ACK at once with a state of 20,000 ServiceEntries in which every object changed, each costing
 * meshmux's main thread hundreds of milliseconds. A file source beside it must still bring its
 * edits to an istiod between two of those responses, not after several of them.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BusySotwUpstream } from '../support/busy-sotw-upstream.js';
import { report, virtualServiceYaml } from '../support/fault-kit.js';
import { IstiodClient } from '../support/istiod-client.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { VS } from '../support/type-urls.js';

/** ServiceEntries in each of the busy upstream's states: about 4.9 MB a response. */
const OBJECTS = 20_000;
/** Responses the busy source is read unpaced at most, spending the burst it saved while it synced. */
const WARM_UP = 10;
const EDITS = 6;

describe('faults: an xds upstream answering every ACK with 20,000 changed ServiceEntries, beside a file source', () => {
  let dir: { dir: string; dispose: () => Promise<void> };
  let busy: BusySotwUpstream;
  let meshmux: MeshmuxProcess;
  let istiod: IstiodClient;

  before(async () => {
    dir = await tempDir('meshmux-fault-busy-');
    busy = await BusySotwUpstream.start(OBJECTS);
    // The first state is answered; the next ones wait until the test lets them go.
    busy.hold();
    await mkdir(path.join(dir.dir, 'files'));
    await writeFile(path.join(dir.dir, 'files', 'routes.yaml'), virtualServiceYaml('shop', 'edit-0'));
    const config = path.join(dir.dir, 'meshmux.yaml');
    await writeFile(
      config,
      [
        'sources:',
        '  - { name: files, type: file, path: files }',
        '  - name: busy',
        '    type: xds',
        `    address: ${busy.address}`,
        '    kinds: [ServiceEntry]',
        '    apiVersions: current',
        '',
      ].join('\n'),
    );
    meshmux = await MeshmuxProcess.start(config, { cwd: dir.dir });
    // An istiod of the file's kind only: the test's process decodes nothing of the busy state.
    istiod = new IstiodClient({
      address: meshmux.xds,
      release: [VS],
      backoff: { initialMs: 20, maxMs: 200 },
    });
    istiod.start();
    await istiod.waitFor(
      (c) => c.configs(VS).has('shop/edit-0'),
      30_000,
      () => 'the file source served',
    );
    await busy.waitFor(() => busy.acks >= 1, 60_000, 'the ACK of the first busy state');
  });
  after(async () => {
    busy.hold();
    istiod.close();
    await meshmux.kill();
    await busy.stop();
    await dir.dispose();
  });

  it("brings each edit of the file to the istiod before meshmux has handled the busy upstream's next response", async () => {
    busy.resume();
    const resumedAt = performance.now();
    const fromAnswers = busy.answers.length;
    await busy.waitFor(
      () => busy.answers.length >= fromAnswers + WARM_UP,
      120_000,
      `${WARM_UP} answers to busy states`,
    );
    const handledMeanwhile: number[] = [];
    const latencies: number[] = [];
    for (let i = 1; i <= EDITS; i++) {
      // Written as meshmux answers a busy state: the next one is already on its way to it.
      const before = busy.answers.length;
      await busy.waitFor(() => busy.answers.length > before, 30_000, 'the answer to the next busy state');
      const answered = busy.answers.length;
      const started = performance.now();
      await writeFile(path.join(dir.dir, 'files', 'routes.yaml'), virtualServiceYaml('shop', `edit-${i}`));
      await istiod.waitFor(
        (c) => c.configs(VS).has(`shop/edit-${i}`),
        60_000,
        () => `edit ${i} at the istiod`,
      );
      latencies.push(performance.now() - started);
      handledMeanwhile.push(busy.answers.length - answered);
    }
    const answers = busy.answers.length - fromAnswers;
    const seconds = (performance.now() - resumedAt) / 1000;
    busy.hold();
    report('xds upstream answering every ACK with 20,000 changed ServiceEntries', {
      'objects lost': 0,
      'edit latencies ms': latencies.map(Math.round).join(' '),
      'busy responses handled before the edit arrived': handledMeanwhile.join(' '),
      'busy responses per second': (answers / seconds).toFixed(2),
    });
    // Before: the edit's every step (the file's settle timer, its reading, its YAML worker, the
    // push) waited for a busy response to be handled, one to two of them per edit.
    assert.ok(
      handledMeanwhile.every((n) => n <= 1),
      `busy responses handled between an edit and its arrival: ${handledMeanwhile.join(' ')}`,
    );
    assert.ok(
      handledMeanwhile.filter((n) => n === 0).length >= EDITS - 1,
      `edits that waited for a busy response: ${handledMeanwhile.join(' ')}`,
    );
    assert.deepEqual([...istiod.configs(VS).keys()], [`shop/edit-${EDITS}`]);
    assert.ok(
      busy.answers.every((a) => a.ack),
      'every busy state was ACKed',
    );
  });
});
