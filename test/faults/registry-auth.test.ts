/**
 * A ZooKeeper that answers every request of meshmux with an error code its client library does not
 * know: a real ZooKeeper (Debian package `zookeeper`; the test starts it) enforcing SASL
 * authentication, which meshmux does not do, answers -124. meshmux must go on serving its other
 * sources, name the error once, and not stop.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connectIstiod, report, virtualServiceYaml } from '../support/fault-kit.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { VS } from '../support/type-urls.js';
import { ZookeeperServer } from '../support/zookeeper-server.js';

const WAIT_MS = 20_000;

describe('faults: a ZooKeeper that refuses every request with a code the client does not know', () => {
  let zk: ZookeeperServer;
  before(async () => {
    zk = await ZookeeperServer.start({
      extraConfig: [
        'enforce.auth.enabled=true',
        'enforce.auth.schemes=sasl',
        'authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider',
      ],
    });
  });
  after(async () => {
    await zk.dispose();
  });

  it('keeps serving the other sources and names the error', async () => {
    const dir = await tempDir('meshmux-fault-registry-auth-');
    await mkdir(path.join(dir.dir, 'mesh'));
    await writeFile(path.join(dir.dir, 'mesh', 'a.yaml'), virtualServiceYaml('shop', 'a'));
    const configFile = path.join(dir.dir, 'meshmux.yaml');
    await writeFile(
      configFile,
      [
        'sources:',
        '  - name: dubbo',
        '    type: zookeeper',
        `    servers: ${zk.connectString}`,
        '    root: /dubbo',
        '    namespace: dubbo',
        '  - { name: mesh, type: file, path: ./mesh }',
        '',
      ].join('\n'),
    );
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connectIstiod(meshmux.xds);
    try {
      await meshmux.waitForLog(
        (l) => String(l['error']).includes('SESSION_CLOSED_REQUIRE_SASL_AUTH'),
        0,
        WAIT_MS,
        'the refusal named',
      );
      await new Promise((r) => setTimeout(r, 2_000));
      await writeFile(path.join(dir.dir, 'mesh', 'b.yaml'), virtualServiceYaml('shop', 'b'));
      await client.waitFor(
        (c) => c.configs(VS).size === 2,
        WAIT_MS,
        () => 'the file source served beside the refusing registry',
      );
      const sources = (await (await fetch(`${meshmux.admin}/debug/sources`)).json()) as Array<{
        name: string;
        state: string;
      }>;
      const errorLines = meshmux.lines('cannot read the registry root').length;
      report('a ZooKeeper enforcing SASL authentication', {
        'meshmux alive': String(meshmux.alive),
        'registry source': sources.find((s) => s.name === 'dubbo')?.state ?? 'absent',
        "lines 'cannot read the registry root'": errorLines,
      });
      assert.equal(meshmux.alive, true);
      assert.equal(errorLines, 1, 'the error said once');
      assert.notEqual(sources.find((s) => s.name === 'dubbo')?.state, 'synced');
    } finally {
      client.close();
      await meshmux.kill();
      await dir.dispose();
    }
  });
});
