import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import { after, afterEach, before, describe, it } from 'node:test';
import { filter, firstValueFrom, map, timeout } from 'rxjs';
import type { SourceReport } from '../../src/merge/config-snapshot.js';
import type { RunningMeshmux } from '../../src/app.js';
import type { SourceState } from '../../src/core/source-event.js';
import { DubboRegistry, type ProviderSpec } from '../support/dubbo-registry.js';
import { IstiodClient, type StoredConfig } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { within } from '../support/deadline.js';
import { ZookeeperServer, zookeeperMissing } from '../support/zookeeper-server.js';
import { suiteSkip } from '../support/required-peer.js';
import { SE, WE } from '../support/type-urls.js';

const SE_KIND = 'networking.istio.io/ServiceEntry';
const WAIT_MS = 15_000;

type Body = Readonly<Record<string, unknown>>;
interface Endpoint {
  readonly address: string;
  readonly ports?: Readonly<Record<string, number>>;
  readonly labels?: Readonly<Record<string, string>>;
  readonly weight?: number;
}
interface Port {
  readonly number: number;
  readonly protocol: string;
  readonly name: string;
}

const endpointsOf = (c: StoredConfig | undefined): Endpoint[] => (c?.body['endpoints'] ?? []) as Endpoint[];
const portsOf = (c: StoredConfig | undefined): Port[] => (c?.body['ports'] ?? []) as Port[];
const addresses = (c: StoredConfig | undefined): string[] =>
  endpointsOf(c)
    .map((e) => `${e.address}:${Object.values(e.ports ?? {})[0] ?? '?'}`)
    .sort();

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/**
 * What Istio's validation (or Kubernetes') would say about a generated ServiceEntry, checked
 * independently of meshmux's code (spec checklist 47): FQDN hosts, ports 1–65535 with unique
 * DNS-label names, STATIC with IP endpoints whose port names are service port names, valid labels.
 */
function serviceEntryProblems(name: string, body: Body): string[] {
  const problems: string[] = [];
  if (name.length > 253 || !name.split('.').every((l) => DNS_LABEL.test(l))) problems.push(`name ${name}`);
  const hosts = (body['hosts'] ?? []) as string[];
  if (hosts.length === 0) problems.push('no hosts');
  for (const host of hosts) {
    const labels = host.split('.');
    if (
      host.length > 255 ||
      host.includes(':') ||
      !labels.every((l) => l.length <= 63 && DNS_LABEL.test(l))
    ) {
      problems.push(`host ${host}`);
    }
    if (/^\d+$/.test(labels[labels.length - 1] ?? '')) problems.push(`host ${host}: numeric top-level label`);
  }
  const ports = (body['ports'] ?? []) as Port[];
  const portNames = new Set(ports.map((p) => p.name));
  if (ports.length === 0) problems.push('no ports');
  if (portNames.size !== ports.length) problems.push('duplicate port names');
  for (const p of ports) {
    if (!(p.number >= 1 && p.number <= 65535)) problems.push(`port number ${p.number}`);
    if (!DNS_LABEL.test(p.name) || p.name.length > 63) problems.push(`port name ${p.name}`);
    if (p.protocol !== 'TCP') problems.push(`port protocol ${p.protocol}`);
  }
  if (body['resolution'] !== 'STATIC') problems.push(`resolution ${String(body['resolution'])}`);
  if (body['location'] !== 'MESH_INTERNAL') problems.push(`location ${String(body['location'])}`);
  for (const e of (body['endpoints'] ?? []) as Endpoint[]) problems.push(...endpointProblems(e, portNames));
  return problems;
}

function endpointProblems(e: Endpoint, portNames: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  if (isIP(e.address) === 0) problems.push(`endpoint address ${e.address}`);
  for (const [name, number] of Object.entries(e.ports ?? {})) {
    if (!portNames.has(name)) problems.push(`endpoint port name ${name} is not a service port`);
    if (!(number >= 1 && number <= 65535)) problems.push(`endpoint port ${number}`);
  }
  for (const [k, v] of Object.entries(e.labels ?? {})) {
    const slash = k.lastIndexOf('/');
    const [prefix, keyName] = slash < 0 ? ['', k] : [k.slice(0, slash), k.slice(slash + 1)];
    const prefixOk =
      prefix === '' || (prefix.length <= 253 && prefix.split('.').every((l) => DNS_LABEL.test(l)));
    if (!prefixOk || keyName.length > 63 || !LABEL_NAME.test(keyName)) problems.push(`label key ${k}`);
    if (v.length > 63 || (v !== '' && !LABEL_NAME.test(v))) problems.push(`label value ${k}=${v}`);
  }
  return problems;
}

function assertAllValid(client: IstiodClient): void {
  for (const [key, c] of client.configs(SE)) assert.deepEqual(serviceEntryProblems(c.name, c.body), [], key);
  assert.deepEqual(client.problems, []);
}

function zookeeperYaml(servers: string, root: string, extra = ''): string {
  return [
    'sources:',
    '  - name: dubbo',
    '    type: zookeeper',
    `    servers: ${servers}`,
    `    root: ${root}`,
    '    namespace: dubbo',
    '    debounce: 20ms',
    ...extra
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => `    ${l}`),
    '',
  ].join('\n');
}

describe(
  'Dubbo providers registered in ZooKeeper, as an istiod sees them through meshmux',
  { skip: suiteSkip(zookeeperMissing()) },
  () => {
    let zk: ZookeeperServer;
    let dir: string;
    let disposeDir: () => Promise<void>;
    const cleanups: Array<() => unknown> = [];

    /** Starts meshmux on `yaml` and an istiod client synced to it; both stopped after the suite. */
    const serve = async (yaml: string): Promise<{ meshmux: RunningMeshmux; client: IstiodClient }> => {
      const meshmux = await startFromYaml(yaml, dir);
      const client = new IstiodClient({
        address: `127.0.0.1:${meshmux.xdsPort}`,
        backoff: { maxMs: 200 },
      }).start();
      cleanups.push(
        () => meshmux.stop(),
        () => client.close(),
      );
      await client.waitForSync(WAIT_MS);
      return { meshmux, client };
    };
    const registryAt = async (root: string, sessionTimeoutMs = 5_000): Promise<DubboRegistry> => {
      const r = await DubboRegistry.connect(zk.connectString, { root, sessionTimeoutMs });
      cleanups.push(() => r.close());
      return r;
    };
    /** The source's report once it is in `state`. */
    const sourceState = (
      meshmux: RunningMeshmux,
      state: SourceState,
      timeoutMs = WAIT_MS,
    ): Promise<SourceReport | undefined> =>
      firstValueFrom(
        meshmux.engine.snapshots$.pipe(
          filter((s) => s.sources[0]?.state === state),
          map((s) => s.sources[0]),
          timeout(timeoutMs),
        ),
      );

    before(async () => {
      zk = await ZookeeperServer.start();
      ({ dir, dispose: disposeDir } = await tempDir());
    });
    afterEach(async () => {
      for (const c of cleanups.reverse()) await c();
      cleanups.length = 0;
    });
    after(async () => {
      await zk.dispose();
      await disposeDir();
    });

    it('serves valid STATIC ServiceEntries from the configuration shape of the issue, as written', async () => {
      const registry = await registryAt('/dubbo');
      const bar = { iface: 'com.foo.BarService', version: '1.0.0', application: 'bar-app' };
      await registry.register({ ...bar, ip: '10.0.0.1', params: { weight: '50', 'bad key!': 'x' } });
      await registry.register({ ...bar, ip: '10.0.0.2' });
      // One host running two provider processes of the same service, on two ports.
      await registry.register({ iface: 'com.foo.QuxService', ip: '10.0.0.3', port: 20880 });
      await registry.register({ iface: 'com.foo.QuxService', ip: '10.0.0.3', port: 20881 });
      // Dubbo 2.7+ metadata folders are not interfaces, even when they look like one.
      await registry.register({ iface: 'metadata', ip: '10.9.9.9' });
      await registry.mkdirp('/dubbo/config/dubbo');
      await registry.mkdirp('/dubbo/mapping/com.foo.BarService');

      const { client } = await serve(
        `sources:\n  - name: dubbo\n    type: zookeeper\n    servers: ${zk.connectString}\n    root: /dubbo\n    namespace: dubbo\n`,
      );
      await client.waitFor((c) => c.configs(SE).size === 2, WAIT_MS);
      assert.deepEqual([...client.configs(SE).keys()].sort(), [
        'dubbo/1-0-0.com.foo.barservice',
        'dubbo/com.foo.quxservice',
      ]);
      assertAllValid(client);

      const barSe = client.configs(SE).get('dubbo/1-0-0.com.foo.barservice');
      assert.deepEqual(barSe?.body['hosts'], ['1-0-0.com.foo.barservice']);
      assert.deepEqual(portsOf(barSe), [{ number: 20880, protocol: 'TCP', name: 'tcp-dubbo' }]);
      assert.equal(barSe?.body['resolution'], 'STATIC');
      assert.equal(barSe?.body['location'], 'MESH_INTERNAL');
      assert.equal(barSe?.annotations['meshmux.io/dubbo-interface'], 'com.foo.BarService');
      const [first, second] = endpointsOf(barSe);
      assert.equal(first?.address, '10.0.0.1');
      assert.deepEqual(first?.ports, { 'tcp-dubbo': 20880 });
      assert.equal(first?.weight, 50);
      assert.equal(second?.address, '10.0.0.2');
      assert.equal(second?.weight ?? 0, 0);
      const labels = first?.labels ?? {};
      assert.equal(labels['application'], 'bar-app');
      assert.equal(labels['version'], '1.0.0');
      assert.equal(labels['interface'], 'com.foo.BarService');
      assert.equal(labels['methods'], 'sayHello-sayGoodbye', 'a comma list is repaired into a valid value');
      assert.equal(labels['bad-key'], 'x', 'an invalid key is repaired');
      assert.equal(labels['timestamp'], undefined, 'per-process parameters are left out');
      assert.equal(labels['pid'], undefined);

      const qux = client.configs(SE).get('dubbo/com.foo.quxservice');
      assert.deepEqual(portsOf(qux), [
        { number: 20880, protocol: 'TCP', name: 'tcp-dubbo-20880' },
        { number: 20881, protocol: 'TCP', name: 'tcp-dubbo-20881' },
      ]);
      // Each provider is reached on its own port, whichever service port a client uses.
      assert.deepEqual(
        endpointsOf(qux).map((e) => e.ports),
        [
          { 'tcp-dubbo-20880': 20880, 'tcp-dubbo-20881': 20880 },
          { 'tcp-dubbo-20880': 20881, 'tcp-dubbo-20881': 20881 },
        ],
      );
    });

    it('follows providers and interfaces as they register and unregister', async () => {
      const registry = await registryAt('/changes');
      const a1 = await registry.register({ iface: 'com.shop.Cart', ip: '10.1.0.1' });
      const { client } = await serve(zookeeperYaml(zk.connectString, '/changes'));
      const cart = (c: IstiodClient): StoredConfig | undefined => c.configs(SE).get('dubbo/com.shop.cart');
      await client.waitFor((c) => addresses(cart(c)).length === 1, WAIT_MS);

      await registry.register({ iface: 'com.shop.Cart', ip: '10.1.0.2' });
      await client.waitFor((c) => addresses(cart(c)).length === 2, WAIT_MS);
      assert.deepEqual(addresses(cart(client)), ['10.1.0.1:20880', '10.1.0.2:20880']);

      await registry.unregister(a1);
      await client.waitFor((c) => addresses(cart(c)).length === 1, WAIT_MS);
      assert.deepEqual(addresses(cart(client)), ['10.1.0.2:20880']);

      await registry.register({ iface: 'com.shop.Checkout', ip: '10.1.0.3', group: 'eu' });
      await client.waitFor((c) => c.configs(SE).has('dubbo/eu.com.shop.checkout'), WAIT_MS);

      // A provider process ends: its session closes and ZooKeeper deletes its ephemeral nodes.
      const process2 = await registryAt('/changes');
      await process2.register({ iface: 'com.shop.Checkout', ip: '10.1.0.4', group: 'eu' });
      const checkout = (c: IstiodClient): StoredConfig | undefined =>
        c.configs(SE).get('dubbo/eu.com.shop.checkout');
      await client.waitFor((c) => addresses(checkout(c)).length === 2, WAIT_MS);
      await process2.close();
      await client.waitFor((c) => addresses(checkout(c)).length === 1, WAIT_MS);

      // The last provider of an interface leaves: its ServiceEntry goes, the other stays.
      await registry.unregister(registry.pathOf({ iface: 'com.shop.Cart', ip: '10.1.0.2' }));
      await client.waitFor((c) => cart(c) === undefined, WAIT_MS);
      assert.ok(client.configs(SE).has('dubbo/eu.com.shop.checkout'));
      assertAllValid(client);
    });

    it('reports malformed provider URLs with their znode paths and serves the valid ones', async () => {
      const registry = await registryAt('/malformed');
      await registry.register({ iface: 'com.bad.Svc', ip: '10.2.0.1' });
      const garbage = await registry.register({ iface: 'com.bad.Svc', rawUrl: 'this-is-not-a-url' });
      const badEncoding = await registry.register({
        iface: 'com.bad.Svc',
        rawUrl: 'dubbo%3A%2F%2F10.2.0.9%ZZ',
      });
      await registry.register({ iface: 'com.bad.Svc', ip: '10.2.0.2' });
      const hostname = await registry.register({
        iface: 'com.bad.Svc',
        rawUrl: encodeURIComponent('dubbo://provider.local:20880/com.bad.Svc'),
      });
      const badPort = await registry.register({
        iface: 'com.bad.Svc',
        rawUrl: encodeURIComponent('dubbo://10.2.0.3:70000/com.bad.Svc?side=provider'),
      });
      const { meshmux, client } = await serve(zookeeperYaml(zk.connectString, '/malformed'));
      await client.waitFor((c) => c.configs(SE).has('dubbo/com.bad.svc'), WAIT_MS);
      assert.deepEqual(addresses(client.configs(SE).get('dubbo/com.bad.svc')), [
        '10.2.0.1:20880',
        '10.2.0.2:20880',
      ]);
      assertAllValid(client);

      const errors = (meshmux.engine.current().sources[0]?.errors ?? []).map((e) => e.describe());
      assert.equal(errors.length, 4, errors.join('\n'));
      for (const path of [garbage, badEncoding, hostname, badPort]) {
        assert.ok(
          errors.some((e) => e.startsWith(`${path}: bad provider registration`)),
          `an error names ${path}:\n${errors.join('\n')}`,
        );
      }
      assert.ok(errors.some((e) => /not an IP address/.test(e)));
      assert.ok(errors.some((e) => /port 70000/.test(e)));
    });

    it('reports colliding hosts and keeps the host with the service that held it', async () => {
      const registry = await registryAt('/collide');
      await registry.register({ iface: 'com.acme.Bar-Service', ip: '10.3.0.1' });
      const { meshmux, client } = await serve(zookeeperYaml(zk.connectString, '/collide'));
      const se = (c: IstiodClient): StoredConfig | undefined =>
        c.configs(SE).get('dubbo/com.acme.bar-service');
      await client.waitFor((c) => se(c) !== undefined, WAIT_MS);

      // Sorts first and maps to the same host: it must neither take the host nor merge into it.
      await registry.register({ iface: 'com.acme.Bar_Service', ip: '10.3.0.2' });
      await firstValueFrom(
        meshmux.engine.snapshots$.pipe(
          filter((s) => (s.sources[0]?.errors.length ?? 0) > 0),
          timeout(WAIT_MS),
        ),
      );
      const errors = (meshmux.engine.current().sources[0]?.errors ?? []).map((e) => e.describe());
      assert.equal(errors.length, 1, errors.join('\n'));
      assert.match(
        errors[0] ?? '',
        /^\/collide\/com\.acme\.Bar_Service\/providers field spec\.hosts\[0\]: host com\.acme\.bar-service is also generated for com\.acme\.Bar-Service/,
      );
      assert.equal(client.configs(SE).size, 1);
      assert.deepEqual(addresses(se(client)), ['10.3.0.1:20880']);
    });

    it('serves endpoints as WorkloadEntries selected by their ServiceEntry when configured', async () => {
      const registry = await registryAt('/workloads');
      await registry.register({ iface: 'com.wl.Api', ip: '10.4.0.1', version: '2.0' });
      await registry.register({ iface: 'com.wl.Api', ip: '10.4.0.2', version: '2.0' });
      const { client } = await serve(
        zookeeperYaml(
          zk.connectString,
          '/workloads',
          'endpoints: workload-entries\nhost: "[{version}.]{interface}.dubbo"',
        ),
      );
      await client.waitFor((c) => c.configs(WE).size === 2 && c.configs(SE).size === 1, WAIT_MS);
      const se = client.configs(SE).get('dubbo/2-0.com.wl.api.dubbo');
      assert.ok(se, [...client.configs(SE).keys()].join());
      assert.equal(endpointsOf(se).length, 0);
      const selector = (se.body['workload_selector'] as { labels: Record<string, string> }).labels;
      assert.deepEqual(selector, { 'meshmux.io/dubbo-service': '2-0.com.wl.api.dubbo' });
      assertAllValid(client);
      const portNames = new Set(portsOf(se).map((p) => p.name));
      for (const [key, we] of client.configs(WE)) {
        assert.match(key, /^dubbo\/2-0\.com\.wl\.api\.dubbo-10-4-0-[12]-20880$/);
        const body = we.body as unknown as Endpoint;
        assert.deepEqual(endpointProblems(body, portNames), []);
        for (const [k, v] of Object.entries(selector)) {
          assert.equal(body.labels?.[k], v, 'the WorkloadEntry is selected by its ServiceEntry');
          assert.equal(we.labels[k], v);
        }
      }
    });

    it('keeps serving while ZooKeeper is down, marked stale, and catches up after it restarts', async () => {
      // The provider's session must outlive the restart, however slowly the JVM starts again.
      const registry = await registryAt('/restart', 40_000);
      await registry.register({ iface: 'com.rs.Svc', ip: '10.5.0.1' });
      const { meshmux, client } = await serve(
        zookeeperYaml(zk.connectString, '/restart', 'sessionTimeout: 5s'),
      );
      await client.waitFor((c) => c.configs(SE).has('dubbo/com.rs.svc'), WAIT_MS);
      const before = client.configs(SE).get('dubbo/com.rs.svc')?.version;

      const stale = sourceState(meshmux, 'stale');
      await zk.stop(true);
      await stale;
      assert.equal(client.configs(SE).get('dubbo/com.rs.svc')?.version, before, 'served state is kept');
      assert.equal(meshmux.engine.current().kinds.get(SE_KIND)?.resources.length, 1);

      const synced = sourceState(meshmux, 'synced');
      await zk.start();
      await synced;
      // The provider's own session survived the restart; a new provider shows the watches are live.
      await within(
        registry.register({ iface: 'com.rs.Svc', ip: '10.5.0.2' }),
        WAIT_MS,
        'the provider to register again after the restart',
      );
      await client.waitFor((c) => addresses(c.configs(SE).get('dubbo/com.rs.svc')).length === 2, WAIT_MS);
      assertAllValid(client);
    });

    it('survives the expiry of its own ZooKeeper session without dropping what it serves', async () => {
      const registry = await registryAt('/expiry');
      await registry.register({ iface: 'com.ex.Svc', ip: '10.6.0.1' });
      const proxy = await TcpProxy.start(zk.port);
      cleanups.push(() => proxy.close());
      // The shortest session the server allows (2 ticks), so it expires quickly behind a frozen link.
      const { meshmux, client } = await serve(
        zookeeperYaml(proxy.address, '/expiry', 'sessionTimeout: 500ms'),
      );
      await client.waitFor((c) => c.configs(SE).has('dubbo/com.ex.svc'), WAIT_MS);
      let fewest = Infinity;
      const watch = meshmux.engine.snapshots$.subscribe((s) => {
        fewest = Math.min(fewest, s.kinds.get(SE_KIND)?.resources.length ?? 0);
      });
      cleanups.push(() => watch.unsubscribe());
      const [oldSession] = await zk.sessions(proxy.upstreamPorts[0]);
      assert.ok(oldSession !== undefined, 'meshmux holds a session through the proxy');

      // Within a few session timeouts, although no socket closes: the link is silent, not broken.
      const stale = sourceState(meshmux, 'stale', 5_000);
      proxy.pause();
      assert.match((await stale)?.lastError?.message ?? '', /has not answered for \d+ ms/);
      await registry.register({ iface: 'com.ex.Svc', ip: '10.6.0.2' });
      await registry.register({ iface: 'com.ex.Other', ip: '10.6.0.3' });
      await until(
        async () => !(await zk.sessions()).includes(oldSession),
        WAIT_MS,
        'the server expires the session',
      );
      assert.equal(
        addresses(client.configs(SE).get('dubbo/com.ex.svc')).length,
        1,
        'nothing changes while cut off',
      );

      proxy.resume();
      await client.waitFor(
        (c) =>
          addresses(c.configs(SE).get('dubbo/com.ex.svc')).length === 2 &&
          c.configs(SE).has('dubbo/com.ex.other'),
        WAIT_MS,
      );
      const [newSession] = await zk.sessions(proxy.upstreamPorts[0]);
      assert.ok(
        newSession !== undefined && newSession !== oldSession,
        'a new session replaced the expired one',
      );
      assert.equal(fewest, 1, 'the served ServiceEntry never went away');
      assert.equal(meshmux.engine.current().sources[0]?.state, 'synced');
    });

    it('serves 1,000 interfaces × 3 providers, and reports how fast', async (t) => {
      const registry = await registryAt('/scale', 10_000);
      const specs: ProviderSpec[] = [];
      for (let i = 0; i < 1000; i++) {
        for (let p = 1; p <= 3; p++) {
          specs.push({
            iface: `com.scale.Service${i}`,
            ip: `10.7.${Math.floor(i / 250)}.${(i % 250) + 1}`,
            port: 20880 + p,
          });
        }
      }
      const registered = performance.now();
      await registry.registerMany(specs);
      const registerMs = performance.now() - registered;

      const started = performance.now();
      const { meshmux, client } = await serve(zookeeperYaml(zk.connectString, '/scale'));
      const full = (c: IstiodClient): boolean =>
        c.configs(SE).size === 1000 && [...c.configs(SE).values()].every((s) => endpointsOf(s).length === 3);
      await client.waitFor(full, 60_000);
      const firstSyncMs = performance.now() - started;
      assertAllValid(client);

      const timeChange = async (
        change: () => Promise<unknown>,
        seen: (c: IstiodClient) => boolean,
      ): Promise<number> => {
        const t0 = performance.now();
        await change();
        await client.waitFor(seen, WAIT_MS);
        return performance.now() - t0;
      };
      const svc500 = (c: IstiodClient): number =>
        endpointsOf(c.configs(SE).get('dubbo/com.scale.service500')).length;
      const extra = { iface: 'com.scale.Service500', ip: '10.7.9.9', port: 20881 };
      const addMs = await timeChange(
        () => registry.register(extra),
        (c) => svc500(c) === 4,
      );
      const removeMs = await timeChange(
        () => registry.unregister(registry.pathOf(extra)),
        (c) => svc500(c) === 3,
      );
      const newIfaceMs = await timeChange(
        () => registry.register({ iface: 'com.scale.NewService', ip: '10.7.9.10' }),
        (c) => c.configs(SE).size === 1001,
      );
      const report =
        `1,000 interfaces × 3 providers: registered in ${registerMs.toFixed(0)} ms; first full sync (meshmux start → ` +
        `istiod holds 1,000 ServiceEntries) ${firstSyncMs.toFixed(0)} ms; per change → istiod: add provider ` +
        `${addMs.toFixed(0)} ms, remove provider ${removeMs.toFixed(0)} ms, new interface ${newIfaceMs.toFixed(0)} ms`;
      t.diagnostic(report);
      console.log(report);
      assert.equal(meshmux.engine.current().sources[0]?.errors.length, 0);
    });
  },
);

/** Resolves once `check` is true, checking every 100 ms; for state only a poll can observe. */
async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
