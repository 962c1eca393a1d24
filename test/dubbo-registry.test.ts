import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { within } from './support/deadline.js';
import { DubboRegistry } from './support/dubbo-registry.js';
import { suiteSkip } from './support/required-peer.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { ZookeeperServer, zookeeperMissing } from './support/zookeeper-server.js';

// Starts a real ZooKeeper (Debian package `zookeeper`).
describe('the test provider client', { skip: suiteSkip(zookeeperMissing()) }, () => {
  let zk: ZookeeperServer;
  before(async () => {
    zk = await ZookeeperServer.start();
  });
  after(async () => {
    await zk.dispose();
  });

  it('dials again, on its session, when ZooKeeper accepts a connection and never answers it', async () => {
    const proxy = await TcpProxy.start(zk.port);
    const registry = await DubboRegistry.connect(proxy.address, {
      root: '/redial',
      sessionTimeoutMs: 30_000,
    });
    try {
      await registry.register({ iface: 'com.rd.Svc', ip: '10.9.0.1' });
      const session = registry.sessionId;
      // ZooKeeper does this to connections made while it starts; the library alone waits for good.
      const lost = registry.disconnected();
      proxy.holdNext(1);
      proxy.dropConnections();
      await lost;
      await within(
        registry.register({ iface: 'com.rd.Svc', ip: '10.9.0.2' }),
        15_000,
        'a registration after a connection that swallowed its handshake',
      );
      assert.equal(registry.sessionId, session, 'the providers registered before are still live');
    } finally {
      await registry.close();
      await proxy.close();
    }
  });
});
