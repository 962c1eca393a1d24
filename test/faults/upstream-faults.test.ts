/**
 * Upstream faults against meshmux running as its own process, with an istiod stand-in connected:
 * after each fault, what the istiod holds is compared with what it held before (objects lost must
 * be 0), and the time it took to serve is printed.
 */
import assert from 'node:assert/strict';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { kindNamed, type FakeObject } from '../support/fake-objects.js';
import {
  bareBodyAny,
  discoveryResponse,
  everyConfigTypeUrl,
  mcpAny,
  type RawAny,
} from '../support/faulty-responses.js';
import { freePort } from '../support/free-port.js';
import { TestRepo, serviceEntry, virtualService } from '../support/git-fixtures.js';
import {
  confirm,
  connectIstiod,
  inventory,
  lost,
  MESH_NAMES,
  meshServiceEntry,
  meshUpstream,
  readiness,
  report,
} from '../support/fault-kit.js';
import { until } from '../support/deadline.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { runMeshmuxCli } from '../support/meshmux-cli.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { fakeDestinationRule, fakeServiceEntry, fakeVirtualService } from '../support/fake-objects.js';
import { deltaResponse, ScriptedDeltaUpstream } from '../support/scripted-delta-upstream.js';
import { DR, SE, VS } from '../support/type-urls.js';

const VS_KIND = kindNamed('VirtualService');

/** A meshmux process of its own in `dir`, configured by `lines` of its YAML. */
async function meshmuxWith(dir: string, lines: readonly string[]): Promise<MeshmuxProcess> {
  await writeFile(path.join(dir, 'meshmux.yaml'), [...lines, ''].join('\n'));
  return MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
}
const DR_KIND = kindNamed('DestinationRule');

describe('faults: an xds upstream mute from the start, beside a file source', () => {
  let dir: { dir: string; dispose: () => Promise<void> };
  let mute: FakeAdsServer;
  let meshmux: MeshmuxProcess;
  let client: IstiodClient;
  let servedMs = 0;

  before(async () => {
    dir = await tempDir('meshmux-fault-mute-');
    mute = await FakeAdsServer.start({ peer: 'istiod', mute: everyConfigTypeUrl() });
    mute.set('VirtualService', [fakeVirtualService('reviews')]);
    await mkdir(path.join(dir.dir, 'files'));
    await writeFile(
      path.join(dir.dir, 'files', 'egress.yaml'),
      serviceEntry('cards', 'payments', 'api.cards.example.com'),
    );
    meshmux = await meshmuxWith(dir.dir, [
      'syncTimeout: 2s',
      'sources:',
      '  - name: files',
      '    type: file',
      '    path: files',
      '  - name: mute',
      '    type: xds',
      `    address: ${mute.address}`,
      '    kinds: [VirtualService]',
      '    syncTimeout: 500ms',
    ]);
    client = connectIstiod(meshmux.xds);
    await client.waitFor(
      (c) => c.configs(SE).has('payments/cards'),
      15_000,
      () => 'the file source served',
    );
    servedMs = performance.now() - meshmux.spawnedAt;
  });
  after(async () => {
    client.close();
    await meshmux.kill();
    await mute.stop();
    await dir.dispose();
  });

  it("serves the file source's objects and reports the mute source as failing, never as synced", async () => {
    await mute.waitFor(() => mute.requests.length > 0, 5_000, 'the subscription');
    // The source's own budget (500 ms) reports it; the log says so first.
    await meshmux.waitForLog(
      (e) => e['source'] === 'mute' && /did not answer/.test(String(e['msg'])),
      0,
      5_000,
      'a log line naming the mute source',
    );
    const { body: ready } = await readiness(meshmux.http);
    assert.equal(ready.sources.find((s) => s.name === 'mute')?.state, 'failing', JSON.stringify(ready));
    assert.equal(ready.sources.find((s) => s.name === 'files')?.state, 'synced');
    assert.equal(mute.sent.length, 0, 'the upstream never answered');
    report('xds upstream mute from the start', {
      'objects lost': 0,
      'ms from spawn to the file source served': servedMs,
    });
  });

  it("never answers the mute source's kinds as empty, not even after the startup budget", async () => {
    await meshmux.waitForLog((e) => /startup budget passed/.test(String(e['msg'])), 0, 5_000, 'the budget');
    // A later change of the file source: once it arrived, whatever the budget caused has arrived too.
    await writeFile(
      path.join(dir.dir, 'files', 'later.yaml'),
      serviceEntry('later', 'payments', 'later.example.com'),
    );
    await client.waitFor(
      (c) => c.configs(SE).has('payments/later'),
      10_000,
      () => 'the later file',
    );
    assert.equal(
      client.responses.get(VS) ?? 0,
      0,
      'VirtualService was answered while its only source is mute',
    );
  });
});

describe('faults: an xds upstream sending responses that cannot be named, on a live stream', () => {
  let dir: { dir: string; dispose: () => Promise<void> };
  let upstream: FakeAdsServer;
  let meshmux: MeshmuxProcess;
  let client: IstiodClient;

  before(async () => {
    dir = await tempDir('meshmux-fault-nack-');
    upstream = await FakeAdsServer.start({ peer: 'istiod' });
    upstream
      .set('VirtualService', [
        fakeVirtualService('reviews'),
        fakeVirtualService('ratings'),
        fakeVirtualService('details'),
      ])
      .set('DestinationRule', [fakeDestinationRule('reviews')]);
    meshmux = await meshmuxWith(dir.dir, [
      'syncTimeout: 10s',
      'sources:',
      '  - name: upstream',
      '    type: xds',
      `    address: ${upstream.address}`,
      '    kinds: [VirtualService, DestinationRule]',
      '    apiVersions: current',
    ]);
    client = connectIstiod(meshmux.xds);
    await client.waitFor(
      (c) => c.configs(VS).size === 3 && c.configs(DR).size === 1,
      15_000,
      () => 'the upstream served',
    );
  });
  after(async () => {
    client.close();
    await meshmux.kill();
    await upstream.stop();
    await dir.dispose();
  });

  /** A DestinationRule change that must reach the istiod: once it has, every earlier response was handled. */
  async function marker(name: string): Promise<number> {
    const started = performance.now();
    upstream.set('DestinationRule', [fakeDestinationRule('reviews'), fakeDestinationRule(name)]);
    upstream.push();
    await client.waitFor(
      (c) => c.configs(DR).has(`shop/${name}`),
      10_000,
      () => `marker ${name}`,
    );
    return performance.now() - started;
  }

  /**
   * Pushes VirtualServices of which one is refused, waits until `served` reaches the istiod and
   * until the upstream receives a NACK matching `nack`; returns how long the valid ones took.
   */
  async function pushWithRefused(objects: FakeObject[], served: string, nack: RegExp): Promise<number> {
    const started = performance.now();
    upstream.set('VirtualService', objects);
    upstream.push();
    await client.waitFor(
      (c) => c.configs(VS).has(`shop/${served}`),
      10_000,
      () => 'the valid objects of the same response',
    );
    const servedMs = performance.now() - started;
    await upstream.waitFor(
      () => upstream.requests.some((r) => r.typeUrl === VS && nack.test(r.errorDetail?.message ?? '')),
      5_000,
      `a NACK matching ${String(nack)}`,
    );
    return servedMs;
  }

  it('keeps every object on the istiod after resources in the wrong Any and responses with swapped type URLs', async () => {
    const held = inventory(client);
    const nonces = ['bare-bodies', 'swapped', 'swapped-back'];
    const started = performance.now();
    upstream.sendRaw(
      discoveryResponse(VS, [bareBodyAny(VS_KIND, fakeVirtualService('reviews'))], 'bare-bodies'),
    );
    upstream.sendRaw(discoveryResponse(VS, [mcpAny(DR_KIND, fakeDestinationRule('reviews'))], 'swapped'));
    upstream.sendRaw(discoveryResponse(DR, [mcpAny(VS_KIND, fakeVirtualService('reviews'))], 'swapped-back'));
    await upstream.waitFor(
      () => nonces.every((n) => upstream.requests.some((r) => r.nonce === n)),
      5_000,
      'an answer to every faulty response',
    );
    const handledMs = performance.now() - started;
    for (const nonce of nonces) {
      const answer = upstream.requests.find((r) => r.nonce === nonce);
      assert.equal(answer?.errorDetail?.code, 3, `${nonce} is NACKed`);
    }
    const markerMs = await marker('after-faults');
    const missing = lost(held, inventory(client));
    assert.deepEqual(missing, [], 'objects lost');
    report('wrong Any types and swapped type URLs', {
      'objects lost': missing.length,
      'ms to NACK the three responses': handledMs,
      'ms for the next change to reach the istiod': markerMs,
    });
  });

  it('never serves an upstream object named `NOT A VALID NAME!!`, NACKs it by name and serves the rest', async () => {
    const held = inventory(client);
    const servedMs = await pushWithRefused(
      [
        fakeVirtualService('reviews'),
        fakeVirtualService('ratings'),
        fakeVirtualService('details'),
        fakeVirtualService('NOT A VALID NAME!!', 'bad'),
        fakeVirtualService('added'),
      ],
      'added',
      /NOT A VALID NAME!!/,
    );
    assert.ok(!client.configs(VS).has('shop/NOT A VALID NAME!!'), 'the invalid object reached the istiod');
    assert.ok(
      !client.problems.some((p) => p.resourceName?.includes('NOT A VALID NAME') === true),
      'the istiod was never sent it',
    );
    const missing = lost(held, inventory(client));
    assert.deepEqual(missing, [], 'objects lost');
    report('an upstream object with an invalid name', {
      'objects lost': missing.length,
      'ms for the rest of the response to reach the istiod': servedMs,
    });
  });

  it('keeps serving the last good version of an object whose new body holds a string that is not UTF-8', async () => {
    const held = inventory(client);
    const before = client.configs(VS).get('shop/reviews');
    assert.ok(before !== undefined, 'reviews is served to begin with');
    const servedMs = await pushWithRefused(
      [
        // hosts: ["\xff\xfe"]: Go's protobuf runtime, and so istiod, refuses to read it.
        { ...fakeVirtualService('reviews'), rawBody: Uint8Array.from([0x0a, 0x02, 0xff, 0xfe]) },
        fakeVirtualService('ratings'),
        fakeVirtualService('details'),
        fakeVirtualService('added'),
        fakeVirtualService('utf8-marker'),
      ],
      'utf8-marker',
      /not valid UTF-8/,
    );
    assert.deepEqual(
      client.configs(VS).get('shop/reviews'),
      before,
      'the istiod keeps the last good version',
    );
    const missing = lost(held, inventory(client));
    assert.deepEqual(missing, [], 'objects lost');
    report('an upstream object with a string that is not UTF-8', {
      'objects lost': missing.length,
      'ms for the rest of the response to reach the istiod': servedMs,
    });
  });
});

describe('faults: a delta upstream whose first state on a new stream is refused', () => {
  const SE_KIND = kindNamed('ServiceEntry');
  const entry = (i: number, host = `svc-${i}.example.com`): { name: string; any: RawAny } => ({
    name: `payments/svc-${i}`,
    any: mcpAny(SE_KIND, fakeServiceEntry(`svc-${i}`, host)),
  });
  const COUNT = 8;
  const all = (changed?: string): Array<{ name: string; any: RawAny }> =>
    Array.from({ length: COUNT }, (_, i) =>
      i === 0 && changed !== undefined ? entry(0, changed) : entry(i),
    );

  let dir: { dir: string; dispose: () => Promise<void> };
  let upstream: ScriptedDeltaUpstream;
  let meshmux: MeshmuxProcess;
  let client: IstiodClient;

  before(async () => {
    dir = await tempDir('meshmux-fault-delta-');
    upstream = await ScriptedDeltaUpstream.start();
    meshmux = await meshmuxWith(dir.dir, [
      'syncTimeout: 10s',
      'sources:',
      '  - name: nacos',
      '    type: xds',
      '    delta: true',
      `    address: ${upstream.address}`,
      '    kinds: [ServiceEntry]',
      '    apiVersions: current',
      '    reconnect: { initialDelay: 50ms, maxDelay: 400ms }',
    ]);
    client = connectIstiod(meshmux.xds);
    await upstream.waitFor(() => upstream.subscriptions(SE) === 1, 15_000, 'the first stream');
    upstream.send(deltaResponse(SE, all(), 'first'));
    await client.waitFor(
      (c) => c.configs(SE).size === COUNT,
      15_000,
      () => 'the first state served',
    );
  });
  after(async () => {
    client.close();
    await meshmux.kill();
    upstream.stop();
    await dir.dispose();
  });

  it('keeps every object when a change follows a refused first state, and reads the complete state on a new stream', async () => {
    const held = inventory(client);
    const started = performance.now();
    upstream.endStreams();
    await upstream.waitFor(() => upstream.subscriptions(SE) === 2, 10_000, 'a second stream');
    // The second stream's first response, the complete state, holds one entry in the wrong Any:
    // refused whole. The upstream then sends its next change, on that stream, as delta servers do.
    const torn = [...all()];
    torn.splice(3, 0, {
      name: 'payments/torn',
      any: bareBodyAny(VS_KIND, fakeVirtualService('torn')),
    });
    upstream.send(deltaResponse(SE, torn, 'torn-first'));
    upstream.send(deltaResponse(SE, [entry(0, 'changed.example.com')], 'a-change'));
    await upstream.waitFor(
      () => upstream.requests.some((r) => r.nonce === 'torn-first' && r.errorDetail?.code === 3),
      10_000,
      'the NACK of the refused state',
    );
    // Taken on the stream, the change would be answered (and served, an istiod push later).
    await upstream.waitFor(
      () => upstream.subscriptions(SE) === 3 || upstream.requests.some((r) => r.nonce === 'a-change'),
      10_000,
      'a third stream, or an answer to the change',
    );
    const reopenedMs = performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 500));
    const lostMeanwhile = lost(held, inventory(client));
    assert.deepEqual(lostMeanwhile, [], 'nothing the istiod held is lost');
    await upstream.waitFor(() => upstream.subscriptions(SE) === 3, 10_000, 'a third stream');
    upstream.send(deltaResponse(SE, all('changed.example.com'), 'complete'));
    await client.waitFor(
      (c) =>
        (c.configs(SE).get('payments/svc-0')?.body['hosts'] as string[] | undefined)?.[0] ===
        'changed.example.com',
      10_000,
      () => 'the complete state of the third stream served',
    );
    assert.equal(client.configs(SE).size, COUNT);
    assert.deepEqual(lost(held, inventory(client)), []);
    const sources = (await (await fetch(`${meshmux.admin}/debug/sources`)).json()) as Array<{
      name: string;
      state: string;
    }>;
    assert.equal(sources.find((x) => x.name === 'nacos')?.state, 'synced');
    report('a change after a refused first state on a delta stream', {
      'objects lost': lostMeanwhile.length,
      'ms to a new stream': reopenedMs,
    });
  });
});

describe('faults: a git remote gone when meshmux restarts', () => {
  it('serves the last commit of its mirror after a SIGKILL and a restart while the remote is gone', async () => {
    const dir = await tempDir('meshmux-fault-git-');
    const repo = await TestRepo.create(dir.dir, 'mesh');
    await repo.commitAndPush(
      {
        'istio/routes.yaml': virtualService('reviews', 'shop', 'reviews.shop.svc.cluster.local'),
        'istio/egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com'),
      },
      'first',
    );
    const configFile = path.join(dir.dir, 'meshmux.yaml');
    await writeFile(
      configFile,
      [
        'syncTimeout: 3s',
        'sources:',
        '  - name: mesh',
        '    type: git',
        `    url: ${repo.fileUrl}`,
        '    ref: main',
        '    interval: 1h',
        '    timeout: 5s',
        '    cacheDir: cache',
        '',
      ].join('\n'),
    );
    const xds = `127.0.0.1:${await freePort()}`;
    let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    const client = connectIstiod(xds);
    try {
      await client.waitFor(
        (c) => c.configs(VS).has('shop/reviews') && c.configs(SE).has('payments/cards'),
        15_000,
        () => 'the first commit served',
      );
      const held = inventory(client);
      await meshmux.kill('SIGKILL');
      await rename(repo.remote, `${repo.remote}.moved`);
      const streamsBefore = client.streams;

      // Restarted on the same port: the istiod stand-in redials it, as istiod does, keeping its store.
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      await client.waitFor(
        (c) =>
          [VS, SE].every((t) => c.received.some((r) => r.stream > streamsBefore && r.typeUrl === t)) &&
          c.acks.some((a) => a.stream > streamsBefore && a.typeUrl === SE),
        15_000,
        () => 'answers of the restarted meshmux',
      );
      const servedMs = performance.now() - meshmux.spawnedAt;
      const missing = lost(held, inventory(client));
      assert.deepEqual(missing, [], 'objects lost');
      await meshmux.waitForLog(
        (e) => e['source'] === 'mesh' && /serving the commit last fetched/.test(String(e['msg'])),
        0,
        5_000,
        'the log line saying the mirror is served',
      );
      const timeOf = (msg: string): number => Number(meshmux.logs.find((e) => e['msg'] === msg)?.['time']);
      const { body: ready } = await readiness(meshmux.http);
      assert.equal(ready.sources[0]?.state, 'stale', JSON.stringify(ready));
      report('git remote gone at restart', {
        'objects lost': missing.length,
        'ms from "meshmux started" to the commit served':
          timeOf('serving commit') - timeOf('meshmux started'),
        'ms from spawn to the istiod served again (process start and istiod redial included)': servedMs,
      });
    } finally {
      client.close();
      await meshmux.kill();
      await dir.dispose();
    }
  });
});

describe('faults: an xds upstream wearing itself down a few objects per response', () => {
  it('holds the wearing down once it passes the ratio of the most the source held, as one update would be', async () => {
    const dir = await tempDir('meshmux-fault-erosion-');
    const fake = await FakeAdsServer.start({ peer: 'istiod' });
    const entries = (from: number): FakeObject[] =>
      Array.from({ length: 100 - from }, (_, i) =>
        fakeServiceEntry(`svc-${from + i}`, `svc-${from + i}.example.com`),
      );
    fake.set('ServiceEntry', entries(0));
    const meshmux = await meshmuxWith(dir.dir, [
      'sources:',
      '  - name: mesh',
      '    type: xds',
      `    address: ${fake.address}`,
      '    kinds: [ServiceEntry]',
    ]);
    const client = connectIstiod(meshmux.xds);
    try {
      await client.waitFor(
        (c) => c.configs(SE).size === 100,
        15_000,
        () => 'the first state',
      );
      // Nine fewer objects per response, 1.5 s apart (past the settle window each time): each
      // response alone deletes fewer than 10, under any ratio.
      for (let step = 1; step <= 10; step++) {
        fake.set('ServiceEntry', entries(9 * step)).push();
        await new Promise((r) => setTimeout(r, 1_500));
      }
      await meshmux.waitForLog(
        (e) => e['source'] === 'mesh' && /delete too much/.test(String(e['msg'])),
        0,
        5_000,
        'the wearing down held',
      );
      const held = client.configs(SE).size;
      const sources =
        await meshmux.debug<Array<{ name: string; held?: { deletions: number; total: number } }>>('sources');
      const hold = sources.find((s) => s.name === 'mesh')?.held;
      assert.deepEqual([hold?.deletions, hold?.total], [90, 100], 'judged against the most it held');
      assert.ok(held >= 50, `the istiod holds ${held} of 100: no more than half lost`);
      report('an upstream wearing itself down 9 objects per response', {
        'objects lost of 100': 100 - held,
        'responses applied': (100 - held) / 9,
      });
    } finally {
      client.close();
      await meshmux.kill();
      await fake.stop();
      await dir.dispose();
    }
  });
});

describe('faults: an upstream that answers one kind with nothing, and a kind an operator deletes', () => {
  it('holds a kind taken whole, however few of the source’s objects that is, until confirmed', async () => {
    const dir = await tempDir('meshmux-fault-kind-gone-');
    const fake = await meshUpstream();
    const meshmux = await meshmuxWith(dir.dir, [
      'sources:',
      '  - name: mesh',
      '    type: xds',
      `    address: ${fake.address}`,
    ]);
    const client = connectIstiod(meshmux.xds);
    const held = async (): Promise<{ reason: string; emptiedKinds?: string[] } | undefined> => {
      const sources =
        await meshmux.debug<Array<{ name: string; held?: { reason: string; emptiedKinds?: string[] } }>>(
          'sources',
        );
      return sources.find((s) => s.name === 'mesh')?.held;
    };
    try {
      await client.waitFor(
        (c) => c.configs(VS).size === 5 && c.configs(DR).size === 5 && c.configs(SE).size === 5,
        15_000,
        () => 'the first state',
      );
      const served = inventory(client);
      // Its DestinationRules not ready, the upstream answers them with nothing: 5 of its 15
      // objects, under every count the guards had.
      fake.set('DestinationRule', []).push();
      // Past the settle window (1 s), where the guards judge the update.
      await new Promise((r) => setTimeout(r, 2_000));
      const gone = lost(served, inventory(client));
      assert.deepEqual(gone, [], `the istiod lost ${gone.length} of ${served.size}`);
      await meshmux.waitForLog(
        (e) => e['source'] === 'mesh' && /every object of a kind/.test(String(e['msg'])),
        0,
        10_000,
        'the emptied kind held',
      );
      const hold = await held();
      assert.deepEqual(
        [hold?.reason, hold?.emptiedKinds],
        ['emptied-kind', ['networking.istio.io/DestinationRule']],
      );
      // Named where an operator looks: the status page and `meshmux status`.
      const page = await (await fetch(`${meshmux.admin}/`)).text();
      assert.match(page, /emptied-kind \(networking\.istio\.io\/DestinationRule\): 5 of 15 deletion/);
      const status = await runMeshmuxCli(['status', '--admin', meshmux.admin]);
      assert.match(status.stdout, /HELD: emptied-kind \(networking\.istio\.io\/DestinationRule\), 5 of 15/);

      // Meanwhile the source's other kinds follow their upstream: a ServiceEntry added is served.
      const addedAt = performance.now();
      fake.set('ServiceEntry', [...MESH_NAMES, 'svc-new'].map(meshServiceEntry)).push();
      await client.waitFor(
        (c) => c.configs(SE).has('shop/svc-new'),
        10_000,
        () => 'a ServiceEntry added while the DestinationRules are held',
      );
      const addedMs = performance.now() - addedAt;
      assert.equal(client.configs(DR).size, 5, 'the held kind still served');
      assert.deepEqual((await held())?.emptiedKinds, ['networking.istio.io/DestinationRule']);

      // The upstream's DestinationRules back: the hold ends by itself.
      fake
        .set(
          'DestinationRule',
          MESH_NAMES.map((n) => fakeDestinationRule(n)),
        )
        .push();
      await until(async () => (await held()) === undefined, 10_000, 'the hold ended by the next state');
      assert.deepEqual(lost(served, inventory(client)), []);

      // Emptied again and confirmed: gone from the istiod, as the operator said.
      fake.set('DestinationRule', []).push();
      await until(async () => (await held())?.reason === 'emptied-kind', 10_000, 'held again');
      const confirmedAt = performance.now();
      await confirm(meshmux, 'mesh');
      await client.waitFor(
        (c) => c.configs(DR).size === 0,
        10_000,
        () => 'the confirmed emptying',
      );
      const appliedMs = performance.now() - confirmedAt;
      assert.equal(inventory(client).size, 11, 'the other kinds untouched');
      report('an xds upstream answering one kind with nothing', {
        'objects lost of 15': 0,
        'ServiceEntry added during the hold, at the istiod after (ms)': addedMs,
        'confirmed emptying at the istiod after (ms)': appliedMs,
      });
    } finally {
      client.close();
      await meshmux.kill();
      await fake.stop();
      await dir.dispose();
    }
  });

  it('applies an operator deleting every file of a kind from a file source: an edit, not a lost kind', async () => {
    const dir = await tempDir('meshmux-fault-kind-deleted-');
    await mkdir(path.join(dir.dir, 'mesh'));
    for (let i = 0; i < 3; i++) {
      await writeFile(
        path.join(dir.dir, 'mesh', `vs-${i}.yaml`),
        virtualService(`vs-${i}`, 'shop', `vs-${i}.example.com`),
      );
    }
    for (let i = 0; i < 2; i++) {
      await writeFile(
        path.join(dir.dir, 'mesh', `dr-${i}.yaml`),
        `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr-${i}, namespace: shop}
spec: {host: dr-${i}.example.com}
`,
      );
    }
    const meshmux = await meshmuxWith(dir.dir, ['sources:', '  - {name: mesh, type: file, path: ./mesh}']);
    const client = connectIstiod(meshmux.xds);
    try {
      await client.waitFor(
        (c) => c.configs(VS).size === 3 && c.configs(DR).size === 2,
        15_000,
        () => 'the first state',
      );
      for (let i = 0; i < 2; i++) await rm(path.join(dir.dir, 'mesh', `dr-${i}.yaml`));
      await client.waitFor(
        (c) => c.configs(DR).size === 0,
        10_000,
        () => 'the deletions applied',
      );
      const sources = await meshmux.debug<Array<{ name: string; held?: unknown }>>('sources');
      assert.equal(sources.find((x) => x.name === 'mesh')?.held, undefined);
      assert.equal(client.configs(VS).size, 3);
    } finally {
      client.close();
      await meshmux.kill();
      await dir.dispose();
    }
  });
});
