import assert from 'node:assert/strict';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { map, Observable, VirtualTimeScheduler } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { rootLogger } from '../../../src/core/logger.js';
import type { ConfigResource } from '../../../src/core/resource.js';
import type { SourceEvent, SourceSnapshotEvent } from '../../../src/core/source-event.js';
import { KINDS } from '../../../src/schema/kinds.js';
import { FileSource } from '../../../src/upstream/file/file-source.js';
import { GitSource } from '../../../src/upstream/git/git-source.js';
import { transportOf } from '../../../src/upstream/streaming/dial-settings.js';
import { ReconnectingStream } from '../../../src/upstream/streaming/reconnecting-stream.js';
import { SubscriptionState, type ChannelUpdate } from '../../../src/upstream/streaming/subscription-state.js';
import { serviceEntry, TestRepo } from '../../support/git-fixtures.js';
import { tempDir } from '../../support/meshmux-harness.js';
import { fakeResource } from '../../support/resources.js';
import { SourceEventRecorder } from '../../support/source-event-recorder.js';
import { until } from '../../support/deadline.js';
import { DubboRegistry } from '../../support/dubbo-registry.js';
import { suiteSkip } from '../../support/required-peer.js';
import { ZookeeperServer, zookeeperMissing } from '../../support/zookeeper-server.js';
import { ZookeeperSource } from '../../../src/upstream/zookeeper/zookeeper-source.js';

const VS = 'networking.istio.io/VirtualService';
const SE = 'networking.istio.io/ServiceEntry';
const log = rootLogger.child({ test: true });

/** Virtual time that moves only when told: runs every action due up to `t` (ms since the start). */
function virtualClock(): { scheduler: VirtualTimeScheduler; runUntil: (t: number) => void } {
  const scheduler = new VirtualTimeScheduler();
  return {
    scheduler,
    runUntil: (t) => {
      scheduler.maxFrames = t;
      scheduler.flush();
    },
  };
}

function update(resources: readonly ConfigResource[]): ChannelUpdate {
  return {
    resources: new Map(resources.map((r) => [`${r.namespace}/${r.name}`, r])),
    rejected: new Map(),
    unnamed: [],
    warnings: [],
    version: 'v1',
  };
}

function kind(key: string) {
  const k = KINDS.get(key);
  assert.ok(k);
  return k;
}

/** `c`onnecting, `s`ynced, `t` stale, `f`ailing; `S`napshot of every kind, or the first letter of the one kind it covers. */
function letter(e: SourceEvent): string {
  if (e.type === 'status')
    return { connecting: 'c', restored: 'r', synced: 's', stale: 't', failing: 'f' }[e.state];
  const kinds = [...(e.kinds ?? [])];
  if (kinds.length !== 1) return 'S';
  return kinds[0] === VS ? 'V' : 'E';
}

describe('source timing on virtual time', () => {
  let root: string;
  let dispose: () => Promise<void>;

  before(async () => {
    ({ dir: root, dispose } = await tempDir('meshmux-source-timing-'));
  });
  after(async () => {
    await dispose();
  });

  it('serves what answered when the sync budget passes, fails naming the mute kind, and syncs on its late answer', () => {
    const testScheduler = new TestScheduler((actual, expected) => assert.deepEqual(actual, expected));
    testScheduler.run(({ expectObservable }) => {
      const events$ = new Observable<SourceEvent>((subscriber) => {
        const state = new SubscriptionState({
          source: 'timed',
          upstream: 'xds://upstream.test:15010',
          channels: [
            { id: 'networking.istio.io/v1/VirtualService', kind: kind(VS) },
            { id: 'networking.istio.io/v1/ServiceEntry', kind: kind(SE) },
          ],
          emit: (e) => subscriber.next(e),
          log,
          syncTimeoutMs: 100,
          scheduler: testScheduler,
        });
        state.start();
        state.streamOpened();
        state.apply('networking.istio.io/v1/VirtualService', update([fakeResource('r', { kind: VS })]));
        const late = testScheduler.schedule(
          () => state.apply('networking.istio.io/v1/ServiceEntry', update([fakeResource('e', { kind: SE })])),
          150,
        );
        return () => {
          late.unsubscribe();
          state.stop();
        };
      });
      expectObservable(events$.pipe(map(letter)), '^ 300ms !').toBe('c 99ms (Vf) 46ms (Es)');
    });
  });

  it('deletes the objects of a file that stays empty or removed exactly when the grace period ends, not before', async () => {
    const dir = path.join(root, 'grace');
    await mkdir(dir);
    await writeFile(path.join(dir, 'a.yaml'), serviceEntry('cart', 'shop', 'cart.example.com'));
    await writeFile(path.join(dir, 'b.yaml'), serviceEntry('ledger', 'shop', 'ledger.example.com'));
    await writeFile(path.join(dir, 'c.yaml'), serviceEntry('stock', 'shop', 'stock.example.com'));
    const { scheduler, runUntil } = virtualClock();
    const recorder = new SourceEventRecorder(
      new FileSource({
        name: 'graced',
        path: dir,
        defaultNamespace: 'default',
        rescanMs: 1_000,
        vanishGraceMs: 10_000,
        scheduler,
      }).events$,
    );
    try {
      const names = (s: SourceSnapshotEvent): string[] => [...s.resources].map((r) => r.name).sort();
      const snapshotWith = async (name: string, from: number): Promise<SourceSnapshotEvent> =>
        (await recorder.next(
          (e) => e.type === 'snapshot' && [...e.resources].some((r) => r.name === name),
          from,
        )) as SourceSnapshotEvent;
      assert.deepEqual(names(await recorder.snapshot()), ['cart', 'ledger', 'stock']);

      // Emptied and removed at 1 s (the next rescan); a marker shows the scan that saw it.
      let from = recorder.count;
      await writeFile(path.join(dir, 'a.yaml'), '# nothing here any more\n');
      await rm(path.join(dir, 'c.yaml'));
      await writeFile(path.join(dir, 'm1.yaml'), serviceEntry('m1', 'shop', 'm1.example.com'));
      runUntil(1_000);
      assert.deepEqual(names(await snapshotWith('m1', from)), ['cart', 'ledger', 'm1', 'stock']);

      // One virtual millisecond before the grace ends, every rescan still keeps them.
      from = recorder.count;
      await writeFile(path.join(dir, 'm2.yaml'), serviceEntry('m2', 'shop', 'm2.example.com'));
      runUntil(10_999);
      assert.deepEqual(names(await snapshotWith('m2', from)), ['cart', 'ledger', 'm1', 'm2', 'stock']);

      from = recorder.count;
      runUntil(11_000);
      const gone = (await recorder.next(
        (e) => e.type === 'snapshot' && ![...e.resources].some((r) => r.name === 'cart'),
        from,
      )) as SourceSnapshotEvent;
      assert.equal(scheduler.now(), 11_000, 'deleted when the grace period ends');
      assert.deepEqual(names(gone), ['ledger', 'm1', 'm2']);
    } finally {
      recorder.close();
    }
  });

  it('polls a git ref once per interval and serves the new commit at the poll', async () => {
    const repo = await TestRepo.create(root, 'polled');
    const first = await repo.commitAndPush(
      { 'istio/a.yaml': serviceEntry('a', 'shop', 'a.example.com') },
      'a',
    );
    const { scheduler, runUntil } = virtualClock();
    const recorder = new SourceEventRecorder(
      new GitSource({
        name: 'polled',
        url: repo.fileUrl,
        ref: 'main',
        defaultNamespace: 'default',
        intervalMs: 60_000,
        cacheDir: path.join(root, 'git-cache'),
        scheduler,
      }).events$,
    );
    try {
      assert.equal((await recorder.snapshot()).revision, first);
      const second = await repo.commitAndPush(
        { 'istio/b.yaml': serviceEntry('b', 'shop', 'b.example.com') },
        'b',
      );
      const from = recorder.count;
      // The first fetch ended at 0 ms: its next poll is due at 60 s, and nothing runs before it.
      runUntil(59_999);
      assert.equal(scheduler.now(), 0, 'no poll before the interval');
      runUntil(60_000);
      const next = (await recorder.next((e) => e.type === 'snapshot', from)) as SourceSnapshotEvent;
      assert.equal(next.revision, second);
      assert.equal(scheduler.now(), 60_000);
    } finally {
      recorder.close();
    }
  });

  it('retries a failing git fetch once per interval, and serves the first commit at the retry after it appears', async () => {
    const repo = await TestRepo.create(root, 'late');
    const { scheduler, runUntil } = virtualClock();
    const source = new GitSource({
      name: 'late',
      url: repo.fileUrl,
      ref: 'main',
      defaultNamespace: 'default',
      intervalMs: 60_000,
      cacheDir: path.join(root, 'git-cache'),
      scheduler,
    });
    const recorder = new SourceEventRecorder(source.events$);
    const pollDueAt = (t: number): Promise<void> =>
      until(
        () => scheduler.actions.some((a) => a.delay === t),
        15_000,
        `the git source to schedule its next fetch at ${t} ms`,
        { intervalMs: 10 },
      );
    try {
      await recorder.status('failing');
      await pollDueAt(60_000);
      runUntil(60_000);
      assert.equal(source.status().lastFetchAttempt, new Date(60_000).toISOString());
      await pollDueAt(120_000);
      const commit = await repo.commitAndPush(
        { 'istio/a.yaml': serviceEntry('a', 'shop', 'a.example.com') },
        'a',
      );
      const from = recorder.count;
      runUntil(119_999);
      assert.equal(
        source.status().lastFetchAttempt,
        new Date(60_000).toISOString(),
        'no fetch before the interval',
      );
      runUntil(120_000);
      const served = (await recorder.next((e) => e.type === 'snapshot', from)) as SourceSnapshotEvent;
      assert.equal(served.revision, commit);
      assert.equal(scheduler.now(), 120_000);
    } finally {
      recorder.close();
    }
  });

  describe('a reconnecting stream', () => {
    let server: Server;
    let address: string;

    before(async () => {
      // A peer that accepts each connection and drops it at once: every stream fails.
      server = createServer((socket) => socket.destroy());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const bound = server.address();
      assert.ok(bound !== null && typeof bound === 'object');
      address = `127.0.0.1:${bound.port}`;
    });
    after(async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    it('redials after a backoff that doubles up to its cap, and starts over once the upstream answered', async () => {
      const { scheduler, runUntil } = virtualClock();
      const opens: number[] = [];
      let closes = 0;
      let closed: (() => void) | undefined;
      const stream = new ReconnectingStream(
        {
          address,
          method: '/test.Service/Stream',
          describe: `xds://${address}`,
          transport: transportOf({}),
          backoff: { initialMs: 1_000, maxMs: 4_000, multiplier: 2, jitter: 0 },
          log,
          scheduler,
        },
        {
          onOpen: () => opens.push(scheduler.now()),
          onMessage: () => undefined,
          onClose: () => {
            closes++;
            closed?.();
          },
        },
      );
      const nextClose = (): Promise<void> =>
        new Promise<void>((resolve, reject) => {
          const seen = closes;
          const deadline = setTimeout(
            () => reject(new Error(`stream ${seen + 1} did not end within 10 s`)),
            10_000,
          );
          closed = () => {
            clearTimeout(deadline);
            resolve();
          };
        });
      try {
        let ended = nextClose();
        stream.start();
        for (let i = 0; i < 4; i++) {
          await ended;
          ended = nextClose();
          runUntil(Number.MAX_SAFE_INTEGER);
        }
        await ended;
        assert.deepEqual(opens, [0, 1_000, 3_000, 7_000, 11_000]);
        stream.answered();
        ended = nextClose();
        runUntil(Number.MAX_SAFE_INTEGER);
        await ended;
        assert.equal(
          opens.at(-1),
          11_000 + 4_000,
          'the delay after the last close was drawn before the answer',
        );
        stream.answered();
        ended = nextClose();
        runUntil(Number.MAX_SAFE_INTEGER);
        await ended;
        assert.equal(opens.at(-1), 15_000 + 1_000, 'starts over from the shortest delay');
      } finally {
        stream.stop();
      }
    });
  });

  describe('a zookeeper source', { skip: suiteSkip(zookeeperMissing()) }, () => {
    let zk: ZookeeperServer;
    before(async () => {
      zk = await ZookeeperServer.start();
    });
    after(async () => {
      await zk.dispose();
    });

    it('publishes a registry change once its debounce has passed, not a virtual millisecond before', async () => {
      const registry = await DubboRegistry.connect(zk.connectString, { root: '/debounced' });
      await registry.register({ iface: 'com.debounced.Svc', ip: '10.0.0.1' });
      const { scheduler, runUntil } = virtualClock();
      const recorder = new SourceEventRecorder(
        new ZookeeperSource({
          name: 'debounced',
          servers: zk.connectString,
          root: '/debounced',
          namespace: 'dubbo',
          debounceMs: 500,
          scheduler,
        }).events$,
      );
      try {
        const first = await recorder.snapshot();
        assert.ok(first.resources.length > 0);
        const from = recorder.count;
        await registry.register({ iface: 'com.debounced.Svc', ip: '10.0.0.2' });
        // The watch fired once the debounce is pending: the only action due before the liveness probe.
        await until(
          () => scheduler.actions.some((a) => a.delay === 500),
          15_000,
          'the registry change to start the debounce',
          { intervalMs: 10 },
        );
        runUntil(499);
        assert.equal(recorder.count, from, 'nothing published before the debounce passed');
        runUntil(500);
        const published = recorder.events.slice(from).find((e) => e.type === 'snapshot');
        assert.ok(published !== undefined, 'published when the debounce passed');
        const hosts = (s: SourceSnapshotEvent): string =>
          [...s.resources].map((r) => Buffer.from(r.body).toString('latin1')).join();
        assert.ok(hosts(published).includes('10.0.0.2'), 'with the new provider');
      } finally {
        recorder.close();
        await registry.close();
      }
    });
  });
});
