/**
 * How fast Dubbo registrations in a real ZooKeeper reach istiod: N interfaces × M providers
 * (default 1,000 × 3; `node dist/bench/zookeeper.js 5000 3` for more). Times the first full sync
 * and single changes (add a provider, remove it, add an interface), once at the source's output
 * and end to end through meshmux, to an istiod client that decodes every object and to one that
 * reads a response's top-level fields. Prints figures; asserts nothing.
 */
import { performance } from 'node:perf_hooks';
import type { SourceEvent, SourceSnapshotEvent } from '../src/core/source-event.js';
import { ZookeeperSource } from '../src/upstream/zookeeper/zookeeper-source.js';
import { DubboRegistry, type ProviderSpec } from '../test/support/dubbo-registry.js';
import { IstiodClient } from '../test/support/istiod-client.js';
import { startFromYaml, tempDir } from '../test/support/meshmux-harness.js';
import { ZookeeperServer } from '../test/support/zookeeper-server.js';
import { SE } from '../test/support/type-urls.js';
import { SE_URL } from './fixtures.js';
import { Fleet } from './fleet.js';

const INTERFACES = Number(process.argv[2] ?? 1000);
const PROVIDERS = Number(process.argv[3] ?? 3);
const CHANGES = 10;
/** The source's default quiet time after a watch fires. */
const DEBOUNCE_MS = 50;
const ROOT = '/dubbo';

function specs(): ProviderSpec[] {
  const out: ProviderSpec[] = [];
  for (let i = 0; i < INTERFACES; i++) {
    for (let p = 0; p < PROVIDERS; p++) {
      out.push({ iface: `com.bench.Service${i}`, ip: `10.${p}.${Math.floor(i / 250)}.${(i % 250) + 1}` });
    }
  }
  return out;
}

function median(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  return (sorted[Math.floor(sorted.length / 2)] ?? NaN).toFixed(1);
}

/** The next snapshot event after `act`, timed from the start of `act`. */
function timeSnapshot(
  events: SourceEvent[],
  wake: { fn: (() => void) | undefined },
  act: () => Promise<unknown>,
  test: (e: SourceSnapshotEvent) => boolean,
): Promise<number> {
  const t0 = performance.now();
  const seen = events.length;
  return new Promise((resolve, reject) => {
    wake.fn = () => {
      const hit = events.slice(seen).find((e): e is SourceSnapshotEvent => e.type === 'snapshot' && test(e));
      if (hit !== undefined) resolve(performance.now() - t0);
    };
    act().catch(reject);
  });
}

async function main(): Promise<void> {
  const zk = await ZookeeperServer.start({ tickTimeMs: 500 });
  const registry = await DubboRegistry.connect(zk.connectString, { root: ROOT, sessionTimeoutMs: 10_000 });
  const { dir, dispose } = await tempDir();
  try {
    let t0 = performance.now();
    await registry.registerMany(specs());
    console.log(
      `registered ${INTERFACES} interfaces × ${PROVIDERS} providers in ${(performance.now() - t0).toFixed(0)} ms`,
    );

    // The source alone: what it costs to read the registry and build the objects.
    const events: SourceEvent[] = [];
    const wake: { fn: (() => void) | undefined } = { fn: undefined };
    const builds: number[] = [];
    const source = new ZookeeperSource(
      {
        name: 'bench',
        servers: zk.connectString,
        root: ROOT,
        namespace: 'dubbo',
      },
      { onBuilt: ({ ms }) => builds.push(ms) },
    );
    const firstSnapshot = timeSnapshot(
      events,
      wake,
      () => Promise.resolve(),
      (e) => e.resources.length === INTERFACES,
    );
    const subscription = source.events$.subscribe((e) => {
      events.push(e);
      wake.fn?.();
    });
    console.log(`source: first full state in ${(await firstSnapshot).toFixed(0)} ms`);
    const firstBuilds = builds.length;
    const sourceAdd: number[] = [];
    const sourceRemove: number[] = [];
    for (let i = 0; i < CHANGES; i++) {
      const spec = { iface: `com.bench.Service${i * 7}`, ip: '10.99.0.1' };
      sourceAdd.push(
        await timeSnapshot(
          events,
          wake,
          () => registry.register(spec),
          () => true,
        ),
      );
      sourceRemove.push(
        await timeSnapshot(
          events,
          wake,
          () => registry.unregister(registry.pathOf(spec)),
          () => true,
        ),
      );
    }
    subscription.unsubscribe();
    console.log(
      `source: per change (median of ${CHANGES}) add ${median(sourceAdd)} ms, remove ${median(sourceRemove)} ms ` +
        `(ZooKeeper's watch and read and the ${DEBOUNCE_MS} ms debounce included); the build of the objects ` +
        `${median(builds.slice(firstBuilds))} ms (median of ${builds.length - firstBuilds}, first full state ${median(builds.slice(0, firstBuilds))} ms)`,
    );

    // End to end: meshmux serving an istiod client.
    t0 = performance.now();
    const meshmux = await startFromYaml(
      `sources:\n  - name: dubbo\n    type: zookeeper\n    servers: ${zk.connectString}\n    root: ${ROOT}\n    namespace: dubbo\n`,
      dir,
    );
    const client = new IstiodClient({ address: `127.0.0.1:${meshmux.xdsPort}` }).start();
    try {
      await client.waitFor((c) => c.configs(SE).size === INTERFACES, 120_000);
      console.log(
        `end to end: meshmux start → istiod holds ${INTERFACES} ServiceEntries in ${(performance.now() - t0).toFixed(0)} ms`,
      );
      const endpoints = (i: number): number =>
        ((client.configs(SE).get(`dubbo/com.bench.service${i}`)?.body['endpoints'] ?? []) as unknown[])
          .length;
      const e2eAdd: number[] = [];
      const e2eRemove: number[] = [];
      for (let i = 0; i < CHANGES; i++) {
        const n = i * 11;
        const spec = { iface: `com.bench.Service${n}`, ip: '10.98.0.1' };
        let t = performance.now();
        await registry.register(spec);
        await client.waitFor(() => endpoints(n) === PROVIDERS + 1, 30_000);
        e2eAdd.push(performance.now() - t);
        t = performance.now();
        await registry.unregister(registry.pathOf(spec));
        await client.waitFor(() => endpoints(n) === PROVIDERS, 30_000);
        e2eRemove.push(performance.now() - t);
      }
      t0 = performance.now();
      await registry.register({ iface: 'com.bench.Brand.New', ip: '10.97.0.1' });
      await client.waitFor((c) => c.configs(SE).size === INTERFACES + 1, 30_000);
      const newIface = performance.now() - t0;
      console.log(
        `end to end: per change (median of ${CHANGES}) add ${median(e2eAdd)} ms, remove ${median(e2eRemove)} ms; ` +
          `new interface ${newIface.toFixed(0)} ms; ${(client.bytesReceived / 1e6).toFixed(1)} MB received by istiod ` +
          `(a state of the world per change, every object decoded by the client in this process)`,
      );
      client.close();

      // The same changes to a client that reads only a response's top-level fields, as istiod
      // reads them before it looks at a changed object: what ZooKeeper, the source and meshmux take.
      const fleet = new Fleet(`127.0.0.1:${meshmux.xdsPort}`, 1).start();
      try {
        await fleet.synced(performance.now(), 60_000);
        const nextServiceEntries = (): Promise<void> =>
          new Promise((resolve) => {
            const stop = fleet.listen((_client, typeUrl) => {
              if (typeUrl !== SE_URL) return;
              stop();
              resolve();
            });
          });
        const lightAdd: number[] = [];
        const lightRemove: number[] = [];
        for (let i = 0; i < CHANGES; i++) {
          const spec = { iface: `com.bench.Service${i * 13}`, ip: '10.96.0.1' };
          let t = performance.now();
          let next = nextServiceEntries();
          await registry.register(spec);
          await next;
          lightAdd.push(performance.now() - t);
          t = performance.now();
          next = nextServiceEntries();
          await registry.unregister(registry.pathOf(spec));
          await next;
          lightRemove.push(performance.now() - t);
        }
        console.log(
          `end to end, to a client reading top-level fields: per change (median of ${CHANGES}) add ` +
            `${median(lightAdd)} ms, remove ${median(lightRemove)} ms (the ${DEBOUNCE_MS} ms debounce included)`,
        );
      } finally {
        fleet.close();
      }
    } finally {
      client.close();
      await meshmux.stop();
    }
  } finally {
    await registry.close();
    await zk.dispose();
    await dispose();
  }
}

await main();
