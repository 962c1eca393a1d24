/**
 * An upstream that is never done, against meshmux running as its own process: it answers every
 * ACK at once with a state of 20,000 ServiceEntries in which every object changed, each costing
 * meshmux's main thread hundreds of milliseconds. A file source beside it must still bring its
 * edits to an istiod between two of those responses, not after several of them.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BusySotwUpstream } from '../support/busy-sotw-upstream.js';
import { expectEditsNotBehindBusyPeer } from '../support/busy-peer-edits.js';
import { virtualServiceYaml } from '../support/fault-kit.js';
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
    await expectEditsNotBehindBusyPeer(busy, istiod, path.join(dir.dir, 'files'), {
      fault: 'xds upstream answering every ACK with 20,000 changed ServiceEntries',
      unit: 'responses',
      warmUp: WARM_UP,
      edits: EDITS,
    });
  });
});
