import assert from 'node:assert/strict';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { until } from '../support/deadline.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { runMeshmuxCli } from '../support/meshmux-cli.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { SE } from '../support/type-urls.js';

const meshmuxCli = (args: string[]) => runMeshmuxCli(args);

describe('meshmux status and confirm against a running meshmux', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;
  let client: IstiodClient;

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-status-'));
    // Both objects in one folder of the scanned tree, so that one rename takes both away at once.
    await mkdir(path.join(dir, 'mesh', 'shop'), { recursive: true });
    for (const name of ['cart', 'shop'])
      await writeFile(path.join(dir, 'mesh', 'shop', `${name}.yaml`), plainServiceEntry(name));
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      'state: { dir: none }\nsources:\n  - name: local\n    type: file\n    path: ./mesh\n    rescanInterval: 200ms\n    vanishGrace: 0s\n    settle: 0s\n',
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    client = new IstiodClient({
      address: meshmux.xds,
      nodeId: 'sidecar~10.0.0.7~istiod-a.istio-system~istio-system.svc.cluster.local',
    }).start();
    await client.waitFor(
      (c) => c.configs(SE).size === 2,
      20_000,
      () => 'both ServiceEntries served',
    );
  });
  after(async () => {
    client.close();
    await meshmux.stop();
    await dispose();
  });

  it('lists each istiod with every type SYNCED once it acknowledged the current state', async () => {
    const admin = meshmux.admin;
    let result = await meshmuxCli(['status', '--admin', admin]);
    await until(
      async () => (result = await meshmuxCli(['status', '--admin', admin])).code === 0,
      45_000,
      'every type acknowledged',
    );
    assert.match(result.stdout, /^local\s+file\s+synced$/m);
    assert.match(result.stdout, /sidecar~10\.0\.0\.7~istiod-a.*ServiceEntry=SYNCED/);
    assert.doesNotMatch(result.stdout, /=(STALE|NACKED)/);
    assert.match(result.stdout, /MeshConfig=NOT SENT/, 'no mesh section: MeshConfig is never answered');
    assert.match(result.stdout, /1 istiod\(s\): 1 in sync, 0 behind, 0 NACKing/);
  });

  it('confirms a held emptying after saying what it deletes, and refuses when nothing is held', async () => {
    // Removed file by file, a rescan between the two would see one deletion (applied at once) and
    // then an emptying of one object.
    await rename(path.join(dir, 'mesh', 'shop'), path.join(dir, 'removed'));
    await until(
      async () =>
        / HELD: empty, 2 of 2 deleted/.test((await meshmuxCli(['status', '--admin', meshmux.admin])).stdout),
      45_000,
      'the emptying held',
    );
    assert.equal(client.configs(SE).size, 2, 'nothing deleted while held');
    const confirmed = await meshmuxCli(['confirm', 'local', '--admin', meshmux.admin]);
    assert.equal(confirmed.code, 0, confirmed.stderr);
    assert.match(
      confirmed.stdout,
      /local: held since .* \(empty\); applying it deletes 2 of its 2 object\(s\)\nlocal: applied/,
    );
    await client.waitFor(
      (c) => c.configs(SE).size === 0,
      20_000,
      () => 'the confirmed emptying served',
    );
    const again = await meshmuxCli(['confirm', 'local', '--admin', meshmux.admin]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /source local holds no update/);
    const unknown = await meshmuxCli(['confirm', 'nope', '--admin', meshmux.admin]);
    assert.match(unknown.stderr, /no source named nope/);
  });
});
