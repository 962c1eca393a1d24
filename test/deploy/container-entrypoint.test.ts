/**
 * The container image's entry point, run as the image runs it: the package packed with `npm pack`,
 * installed from that tarball into a fresh prefix without dev dependencies (as the Containerfile
 * does), then its `meshmux` command started on the image's configuration, with the image's
 * folders replaced by temporary ones and loopback ports instead of every interface.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import { SE } from '../support/type-urls.js';

const run = promisify(execFile);

describe('the container entry point, from the packed package', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let bin: string;
  let installed: string;
  const version = async (): Promise<string> =>
    (JSON.parse(await readFile(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string })
      .version;

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-image-'));
    // `prepare` would build again: the tests run on the build they test.
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], {
      cwd: PACKAGE_ROOT,
      maxBuffer: 16 * 1024 * 1024,
    });
    const tarball = path.join(dir, stdout.trim().split('\n').at(-1) ?? '');
    const prefix = path.join(dir, 'prefix');
    await run(
      'npm',
      [
        'install',
        '--global',
        '--prefix',
        prefix,
        '--omit=dev',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        tarball,
      ],
      { cwd: dir, maxBuffer: 16 * 1024 * 1024, timeout: 150_000 },
    );
    bin = path.join(prefix, 'bin', 'meshmux');
    installed = path.join(prefix, 'lib', 'node_modules', 'meshmux');
  });
  after(() => dispose());

  it('installs the built program, its protos and configurations, and no development files', async () => {
    for (const needed of [
      'dist/bundle/cli.js',
      'dist/bundle/yaml-worker-main.js',
      'proto',
      'config/container.yaml',
      'config/meshmux.yaml',
      'LICENSE',
    ])
      assert.ok(existsSync(path.join(installed, needed)), needed);
    for (const absent of ['src', 'test', 'dist/src', 'dist/test', 'bench', 'node_modules/typescript'])
      assert.ok(!existsSync(path.join(installed, absent)), `${absent} is not installed`);
    const { stdout } = await run(process.execPath, [bin, '--version']);
    assert.equal(stdout.trim(), await version());
  });

  it("serves the image's configuration and exits at once on SIGTERM", async () => {
    const image = await readFile(path.join(installed, 'config', 'container.yaml'), 'utf8');
    const mesh = path.join(dir, 'mesh');
    await mkdir(mesh);
    await writeFile(path.join(mesh, 'cart.yaml'), plainServiceEntry('cart'));
    assert.match(image, /\/etc\/meshmux\/mesh/);
    assert.match(image, /\/var\/lib\/meshmux/);
    const config = path.join(dir, 'meshmux.yaml');
    await writeFile(
      config,
      image.replaceAll('/etc/meshmux/mesh', mesh).replaceAll('/var/lib/meshmux', path.join(dir, 'state')),
    );
    const meshmux = await MeshmuxProcess.start(config, {
      cwd: dir,
      cli: bin,
      env: { MESHMUX_STATE_DIR: '' },
    });
    const client = new IstiodClient({ address: meshmux.xds }).start();
    try {
      await client.waitFor(
        (c) => c.configs(SE).has('shop/cart'),
        20_000,
        () => 'cart served',
      );
      const metrics = await (await fetch(`${meshmux.http}/metrics`)).text();
      assert.match(
        metrics,
        new RegExp(`meshmux_build_info\\{version="${await version()}",node="${process.versions.node}"\\} 1`),
      );
    } finally {
      client.close();
    }
    const stopped = await meshmux.stop('SIGTERM');
    assert.equal(stopped.code, 0);
    assert.equal(stopped.killed, false);
    console.log(`# installed entry point: SIGTERM to exit in ${stopped.ms.toFixed(0)} ms`);
    assert.ok(
      (await readdir(path.join(dir, 'state'))).some((f) => f.endsWith('.state')),
      'state written where the image keeps it',
    );
  });
});
