import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { RunningMeshmux } from '../../src/app.js';
import { RawFanout } from '../../bench/baselines.js';
import {
  CONFIG_TYPE_URLS,
  MeshModel,
  POLICIES,
  SE_URL,
  SHAPES,
  type PolicyName,
  type Zone,
} from '../../bench/fixtures.js';
import { discardingSync, Fleet, LatencyTracker } from '../../bench/fleet.js';
import type { ShapeRig } from '../../bench/phases.js';
import type { ServerCounters } from '../../bench/server-process.js';
import { benchMeshmux } from '../support/bench-meshmux.js';
import { until } from '../support/deadline.js';
import { debugCounters, quietCounters } from '../support/debug-counters.js';

// The benchmark's own fixtures, upstream simulators and istiod-like fleet, on a shape small
// enough that every counter has one right value. Timing is the benchmark's business, not this suite's.
describe('exact counters on the benchmark fixtures (shape T)', () => {
  const shape = SHAPES.T;
  let rig: ShapeRig;
  let meshmux: RunningMeshmux;
  let fleet: Fleet;
  let coldCounters: ServerCounters;
  let encodedBeforeClients = 0;

  const counters = (): Promise<ServerCounters> => debugCounters<ServerCounters>(meshmux.adminPort);
  const clientsOf = (policies: ReadonlySet<PolicyName>): number =>
    fleet.members.filter((m) => policies.has(m.policy)).length;
  /** The counters once the server has nothing left to do; fails after 15 s. */
  const quiet = (): Promise<ServerCounters> => quietCounters<ServerCounters>(meshmux.adminPort, ['encodes']);

  before(async () => {
    ({ rig, meshmux } = await benchMeshmux(shape));
    // Nobody is connected yet: meshmux encodes the objects in the background meanwhile.
    await until(
      async () => (encodedBeforeClients = (await counters()).encodes) >= rig.model.servedCount(),
      10_000,
      `every served object to be encoded before a client connects (${rig.model.servedCount()})`,
      { intervalMs: 20, describe: () => `${encodedBeforeClients} encoded` },
    );
    fleet = new Fleet(`127.0.0.1:${meshmux.xdsPort}`, shape.clients).start();
    await fleet.synced(performance.now(), 30_000);
    coldCounters = await quiet();
  });

  after(async () => {
    fleet.close();
    await meshmux.stop();
    await rig.close();
  });

  it('serves every client exactly the reference view of its policy', () => {
    assert.deepEqual(fleet.mismatches(rig.model.expectedDigests()), []);
  });

  it('encodes the objects before the first istiod connects, so connecting costs no encode', () => {
    assert.equal(encodedBeforeClients, rig.model.servedCount());
    assert.equal(coldCounters.encodes, encodedBeforeClients);
  });

  it('encodes each served object once and builds one response per type URL and view', () => {
    assert.equal(coldCounters.encodes, rig.model.servedCount());
    assert.equal(coldCounters.assemblies, POLICIES.length * CONFIG_TYPE_URLS.length);
    assert.equal(coldCounters.pushes, shape.clients * CONFIG_TYPE_URLS.length);
    assert.equal(coldCounters.wastedPushes, 0);
    let held = 0;
    for (const m of fleet.members) for (const t of m.held.values()) held += t.bytes;
    assert.equal(coldCounters.bytesSent, held, 'bytes sent = bytes of the responses the clients hold');
  });

  it('reports CPU, memory and event-loop delay beside the counters', () => {
    assert.ok(coldCounters.process.cpuUserMs > 0);
    assert.ok(coldCounters.process.rssBytes > 0);
    assert.equal(typeof coldCounters.process.eventLoopDelayP99Ms, 'number');
  });

  it('an isolated change costs one encode and one push to each affected client, named by its upstream version', async () => {
    for (const zone of ['edge', 'east', 'west'] as const satisfies readonly Zone[]) {
      const c0 = await quiet();
      const tracker = new LatencyTracker(fleet);
      rig.track(tracker);
      const pick = rig.model.servedInZone(zone);
      const change = rig.model.change('endpoints', pick.upstream, pick);
      rig.apply(change, tracker, true);
      assert.equal(await tracker.settle(20_000), true, `every ${zone} client names the new upstream version`);
      rig.track(undefined);
      tracker.close();
      const c1 = await quiet();
      assert.equal(c1.encodes - c0.encodes, 1, `${zone}: one encode`);
      assert.equal(
        c1.pushes - c0.pushes,
        clientsOf(change.affected),
        `${zone}: one push per affected client`,
      );
      assert.equal(c1.wastedPushes - c0.wastedPushes, 0);
    }
    assert.deepEqual(fleet.mismatches(rig.model.expectedDigests()), []);
  });

  it('an identical resync of every upstream sends nothing and encodes nothing', async () => {
    const c0 = await quiet();
    for (const sim of rig.simulators) sim.dropStreams();
    // Without this resync the assertions below would hold trivially: it must have happened.
    await until(
      () => rig.simulators.every((s) => s.answeredTypes >= 2),
      20_000,
      'every upstream to answer both types again after its streams were dropped',
      { intervalMs: 20 },
    );
    const c1 = await quiet();
    assert.equal(c1.pushes - c0.pushes, 0);
    assert.equal(c1.bytesSent - c0.bytesSent, 0);
    assert.equal(c1.encodes - c0.encodes, 0);
    assert.ok(fleet.members.every((m) => m.held.get(SE_URL) !== undefined));
  });

  it('churn: no wasted push, and the fleet ends on the reference views', async () => {
    const c0 = await quiet();
    const tracker = new LatencyTracker(fleet);
    rig.track(tracker);
    for (let i = 0; i < 40; i++) {
      rig.apply(rig.model.churnChange(), tracker);
      await delay(5);
    }
    for (const sim of rig.simulators) sim.flush();
    assert.equal(await tracker.settle(20_000), true);
    rig.track(undefined);
    tracker.close();
    const c1 = await quiet();
    assert.equal(c1.wastedPushes - c0.wastedPushes, 0);
    // Measured where it matters too: no client received resources it already held.
    assert.deepEqual(
      fleet.members.filter((m) => m.wastedPushes > 0).map((m) => `${m.nodeId}: ${m.wastedPushes}`),
      [],
    );
    assert.deepEqual(fleet.mismatches(rig.model.expectedDigests()), []);
  });
});

describe("the benchmark's raw fan-out and its clients' own counts (shape T)", () => {
  let raw: RawFanout;
  let fleet: Fleet;
  let port: number;

  before(async () => {
    raw = new RawFanout(new MeshModel(SHAPES.T));
    port = await raw.listen();
    fleet = new Fleet(`127.0.0.1:${port}`, 2, { policy: 'edge' }).start();
    await fleet.synced(performance.now(), 30_000);
  });

  after(async () => {
    fleet.close();
    await raw.close();
  });

  it('syncs clients that only count bytes: every byte checking clients of the same views receive', async () => {
    // Two checking clients numbered as the discarding ones are (the same policies, the same views).
    const checking = new Fleet(`127.0.0.1:${port}`, 2).start();
    try {
      await checking.synced(performance.now(), 10_000);
      const { bytes } = await discardingSync(`127.0.0.1:${port}`, 2, 10_000);
      const checked = checking.members.reduce((n, m) => n + m.bytesReceived, 0);
      // On the stream: each response's five bytes of gRPC framing beside what the checking clients count.
      assert.equal(bytes, checked + 5 * 2 * CONFIG_TYPE_URLS.length);
    } finally {
      checking.close();
    }
  });

  it('counts a push of resources a client already held as wasted, at the client, whatever the server says', async () => {
    const before = fleet.members.map((m) => m.responses);
    // The same ServiceEntry resources as the initial state, under a new version and nonce.
    raw.push('edge', 1);
    raw.push('edge', 2, true);
    await until(
      () => fleet.members.every((m, i) => m.responses >= (before[i] ?? 0) + 2),
      10_000,
      'both pushes at both clients',
    );
    assert.deepEqual(
      fleet.members.map((m) => m.wastedPushes),
      [2, 2],
    );
    assert.deepEqual(
      fleet.members.map((m) => m.held.get(SE_URL)?.version),
      ['raw~u9-2', 'raw~u9-2'],
    );
  });
});
