import assert from 'node:assert/strict';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { until } from '../support/deadline.js';
import { IstiodClient } from '../support/istiod-client.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess, type LogLine, type MeshmuxProcessOptions } from '../support/meshmux-process.js';
import { nodeRunnableBy } from '../support/run-as.js';
import { SE } from '../support/type-urls.js';

/**
 * Whom meshmux runs as: the test's own user, or nobody when the test runs as root, whom no
 * permission stops (the image runs meshmux as a user of its own, for whom a volume's `lost+found`
 * is unreadable).
 */
const RUN_AS_USER = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined;

interface SourceInfo {
  readonly name: string;
  readonly state: string;
  readonly errors: string[];
}

/** A "rejected a document" log line naming `folder`. */
function rejects(folder: string): (line: LogLine) => boolean {
  return (l) => l.msg === 'rejected a document' && String(l.error).includes(folder);
}

describe('a file source with a folder it cannot list', { skip: process.getuid === undefined }, () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  let runAs: Pick<MeshmuxProcessOptions, 'user' | 'node'> = {};
  before(async () => {
    if (RUN_AS_USER === undefined) return;
    const { node, dispose } = await nodeRunnableBy(RUN_AS_USER);
    cleanups.push(dispose);
    runAs = { user: RUN_AS_USER, node };
  });

  /** A folder source `mesh` holding `cart.yaml`, readable by {@link RUN_AS_USER}. */
  async function meshFolder(): Promise<string> {
    const { dir, dispose } = await tempDir('meshmux-unreadable-');
    cleanups.push(dispose);
    await chmod(dir, 0o755);
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'cart.yaml'), plainServiceEntry('cart'));
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      'sources:\n  - name: local\n    type: file\n    path: ./mesh\n    rescanInterval: 500ms\n',
    );
    return dir;
  }

  async function start(dir: string): Promise<{ meshmux: MeshmuxProcess; client: IstiodClient }> {
    const meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir, ...runAs });
    cleanups.push(async () => void (await meshmux.stop()));
    const client = new IstiodClient({ address: meshmux.xds }).start();
    cleanups.push(() => client.close());
    return { meshmux, client };
  }

  async function source(meshmux: MeshmuxProcess): Promise<SourceInfo | undefined> {
    return (await meshmux.debug<SourceInfo[]>('sources')).find((s) => s.name === 'local');
  }

  it('keeps reading the other files when a subfolder turns unreadable, and the files of that folder keep their objects', async () => {
    const dir = await meshFolder();
    await mkdir(path.join(dir, 'mesh', 'team'));
    await writeFile(path.join(dir, 'mesh', 'team', 'team.yaml'), plainServiceEntry('team'));
    const { meshmux, client } = await start(dir);
    await client.waitFor(
      (c) => c.configs(SE).has('shop/cart') && c.configs(SE).has('shop/team'),
      20_000,
      () => 'cart and team',
    );

    await mkdir(path.join(dir, 'mesh', 'lost+found'));
    await chmod(path.join(dir, 'mesh', 'lost+found'), 0o000);
    await chmod(path.join(dir, 'mesh', 'team'), 0o000);
    cleanups.push(() => chmod(path.join(dir, 'mesh', 'lost+found'), 0o755));
    cleanups.push(() => chmod(path.join(dir, 'mesh', 'team'), 0o755));
    await writeFile(path.join(dir, 'mesh', 'new.yaml'), plainServiceEntry('new'));
    await client.waitFor(
      (c) => c.configs(SE).has('shop/new'),
      15_000,
      () => 'new.yaml, beside the folders it cannot list',
    );
    assert.ok(client.configs(SE).has('shop/team'), 'team.yaml keeps its object while team/ is unreadable');
    const seen = await source(meshmux);
    assert.equal(seen?.state, 'synced');
    for (const folder of ['lost+found', 'team']) {
      assert.ok(
        seen?.errors.some(
          (e) => e.includes(path.join('mesh', folder)) && e.includes('cannot list this folder'),
        ),
        `an error names ${folder}: ${JSON.stringify(seen?.errors)}`,
      );
    }

    // More scans, one more edit: each folder's error is logged once, not on every scan.
    await writeFile(path.join(dir, 'mesh', 'later.yaml'), plainServiceEntry('later'));
    await client.waitFor(
      (c) => c.configs(SE).has('shop/later'),
      15_000,
      () => 'later.yaml',
    );
    const logged = meshmux.logs.filter(rejects(path.join('mesh', 'lost+found'))).length;
    const failures = meshmux.logs.filter((l) => l.msg === 'cannot read the source path').length;
    console.log(
      `# subfolders made unreadable while running: new.yaml served, team.yaml kept; lost+found logged ${logged} time(s), "cannot read the source path" ${failures} time(s)`,
    );
    assert.equal(logged, 1);
    assert.equal(failures, 0);

    await chmod(path.join(dir, 'mesh', 'team'), 0o755);
    // A scan begun before the chmod may still report the folder: the error goes at a later one.
    const teamErrors = async (): Promise<string[]> =>
      ((await source(meshmux))?.errors ?? []).filter((e) => e.includes(path.join('mesh', 'team')));
    await until(
      async () => (await teamErrors()).length === 0,
      15_000,
      'the error of team/ gone once it can be listed',
      { describe: async () => JSON.stringify(await teamErrors()) },
    );
    assert.ok(client.configs(SE).has('shop/team'));
  });

  it('serves the rest of the folder at a start beside a folder it cannot list, and is ready', async () => {
    const dir = await meshFolder();
    await mkdir(path.join(dir, 'mesh', 'lost+found'));
    await chmod(path.join(dir, 'mesh', 'lost+found'), 0o000);
    cleanups.push(() => chmod(path.join(dir, 'mesh', 'lost+found'), 0o755));
    const { meshmux, client } = await start(dir);
    await client.waitFor(
      (c) => c.configs(SE).has('shop/cart'),
      15_000,
      () => 'cart',
    );
    const ready = await fetch(`${meshmux.http}/ready`);
    console.log(`# start beside an unreadable lost+found: cart served, /ready ${ready.status}`);
    assert.equal(ready.status, 200);
    assert.equal(meshmux.logs.filter((l) => l.msg === 'cannot read the source path').length, 0);
  });
});
