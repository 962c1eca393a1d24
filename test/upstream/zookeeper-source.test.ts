import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import type { Subscription } from 'rxjs';
import { MeshmuxError } from '../../src/core/errors.js';
import type { SourceEvent, SourceSnapshotEvent, SourceStatusEvent } from '../../src/core/source-event.js';
import { parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';
import {
  ZookeeperSource,
  type ZookeeperSourceOptions,
} from '../../src/upstream/zookeeper/zookeeper-source.js';
import { DubboRegistry } from '../support/dubbo-registry.js';
import { tempDir } from '../support/meshmux-harness.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { ZookeeperServer, zookeeperMissing } from '../support/zookeeper-server.js';
import { suiteSkip } from '../support/required-peer.js';

const WAIT_MS = 15_000;

/** Records a source's events and resolves waits on them as they arrive. */
class EventLog {
  readonly events: SourceEvent[] = [];
  readonly sessions: string[] = [];
  private readonly subscription: Subscription;
  private waiters: Array<{ test: (e: SourceEvent) => boolean; resolve: (e: SourceEvent) => void }> = [];

  constructor(options: ZookeeperSourceOptions) {
    const source = new ZookeeperSource(options, { onSession: (id) => this.sessions.push(id) });
    this.subscription = source.events$.subscribe((e) => {
      this.events.push(e);
      const ready = this.waiters.filter((w) => w.test(e));
      this.waiters = this.waiters.filter((w) => !w.test(e));
      for (const w of ready) w.resolve(e);
    });
  }

  /** The next event that passes `test`: from now on, or from the event at index `from`. */
  next<E extends SourceEvent>(
    test: (e: SourceEvent) => e is E,
    timeoutMs = WAIT_MS,
    from = this.events.length,
  ): Promise<E> {
    const seen = this.events.slice(from).find(test);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no matching event; got ${this.describe()}`)),
        timeoutMs,
      );
      this.waiters.push({
        test,
        resolve: (e) => {
          clearTimeout(timer);
          resolve(e as E);
        },
      });
    });
  }

  snapshots(): SourceSnapshotEvent[] {
    return this.events.filter(isSnapshot);
  }

  describe(): string {
    return this.events
      .map((e) => (e.type === 'status' ? e.state : `snapshot(${e.resources.length})`))
      .join(' ');
  }

  close(): void {
    this.subscription.unsubscribe();
  }
}

const isSnapshot = (e: SourceEvent): e is SourceSnapshotEvent => e.type === 'snapshot';
const status =
  (state: SourceStatusEvent['state']) =>
  (e: SourceEvent): e is SourceStatusEvent =>
    e.type === 'status' && e.state === state;
const snapshotWith =
  (count: number) =>
  (e: SourceEvent): e is SourceSnapshotEvent =>
    e.type === 'snapshot' && e.resources.length === count;

describe('the zookeeper source', { skip: suiteSkip(zookeeperMissing()) }, () => {
  let zk: ZookeeperServer;
  const cleanups: Array<() => unknown> = [];
  const watch = (options: Partial<ZookeeperSourceOptions> & { root: string }): EventLog => {
    const log = new EventLog({
      name: `zk-${options.root.replace(/[^a-z0-9]/g, '') || 'root'}`,
      servers: zk.connectString,
      namespace: 'dubbo',
      debounceMs: 10,
      ...options,
    });
    cleanups.push(() => log.close());
    return log;
  };
  const registryAt = async (root: string, digest?: string): Promise<DubboRegistry> => {
    const r = await DubboRegistry.connect(zk.connectString, {
      root,
      ...(digest === undefined ? {} : { digest }),
    });
    cleanups.push(() => r.close());
    return r;
  };

  /** A source reading `root`, where one provider is registered, through a relay the test can freeze. */
  const watchThroughRelay = async (
    root: string,
    provider: { iface: string; ip: string },
    options: Partial<ZookeeperSourceOptions> = {},
  ): Promise<{ registry: DubboRegistry; proxy: TcpProxy; log: EventLog }> => {
    const registry = await registryAt(root);
    await registry.register(provider);
    const proxy = await TcpProxy.start(zk.port);
    cleanups.push(() => proxy.close());
    const log = watch({ root, servers: proxy.address, ...options });
    await log.next(snapshotWith(1));
    return { registry, proxy, log };
  };

  before(async () => {
    zk = await ZookeeperServer.start();
  });
  afterEach(async () => {
    for (const c of cleanups.reverse()) await c();
    cleanups.length = 0;
  });
  after(async () => {
    await zk.dispose();
  });

  it('publishes nothing before the whole registry is read, then all of it at once', async () => {
    const registry = await registryAt('/whole');
    await registry.registerMany(
      Array.from({ length: 50 }, (_, i) => ({ iface: `com.whole.Svc${i}`, ip: `10.0.0.${i + 1}` })),
    );
    const log = watch({ root: '/whole' });
    const first = await log.next(isSnapshot);
    assert.equal(first.resources.length, 50);
    assert.deepEqual(log.events[0], { type: 'status', state: 'connecting' });
    assert.equal(log.snapshots().length, 1);
    assert.deepEqual([...(first.kinds ?? [])].sort(), [
      'networking.istio.io/ServiceEntry',
      'networking.istio.io/WorkloadEntry',
    ]);
  });

  it('serves an empty registry, and the root once it appears', async () => {
    const log = watch({ root: '/later' });
    const empty = await log.next(isSnapshot);
    assert.equal(empty.resources.length, 0);
    const registry = await registryAt('/later');
    const served = log.next(snapshotWith(1));
    await registry.register({ iface: 'com.later.Svc', ip: '10.0.1.1' });
    await served;
  });

  it("serves a registry at the server's root, where ZooKeeper's own node is no interface", async () => {
    const registry = await registryAt('');
    await registry.register({ iface: 'com.top.Svc', ip: '10.0.1.9' });
    const log = watch({ root: '/', interfaces: { include: ['com.top.*', 'zookeeper'] } });
    const first = await log.next(isSnapshot);
    assert.deepEqual(
      [...first.resources].map((r) => r.name),
      ['com.top.svc'],
    );
    assert.deepEqual(first.errors, []);
  });

  it('watches only the selected interfaces', async () => {
    const registry = await registryAt('/select');
    await registry.register({ iface: 'com.shop.Cart', ip: '10.0.2.1' });
    await registry.register({ iface: 'com.shop.internal.Audit', ip: '10.0.2.2' });
    await registry.register({ iface: 'com.billing.Invoice', ip: '10.0.2.3' });
    const log = watch({
      root: '/select',
      interfaces: { include: ['com.shop.*'], exclude: ['*.internal.*'] },
    });
    const first = await log.next(isSnapshot);
    assert.deepEqual(
      [...first.resources].map((r) => r.name),
      ['com.shop.cart'],
    );
  });

  it('is failing while ZooKeeper cannot be reached at first, and syncs once it can', async (t) => {
    const registry = await registryAt('/late-start');
    await registry.register({ iface: 'com.late.Svc', ip: '10.0.3.1' });
    await zk.stop();
    const log = watch({ root: '/late-start', sessionTimeoutMs: 500 });
    const failing = await log.next(status('failing'));
    assert.equal(failing.error?.code, 'UNAVAILABLE');
    assert.equal(log.snapshots().length, 0);
    const from = log.events.length;
    const started = performance.now();
    await zk.start();
    t.diagnostic(`ZooKeeper answered ruok ${Math.round(performance.now() - started)} ms after its start`);
    // The client's reconnect loop can take a while on a loaded machine.
    await log.next(snapshotWith(1), 2 * WAIT_MS, from);
  });

  it('is stale with its state kept after losing the connection, and synced after reconnecting', async () => {
    const registry = await registryAt('/blip');
    await registry.register({ iface: 'com.blip.Svc', ip: '10.0.4.1' });
    const log = watch({ root: '/blip', sessionTimeoutMs: 5_000 });
    await log.next(snapshotWith(1));
    const stale = log.next(status('stale'));
    await zk.stop(true);
    assert.match((await stale).error?.message ?? '', /lost the connection/);
    const synced = log.next(status('synced'));
    await zk.start();
    await synced;
    assert.equal(log.snapshots().length, 1, 'nothing changed, so no new snapshot: only the status');
    assert.equal(log.sessions.length, 1, 'the session survived the restart');
  });

  it('is stale while its connection is silent, and opens a new session once its own expired', async () => {
    const { registry, proxy, log } = await watchThroughRelay(
      '/expire',
      { iface: 'com.exp.Svc', ip: '10.0.5.1' },
      { sessionTimeoutMs: 500 },
    );
    const [oldSession] = log.sessions;
    const stale = log.next(status('stale'));
    proxy.pause();
    assert.match(
      (await stale).error?.message ?? '',
      /has not answered for \d+ ms/,
      'noticed without a closed socket',
    );
    await registry.register({ iface: 'com.exp.Other', ip: '10.0.5.2' });
    // Only a poll can tell when the server has expired the frozen session.
    const deadline = performance.now() + WAIT_MS;
    while ((await zk.sessions()).includes(`0x${(oldSession ?? '').replace(/^0+/, '')}`)) {
      assert.ok(performance.now() < deadline, 'the server expires the session');
      await new Promise((r) => setTimeout(r, 100));
    }
    const caughtUp = log.next(snapshotWith(2));
    proxy.resume();
    await caughtUp;
    assert.equal(log.sessions.length, 2);
    assert.notEqual(log.sessions[1], oldSession);
    assert.ok(
      log.snapshots().every((s) => s.resources.length >= 1),
      `never an incomplete state: ${log.describe()}`,
    );
  });

  it('dials again when a server accepts the connection and never answers the handshake, keeping its session', async () => {
    const { registry, proxy, log } = await watchThroughRelay(
      '/handshake',
      { iface: 'com.hs.Svc', ip: '10.0.8.1' },
      { sessionTimeoutMs: 5_000, handshakeTimeoutMs: 1_000 },
    );
    const stale = log.next(status('stale'));
    const from = log.events.length;
    // The client reconnects at once into a connection that swallows its handshake.
    proxy.holdNext(1);
    proxy.dropConnections();
    await stale;
    await registry.register({ iface: 'com.hs.Other', ip: '10.0.8.2' });
    await log.next(snapshotWith(2), WAIT_MS, from);
    assert.equal(log.sessions.length, 1, 'the new client resumed the session');
  });

  it('replaces a connection that stays silent with a new session', async () => {
    const { registry, proxy, log } = await watchThroughRelay(
      '/silent',
      { iface: 'com.sil.Svc', ip: '10.0.7.1' },
      { sessionTimeoutMs: 500, deadConnectionMs: 1_500 },
    );
    const caughtUp = log.next(snapshotWith(2));
    // The connection freezes for good; new connections work, as when a server vanishes behind a balancer.
    proxy.pause({ newConnections: 'flow' });
    await registry.register({ iface: 'com.sil.Other', ip: '10.0.7.2' });
    await caughtUp;
    assert.equal(log.sessions.length, 2);
    assert.deepEqual(
      log.events.filter((e) => e.type === 'status').map((e) => e.state),
      ['connecting', 'stale'],
      'a new snapshot, not a status, ends the staleness',
    );
  });

  it('keeps one retry of a providers node it may not read, however often it reconnects', async (t) => {
    const owner = await DubboRegistry.connect(zk.connectString, { root: '/locked' });
    await owner.mkdirp('/locked/com.lock.Svc');
    await owner.createProtected('/locked/com.lock.Svc/providers', 'owner:secret');
    // Only the source talks to the server from here on: its packets are the source's requests.
    await owner.close();
    const proxy = await TcpProxy.start(zk.port);
    cleanups.push(() => proxy.close());
    // Each connection cut here has read the registry; proved healthy at once, it is dialled
    // again at once (a connection cut within 10 s is otherwise dialled again with backoff).
    const log = watch({ root: '/locked', servers: proxy.address, healthyConnectionMs: 0 });
    const first = await log.next(isSnapshot);
    assert.match(first.errors[0]?.describe() ?? '', /com\.lock\.Svc\/providers: .*NO_AUTH/);
    // Over two 5 s retry periods: one read, one liveness probe and one ping or so for each.
    const received = async (): Promise<number> => {
      const before = await zk.packetsReceived();
      await new Promise((r) => setTimeout(r, 10_000));
      return (await zk.packetsReceived()) - before;
    };
    const baseline = await received();
    for (let i = 0; i < 10; i++) {
      const from = log.events.length;
      proxy.dropConnections();
      await log.next(status('synced'), WAIT_MS, from);
    }
    const afterReconnections = await received();
    t.diagnostic(`packets in 10 s: ${baseline} before 10 reconnections, ${afterReconnections} after`);
    assert.ok(
      afterReconnections <= baseline + 3,
      `packets in 10 s: ${baseline} before 10 reconnections, ${afterReconnections} after`,
    );
  });

  it('reads a protected registry with digest credentials from a file, and reports the denial without them', async () => {
    const admin = await registryAt('/', 'meshmux:s3cret');
    await admin.createProtected('/secure', 'meshmux:s3cret');
    const registry = await registryAt('/secure', 'meshmux:s3cret');
    await registry.register({ iface: 'com.sec.Svc', ip: '10.0.6.1' });

    const denied = watch({ root: '/secure' });
    const failing = await denied.next(status('failing'));
    assert.match(failing.error?.describe() ?? '', /^\/secure: .*NO_AUTH/);

    const { dir, dispose } = await tempDir();
    cleanups.push(dispose);
    const passwordFile = path.join(dir, 'password');
    await writeFile(passwordFile, 's3cret\n');
    const allowed = watch({ root: '/secure', auth: { username: 'meshmux', passwordFile } });
    await allowed.next(snapshotWith(1));
  });
});

describe('zookeeper source configuration', () => {
  it('accepts the shape of the issue as written, with defaults for the rest', () => {
    const config = parseMeshmuxConfig(
      'sources:\n  - name: dubbo\n    type: zookeeper\n    servers: 127.0.0.1:2181\n    root: /dubbo\n    namespace: dubbo\n',
      'test',
      '/',
    );
    const source = config.sources[0];
    assert.equal(source?.type, 'zookeeper');
    if (source?.type !== 'zookeeper') return;
    assert.equal(source.servers, '127.0.0.1:2181');
    assert.equal(source.root, '/dubbo');
    assert.equal(source.namespace, 'dubbo');
    assert.equal(source.sessionTimeout, 30_000);
    assert.equal(source.host, '[{version}.][{group}.]{interface}');
    assert.equal(source.endpoints, 'inline');
  });

  it('accepts an ensemble, auth, selection and a host template', () => {
    const config = parseMeshmuxConfig(
      [
        'sources:',
        '  - name: dubbo',
        '    type: zookeeper',
        '    servers: zk-0:2181, zk-1:2181,zk-2:2181',
        '    sessionTimeout: 10s',
        '    auth: {username: meshmux, passwordFile: secrets/zk}',
        '    host: "{interface}.dubbo"',
        '    endpoints: workload-entries',
        '    interfaces: {include: ["com.shop.*"]}',
        '    applications: {exclude: ["*-canary"]}',
        '',
      ].join('\n'),
      'test',
      '/etc/meshmux',
    );
    const source = config.sources[0];
    if (source?.type !== 'zookeeper') return assert.fail('not a zookeeper source');
    assert.equal(source.servers, 'zk-0:2181,zk-1:2181,zk-2:2181');
    assert.equal(source.sessionTimeout, 10_000);
    assert.equal(source.auth?.passwordFile, '/etc/meshmux/secrets/zk');
  });

  it('fails at start, as a configuration error, on a host template without {interface}', () => {
    assert.throws(
      () =>
        new ZookeeperSource({
          name: 'zk',
          servers: 'zk:2181',
          namespace: 'dubbo',
          hostTemplate: '{version}',
        }),
      (err: unknown) => err instanceof MeshmuxError && err.code === 'CONFIG',
    );
  });

  for (const [what, lines, field] of [
    ['servers without a port', 'servers: zk-0', 'servers'],
    [
      'both password and passwordFile',
      'servers: zk:2181\n    auth: {username: u, password: p, passwordFile: f}',
      'auth',
    ],
    ['an unknown endpoint mode', 'servers: zk:2181\n    endpoints: sidecars', 'endpoints'],
  ] as const) {
    it(`rejects ${what}`, () => {
      const yaml = `sources:\n  - name: dubbo\n    type: zookeeper\n    ${lines}\n`;
      assert.throws(
        () => parseMeshmuxConfig(yaml, 'test', '/'),
        (err: Error) => err.message.includes(`sources[0].${field}`),
      );
    });
  }
});
