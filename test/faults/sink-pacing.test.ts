/**
 * A Galley-style pusher that is never done, against meshmux running as its own process: connected
 * to an `mcp-sink` source, it answers every ACK at once with a state of 20,000 ServiceEntries in
 * which every object changed, each costing meshmux's main thread hundreds of milliseconds. A file
 * source beside it must still bring its edits to an istiod between two of those states, not after
 * several of them; the pusher must keep its stream and have every state ACKed.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BusyGalleyPusher } from '../support/busy-galley-pusher.js';
import { expectEditsNotBehindBusyPeer } from '../support/busy-peer-edits.js';
import { virtualServiceYaml } from '../support/fault-kit.js';
import { IstiodClient } from '../support/istiod-client.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { VS } from '../support/type-urls.js';

/** ServiceEntries in each of the pusher's states: about 4.9 MB a state. */
const OBJECTS = 20_000;
/** States the pusher's reading takes unpaced at most, spending the burst it saved while it synced. */
const WARM_UP = 10;
const EDITS = 6;

describe('faults: a Galley pushing 20,000 changed ServiceEntries to an mcp-sink source on every ACK, beside a file source', () => {
  let dir: { dir: string; dispose: () => Promise<void> };
  let pusher: BusyGalleyPusher;
  let meshmux: MeshmuxProcess;
  let istiod: IstiodClient;

  before(async () => {
    dir = await tempDir('meshmux-fault-busy-sink-');
    await mkdir(path.join(dir.dir, 'files'));
    await writeFile(path.join(dir.dir, 'files', 'routes.yaml'), virtualServiceYaml('shop', 'edit-0'));
    const config = path.join(dir.dir, 'meshmux.yaml');
    await writeFile(
      config,
      [
        'sources:',
        '  - { name: files, type: file, path: files }',
        '  - name: galley',
        '    type: mcp-sink',
        '    listen: 127.0.0.1:0',
        '    kinds: [ServiceEntry]',
        '',
      ].join('\n'),
    );
    meshmux = await MeshmuxProcess.start(config, { cwd: dir.dir });
    const listening = await meshmux.waitForLog(
      (l) => l.msg === 'listening for an MCP source',
      0,
      30_000,
      'the sink listening',
    );
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
    pusher = new BusyGalleyPusher(`127.0.0.1:${String(listening['port'])}`, OBJECTS);
    // The first state is answered; the next ones wait until the test lets them go.
    pusher.hold();
    pusher.connect();
    await pusher.waitFor(() => pusher.acks >= 1, 60_000, 'the ACK of the first busy state');
  });
  after(async () => {
    pusher.hold();
    pusher.close();
    istiod.close();
    await meshmux.kill();
    await dir.dispose();
  });

  it("brings each edit of the file to the istiod before meshmux has handled the pusher's next state", async () => {
    await expectEditsNotBehindBusyPeer(pusher, istiod, path.join(dir.dir, 'files'), {
      fault: 'Galley pushing 20,000 changed ServiceEntries to an mcp-sink source on every ACK',
      unit: 'states',
      warmUp: WARM_UP,
      edits: EDITS,
    });
    assert.deepEqual(pusher.failures, [], 'the pusher kept its stream');
    assert.equal(meshmux.lines('MCP source connected').length, 1, 'one stream, never replaced');
  });
});
