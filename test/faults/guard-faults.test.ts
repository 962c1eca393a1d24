/**
 * Guard faults against meshmux running as its own process, with an xds upstream over real gRPC and
 * an istiod stand-in connected: an upstream that wears its ServiceEntries down a few per response
 * is held once it has lost half of them, and that hold must outlast a restart, a reload whose
 * rules admit the same objects and the deletion window running out; an upstream that answers one
 * kind with a fraction of its objects is held for that kind. After each fault what the stand-in
 * holds is compared with what it held before (the goal is 0 lost).
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { until } from '../support/deadline.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import {
  fakeDestinationRule,
  fakeServiceEntry,
  fakeVirtualService,
  type FakeObject,
} from '../support/fake-objects.js';
import {
  answeredAfter,
  confirm,
  connectIstiod,
  inventory,
  lost,
  report,
  virtualServiceYaml,
} from '../support/fault-kit.js';
import { freePort } from '../support/free-port.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { DR, SE, VS } from '../support/type-urls.js';

const WAIT_MS = 20_000;

/** `until` with this file's deadline. */
function waitUntil(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  return until(check, WAIT_MS, what);
}

interface SourcesPage {
  name: string;
  state: string;
  held?: { reason: string; since: string; deletions: number; total: number; emptiedKinds?: string[] };
}

/** `count` ServiceEntries of namespace `payments`, `se-0` on. */
function serviceEntries(count: number): FakeObject[] {
  return Array.from({ length: count }, (_, i) => fakeServiceEntry(`se-${i}`, `se-${i}.example.com`));
}

async function sourceOf(meshmux: MeshmuxProcess, name: string): Promise<SourcesPage | undefined> {
  return (await meshmux.debug<SourcesPage[]>('sources')).find((s) => s.name === name);
}

/** Waits until meshmux has written the source's state after `since` (ms since the epoch). */
async function persisted(meshmux: MeshmuxProcess, source: string, since: number): Promise<void> {
  await waitUntil(async () => {
    const page = await meshmux.debug<{ files: Array<{ source: string; lastWrite?: string }> }>('state');
    const written = page.files.find((f) => f.source === source)?.lastWrite;
    return written !== undefined && Date.parse(written) >= since;
  }, `the state of ${source} written`);
}

/**
 * A folder with a file source `local` (one VirtualService, the marker later changes are seen by)
 * and an xds source `mesh` on `fake`, its ServiceEntries only; `extra` lines go under `mesh`.
 */
async function setUp(prefix: string, fake: FakeAdsServer) {
  const dir = await tempDir(prefix);
  await mkdir(path.join(dir.dir, 'local'));
  await writeFile(path.join(dir.dir, 'local', 'vs.yaml'), virtualServiceYaml('local', 'marker-0'));
  const configFile = path.join(dir.dir, 'meshmux.yaml');
  const write = (extra: readonly string[] = []): Promise<void> =>
    writeFile(
      configFile,
      [
        'state: { dir: state }',
        'sources:',
        '  - { name: local, type: file, path: ./local }',
        '  - name: mesh',
        '    type: xds',
        `    address: ${fake.address}`,
        '    kinds: [ServiceEntry]',
        '    reconnect: { initialDelay: 50ms, maxDelay: 400ms }',
        // Each answer judged as it comes: once meshmux has acknowledged it, it has been judged.
        '    settle: 0s',
        ...extra,
        '',
      ].join('\n'),
    );
  await write();
  let markers = 0;
  /** Changes the file source and waits for the stand-in to hold the change: all before it is in. */
  const marker = async (client: IstiodClient): Promise<void> => {
    const name = `marker-${++markers}`;
    await writeFile(path.join(dir.dir, 'local', `${name}.yaml`), virtualServiceYaml('local', name));
    await client.waitFor(
      (c) => c.configs(VS).has(`local/${name}`),
      WAIT_MS,
      () => `the marker ${name}`,
    );
  };
  return { dir, configFile, write, marker };
}

/**
 * Takes the upstream down 9 ServiceEntries per response from 100, each applied, until the guards
 * hold one: the sixth (54 of 100 gone, judged against the window's peak). Returns how many the
 * upstream has left; the stand-in then holds 55.
 */
async function wearDown(fake: FakeAdsServer, meshmux: MeshmuxProcess, client: IstiodClient): Promise<number> {
  let count = 100;
  for (;;) {
    count -= 9;
    fake.set('ServiceEntry', serviceEntries(count)).push();
    if (count === 46) break;
    await client.waitFor(
      (c) => c.configs(SE).size === count,
      WAIT_MS,
      () => `${count} ServiceEntries`,
    );
  }
  await waitUntil(async () => (await sourceOf(meshmux, 'mesh'))?.held !== undefined, 'the wear-down held');
  return count;
}

/** Waits until meshmux has acknowledged an answer of `typeUrl` on a stream opened after `streams`. */
function acknowledged(fake: FakeAdsServer, typeUrl: string, streams: number): Promise<void> {
  return waitUntil(
    () => fake.requestsFor(typeUrl).some((r) => r.stream > streams && r.nonce !== ''),
    `an answer of ${typeUrl} acknowledged on a new stream`,
  );
}

describe('faults: an upstream worn down a few objects per response, held', () => {
  let fake: FakeAdsServer;

  before(async () => {
    fake = await FakeAdsServer.start({ peer: 'istiod' });
  });
  after(async () => {
    await fake.stop();
  });

  it('keeps the held update held across SIGKILL restarts, and judges later deletions against what it held before', async () => {
    fake.set('ServiceEntry', serviceEntries(100));
    const { dir, configFile, marker } = await setUp('meshmux-fault-guard-restart-', fake);
    const xds = `127.0.0.1:${await freePort()}`;
    let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    const client = connectIstiod(xds);
    try {
      await client.waitFor(
        (c) => c.configs(SE).size === 100,
        WAIT_MS,
        () => 'the first state',
      );
      await wearDown(fake, meshmux, client);
      await marker(client);
      // The held update is written once it is held (before the istiods are sent what it changes).
      const hold = (await sourceOf(meshmux, 'mesh'))?.held;
      assert.ok(hold !== undefined, 'the wear-down held');
      await persisted(meshmux, 'mesh', Date.parse(hold.since));
      const held = inventory(client);
      assert.equal(client.configs(SE).size, 55);
      let servedAfter = 0;
      for (const upstream of [46, 37]) {
        fake.set('ServiceEntry', serviceEntries(upstream));
        await meshmux.kill('SIGKILL');
        const streams = client.streams;
        const upstreamStreams = fake.streams;
        meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
        await answeredAfter(client, streams, 'every type answered by the restarted meshmux');
        await acknowledged(fake, SE, upstreamStreams);
        await marker(client);
        servedAfter = client.configs(SE).size;
        assert.deepEqual(lost(held, inventory(client)), [], `objects lost with the upstream at ${upstream}`);
        const source = await sourceOf(meshmux, 'mesh');
        assert.deepEqual(
          [source?.held?.reason, source?.held?.deletions, source?.held?.total],
          ['mass-delete', 100 - upstream, 100],
        );
      }
      report('a held wear-down across two SIGKILL restarts', {
        'ServiceEntries served': servedAfter,
        'of 100, the upstream down to': 37,
      });
    } finally {
      client.close();
      await meshmux.kill();
      await dir.dispose();
    }
  });

  /**
   * meshmux on a new folder, `rules` under `mesh`, its upstream worn down until the guards hold
   * it: the stand-in holds 55 of 100 ServiceEntries, `held`.
   */
  async function heldWearDown(prefix: string, rules: readonly string[]) {
    fake.set('ServiceEntry', serviceEntries(100));
    const setup = await setUp(prefix, fake);
    await setup.write(rules);
    const meshmux = await MeshmuxProcess.start(setup.configFile, { cwd: setup.dir.dir });
    const client = connectIstiod(meshmux.xds);
    const stop = async (): Promise<void> => {
      client.close();
      await meshmux.kill();
      await setup.dir.dispose();
    };
    try {
      await client.waitFor(
        (c) => c.configs(SE).size === 100,
        WAIT_MS,
        () => 'the first state',
      );
      await wearDown(fake, meshmux, client);
      await setup.marker(client);
      return { ...setup, meshmux, client, held: inventory(client), stop };
    } catch (err) {
      await stop();
      throw err;
    }
  }

  /** The unchanged upstream answers again, after a reconnect; resolves once the stand-in holds all before it. */
  async function answeredAgain(marker: (client: IstiodClient) => Promise<void>, client: IstiodClient) {
    const streams = fake.streams;
    fake.disconnectAll();
    await acknowledged(fake, SE, streams);
    await marker(client);
  }

  it('keeps the held update held after a reload whose rules admit the same objects and a reconnect', async () => {
    const { write, marker, meshmux, client, held, stop } = await heldWearDown('meshmux-fault-guard-reload-', [
      '    allow: { namespaces: [payments] }',
    ]);
    try {
      const from = meshmux.logs.length;
      await write(['    allow: { namespaces: [payments, billing] }']);
      await meshmux.waitForLog((l) => l.msg === 'sources reconfigured', from, WAIT_MS, 'the reload');
      await answeredAgain(marker, client);
      assert.deepEqual(lost(held, inventory(client)), [], 'objects lost by the reload');
      assert.equal(client.configs(SE).size, 55);
      assert.equal((await sourceOf(meshmux, 'mesh'))?.held?.total, 100);
      report('a held wear-down, then a reload admitting the same objects', {
        'ServiceEntries served': client.configs(SE).size,
      });
    } finally {
      await stop();
    }
  });

  it('keeps the held update held after the deletion window ran out, and applies it once confirmed', async () => {
    const { marker, meshmux, client, held, stop } = await heldWearDown('meshmux-fault-guard-window-', [
      '    deleteWindow: 2s',
    ]);
    try {
      // Past the window (an event cannot stand for time passing here).
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      await answeredAgain(marker, client);
      assert.deepEqual(lost(held, inventory(client)), [], 'objects lost once the window ran out');
      const source = await sourceOf(meshmux, 'mesh');
      assert.equal(source?.held?.reason, 'mass-delete');
      assert.equal(source.held.total, 100);
      await confirm(meshmux, 'mesh');
      await client.waitFor(
        (c) => c.configs(SE).size === 46,
        WAIT_MS,
        () => 'the confirmed update',
      );
      report('a held wear-down past its deletion window', { 'ServiceEntries served': 55 });
    } finally {
      await stop();
    }
  });
});

describe('faults: an upstream answering one kind with a fraction of its objects', () => {
  it('holds that kind and keeps serving its objects, the other kinds following the upstream', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod' });
    const dir = await tempDir('meshmux-fault-guard-cut-kind-');
    const names = Array.from({ length: 40 }, (_, i) => `svc-${i}`);
    fake
      .set(
        'VirtualService',
        names.map((n) => fakeVirtualService(n)),
      )
      .set(
        'DestinationRule',
        names.map((n) => fakeDestinationRule(n)),
      )
      .set('ServiceEntry', serviceEntries(40));
    const configFile = path.join(dir.dir, 'meshmux.yaml');
    await writeFile(
      configFile,
      [
        'sources:',
        '  - name: mesh',
        '    type: xds',
        `    address: ${fake.address}`,
        '    kinds: [VirtualService, DestinationRule, ServiceEntry]',
        '    reconnect: { initialDelay: 50ms, maxDelay: 400ms }',
        '    settle: 0s',
        '',
      ].join('\n'),
    );
    const meshmux = await MeshmuxProcess.start(configFile, {
      cwd: dir.dir,
      env: { MESHMUX_STATE_DIR: 'none' },
    });
    const client = connectIstiod(meshmux.xds);
    try {
      const all = (c: IstiodClient): boolean =>
        c.configs(VS).size === 40 && c.configs(DR).size === 40 && c.configs(SE).size === 40;
      await client.waitFor(all, WAIT_MS, () => 'the first state');
      const held = inventory(client);
      // The upstream restarts with its DestinationRules partly loaded: 1 of 40.
      fake.set(
        'DestinationRule',
        names.slice(0, 1).map((n) => fakeDestinationRule(n)),
      );
      const streams = fake.streams;
      fake.disconnectAll();
      await acknowledged(fake, DR, streams);
      // A later change of another kind is served: the cut kind is held alone.
      fake
        .set(
          'VirtualService',
          [...names, 'svc-new'].map((n) => fakeVirtualService(n)),
        )
        .push();
      await client.waitFor(
        (c) => c.configs(VS).has('shop/svc-new'),
        WAIT_MS,
        () => 'a later change',
      );
      assert.deepEqual(lost(held, inventory(client)), [], 'objects lost');
      const source = await sourceOf(meshmux, 'mesh');
      assert.equal(source?.held?.reason, 'emptied-kind');
      assert.deepEqual(source.held.emptiedKinds, ['networking.istio.io/DestinationRule']);
      assert.equal(source.held.deletions, 39);
      report('a kind answered with 1 of its 40 objects', {
        'DestinationRules lost': 40 - client.configs(DR).size,
      });
      await confirm(meshmux, 'mesh');
      await client.waitFor(
        (c) => c.configs(DR).size === 1,
        WAIT_MS,
        () => 'the confirmed cut',
      );
    } finally {
      client.close();
      await meshmux.kill();
      await fake.stop();
      await dir.dispose();
    }
  });
});
