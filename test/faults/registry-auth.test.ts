/**
 * A ZooKeeper that answers every request of meshmux with an error code its client library does not
 * know: a real ZooKeeper (Debian package `zookeeper`; the test starts it) enforcing SASL
 * authentication, which meshmux does not do, answers -124 and closes the connection. meshmux must
 * go on serving its other sources and what the registry served before, name the error once, say
 * why the registry is failing, and not stop; nor may it dial the server again at once each time.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DubboRegistry } from '../support/dubbo-registry.js';
import { connectIstiod, registryBesideFolder, report, virtualServiceYaml } from '../support/fault-kit.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { SE, VS } from '../support/type-urls.js';
import { ZookeeperServer } from '../support/zookeeper-server.js';

const WAIT_MS = 20_000;
/** How long the connections meshmux makes to the refusing server are counted. */
const COUNT_MS = 10_000;
/** What makes a ZooKeeper 3.8 refuse every client that does not authenticate with SASL. */
const ENFORCE_AUTH = [
  'enforce.auth.enabled=true',
  'enforce.auth.schemes=sasl',
  'authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider',
];

/**
 * meshmux in `dir` serving a folder with one VirtualService beside a registry holding one provider,
 * which it reaches through `proxy` (a relay that counts the connections meshmux makes). The
 * provider's node is persistent: it outlives the session that made it.
 */
async function besideRelayedRegistry(
  zk: ZookeeperServer,
  proxy: TcpProxy,
  dir: string,
): Promise<{ meshmux: MeshmuxProcess; client: ReturnType<typeof connectIstiod> }> {
  const registry = await DubboRegistry.connect(zk.connectString, { root: '/dubbo' });
  await registry.mkdirp(registry.pathOf({ iface: 'com.shop.Cart', ip: '10.0.0.7', port: 20880 }));
  await registry.close();
  await mkdir(path.join(dir, 'mesh'));
  await writeFile(path.join(dir, 'mesh', 'a.yaml'), virtualServiceYaml('shop', 'a'));
  const configFile = path.join(dir, 'meshmux.yaml');
  await writeFile(configFile, registryBesideFolder(proxy.address));
  const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir });
  return { meshmux, client: connectIstiod(meshmux.xds) };
}

/**
 * Over the next {@link COUNT_MS}: the connections meshmux makes through `proxy`, and the lines its
 * ZooKeeper source logs, from `logged` on.
 */
async function dialsOverCount(
  meshmux: MeshmuxProcess,
  proxy: TcpProxy,
): Promise<{ logged: number; dials: number; lines: number }> {
  const logged = meshmux.logs.length;
  const before = proxy.accepted;
  await new Promise((r) => setTimeout(r, COUNT_MS));
  const lines = meshmux.logs.slice(logged).filter((l) => l['component'] === 'zookeeper-source');
  return { logged, dials: proxy.accepted - before, lines: lines.length };
}

describe('faults: a ZooKeeper that refuses every request with a code the client does not know', () => {
  let zk: ZookeeperServer;
  before(async () => {
    zk = await ZookeeperServer.start({ extraConfig: ENFORCE_AUTH });
  });
  after(async () => {
    await zk.dispose();
  });

  it('keeps serving the other sources and names the error', async () => {
    const dir = await tempDir('meshmux-fault-registry-auth-');
    await mkdir(path.join(dir.dir, 'mesh'));
    await writeFile(path.join(dir.dir, 'mesh', 'a.yaml'), virtualServiceYaml('shop', 'a'));
    const configFile = path.join(dir.dir, 'meshmux.yaml');
    await writeFile(configFile, registryBesideFolder(zk.connectString));
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

  it('dials a ZooKeeper that comes to refuse every session with backoff, and keeps what it served', async () => {
    const open = await ZookeeperServer.start();
    const proxy = await TcpProxy.start(open.port);
    const dir = await tempDir('meshmux-fault-registry-redial-');
    try {
      const { meshmux, client } = await besideRelayedRegistry(open, proxy, dir.dir);
      try {
        await client.waitFor(
          (c) => c.configs(SE).size === 1 && c.configs(VS).size === 1,
          WAIT_MS,
          () => 'the registry and the file served',
        );
        // The ensemble is restarted enforcing authentication: meshmux's session resumes, and its
        // first request is refused (-124) and the connection closed, every time.
        await open.restartWith(ENFORCE_AUTH);
        const { logged, dials, lines } = await dialsOverCount(meshmux, proxy);
        report('a registry restarted to refuse every session', {
          [`connections in ${COUNT_MS / 1000} s after the restart`]: dials,
          'log lines of the source meanwhile': lines,
        });
        assert.equal(meshmux.alive, true);
        assert.ok(dials <= 15, `${dials} connections in ${COUNT_MS / 1000} s`);
        assert.ok(lines <= 4, `${lines} log lines of the source`);
        await meshmux.waitForLog(
          (l) => String(l['error']).includes('SESSION_CLOSED_REQUIRE_SASL_AUTH'),
          logged,
          3 * WAIT_MS,
          'the refusal named',
        );
        await writeFile(path.join(dir.dir, 'mesh', 'b.yaml'), virtualServiceYaml('shop', 'b'));
        await client.waitFor(
          (c) => c.configs(VS).size === 2,
          WAIT_MS,
          () => 'the file source served beside the refusing registry',
        );
        const sources = (await (await fetch(`${meshmux.admin}/debug/sources`)).json()) as Array<{
          name: string;
          state: string;
          lastError?: string;
        }>;
        const dubbo = sources.find((s) => s.name === 'dubbo');
        report('a registry restarted to refuse every session', {
          'registry source': `${dubbo?.state ?? 'absent'}: ${dubbo?.lastError ?? ''}`,
          'ServiceEntries served': client.configs(SE).size,
        });
        assert.equal(dubbo?.state, 'stale');
        assert.match(dubbo?.lastError ?? '', /SESSION_CLOSED_REQUIRE_SASL_AUTH/);
        assert.equal(client.configs(SE).size, 1, 'the ServiceEntry served before is still served');
      } finally {
        client.close();
        await meshmux.kill();
      }
    } finally {
      await proxy.close();
      await open.dispose();
      await dir.dispose();
    }
  });

  it('dials a ZooKeeper that closes each connection once the registry is read with backoff too', async () => {
    const open = await ZookeeperServer.start();
    const proxy = await TcpProxy.start(open.port);
    const dir = await tempDir('meshmux-fault-registry-cut-');
    try {
      const { meshmux, client } = await besideRelayedRegistry(open, proxy, dir.dir);
      try {
        await client.waitFor(
          (c) => c.configs(SE).size === 1,
          WAIT_MS,
          () => 'the registry served',
        );
        // From now on each connection is cut 300 ms after it is made: time enough for meshmux to
        // read the one provider in full, and to be cut soon after.
        proxy.closeEach(300);
        proxy.dropConnections();
        const { dials, lines } = await dialsOverCount(meshmux, proxy);
        report('a registry that closes each connection once it is read', {
          [`connections in ${COUNT_MS / 1000} s`]: dials,
          'log lines of the source meanwhile': lines,
        });
        assert.equal(meshmux.alive, true);
        assert.ok(dials <= 15, `${dials} connections in ${COUNT_MS / 1000} s`);
        assert.ok(lines <= 4, `${lines} log lines of the source`);
        assert.equal(client.configs(SE).size, 1, 'the ServiceEntry is still served');
      } finally {
        client.close();
        await meshmux.kill();
      }
    } finally {
      await proxy.close();
      await open.dispose();
      await dir.dispose();
    }
  });
});
