/**
 * What meshmux logs of a ZooKeeper registry full of bad registrations, each appearing on its own:
 * a real ZooKeeper (Debian package `zookeeper`; the test starts it) and meshmux as its own process.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DubboRegistry } from '../support/dubbo-registry.js';
import { connectIstiod, report } from '../support/fault-kit.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { SE } from '../support/type-urls.js';
import { ZookeeperServer } from '../support/zookeeper-server.js';

const WAIT_MS = 20_000;
const BAD = 20;

describe('faults: bad registrations appearing one at a time in a ZooKeeper registry', () => {
  let zk: ZookeeperServer;
  before(async () => {
    zk = await ZookeeperServer.start();
  });
  after(async () => {
    await zk.dispose();
  });

  it('logs each bad registration once, not again with every later change', async () => {
    const dir = await tempDir('meshmux-fault-registry-log-');
    const registry = await DubboRegistry.connect(zk.connectString, { root: '/dubbo' });
    await registry.register({ iface: 'com.foo.GoodService', ip: '10.0.0.1' });
    const configFile = path.join(dir.dir, 'meshmux.yaml');
    await writeFile(
      configFile,
      `sources:\n  - name: dubbo\n    type: zookeeper\n    servers: ${zk.connectString}\n    root: /dubbo\n    namespace: dubbo\n`,
    );
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connectIstiod(meshmux.xds);
    try {
      await client.waitFor(
        (c) => c.configs(SE).size === 1,
        WAIT_MS,
        () => 'the good provider',
      );
      // Each one a state of its own: the next is written once meshmux has logged the one before.
      for (let i = 0; i < BAD; i++) {
        await registry.mkdirp(`/dubbo/com.foo.BadService/providers/not-a-url-${i}`);
        await meshmux.waitForLog(
          (e) => String(e['error']).includes(`not-a-url-${i}`),
          0,
          WAIT_MS,
          `bad registration ${i} logged`,
        );
      }
      const lines = meshmux.lines('registration not served');
      report('20 bad registrations appearing one at a time', { 'lines logged': lines.length });
      assert.equal(lines.length, BAD, 'each bad registration logged once');
      assert.equal(client.configs(SE).size, 1, 'the good provider still served');
    } finally {
      client.close();
      await meshmux.kill();
      await registry.close();
      await dir.dispose();
    }
  });
});
