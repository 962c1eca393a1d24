/**
 * A registration whose text is long and made to be slow to read (a run of 150,000 `_` in a
 * parameter of a valid provider; a refused node name `a.a.a.…=` of 100,000 characters) must not
 * hold meshmux: a file source's change beside it reaches the istiod as usual. A real ZooKeeper
 * (Debian package `zookeeper`; the test starts it) and meshmux as its own process.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DubboRegistry } from '../support/dubbo-registry.js';
import { connectIstiod, registryBesideFolder, report, virtualServiceYaml } from '../support/fault-kit.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { SE, VS } from '../support/type-urls.js';
import { ZookeeperServer } from '../support/zookeeper-server.js';

const WAIT_MS = 20_000;
/** What a change of a file takes to reach the istiod at most, whatever the registry holds. */
const SERVED_WITHIN_MS = 5_000;

describe('faults: a registration made to be slow to read', () => {
  let zk: ZookeeperServer;
  before(async () => {
    zk = await ZookeeperServer.start();
  });
  after(async () => {
    await zk.dispose();
  });

  const hostile = [
    {
      what: 'a provider with a parameter of 150,000 underscores',
      node: encodeURIComponent(
        `dubbo://10.0.0.2:20880/com.foo.LongService?application=long&interface=com.foo.LongService&side=provider&note=x${'_'.repeat(150_000)}x`,
      ),
      services: 2,
    },
    { what: 'a refused node name of 100,000 characters', node: `${'a.'.repeat(50_000)}=`, services: 1 },
  ];

  for (const { what, node, services } of hostile) {
    it(`serves a file's change beside ${what}`, async () => {
      const dir = await tempDir('meshmux-fault-registry-text-');
      await mkdir(path.join(dir.dir, 'mesh'));
      await writeFile(path.join(dir.dir, 'mesh', 'a.yaml'), virtualServiceYaml('shop', 'a'));
      const registry = await DubboRegistry.connect(zk.connectString, { root: `/dubbo-${services}` });
      await registry.register({ iface: 'com.foo.GoodService', ip: '10.0.0.1' });
      const configFile = path.join(dir.dir, 'meshmux.yaml');
      await writeFile(configFile, registryBesideFolder(zk.connectString, `/dubbo-${services}`));
      const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
      const client = connectIstiod(meshmux.xds);
      try {
        await client.waitFor(
          (c) => c.configs(SE).size === 1 && c.configs(VS).size === 1,
          WAIT_MS,
          () => 'the first sync',
        );
        await registry.register({ iface: 'com.foo.LongService', rawUrl: node });
        await new Promise((r) => setTimeout(r, 300));
        const edited = performance.now();
        await writeFile(path.join(dir.dir, 'mesh', 'b.yaml'), virtualServiceYaml('shop', 'b'));
        await client.waitFor(
          (c) => c.configs(VS).size === 2,
          SERVED_WITHIN_MS,
          () => `the file's change, with ${what} in the registry`,
        );
        const servedMs = performance.now() - edited;
        await client.waitFor(
          (c) => c.configs(SE).size === services,
          WAIT_MS,
          () => `${services} ServiceEntries from the registry`,
        );
        report(`a registration made to be slow to read: ${what}`, {
          "ms from a file's change to the istiod": servedMs,
          'ZooKeeper sessions expired': meshmux.lines('session expired').length,
        });
        assert.equal(client.configs(SE).size, services);
      } finally {
        client.close();
        await meshmux.kill();
        await registry.close();
        await dir.dispose();
      }
    });
  }
});
