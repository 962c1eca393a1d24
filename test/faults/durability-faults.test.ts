/**
 * Restarts and guard faults against meshmux running as its own process, with an istiod stand-in
 * connected across the restart (it keeps its store and redials, as istiod does): after each fault
 * the objects it holds are compared with what it held before (the goal is 0 lost), and the time to
 * serve is printed. The read-only and full disk cases mount a tmpfs, which needs root.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import type { FakeAdsServer } from '../support/fake-ads-server.js';
import {
  answeredAfter,
  connectIstiod,
  inventory,
  lost,
  meshServiceEntry,
  meshUpstream,
  readiness,
  report,
} from '../support/fault-kit.js';
import { until } from '../support/deadline.js';
import { freePort } from '../support/free-port.js';
import { serviceEntry } from '../support/git-fixtures.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { DubboRegistry } from '../support/dubbo-registry.js';
import { ZookeeperServer } from '../support/zookeeper-server.js';
import { fakeVirtualService } from '../support/fake-objects.js';
import { DR, SE, VS } from '../support/type-urls.js';

const WAIT_MS = 20_000;

interface StatePage {
  dir: string;
  files: Array<{ source: string; lastWrite?: string; lastError?: string }>;
  problems: string[];
}

async function statePage(http: string): Promise<StatePage> {
  const res = await fetch(`${http}/debug/state`, { signal: AbortSignal.timeout(5_000) });
  return (await res.json()) as StatePage;
}

/** Waits until meshmux has written the source's state after `since` (ms since the epoch). */
async function persisted(meshmux: MeshmuxProcess, source: string, since: number): Promise<void> {
  const deadline = performance.now() + WAIT_MS;
  for (;;) {
    const page = await statePage(meshmux.admin);
    const written = page.files.find((f) => f.source === source)?.lastWrite;
    if (written !== undefined && Date.parse(written) >= since) return;
    if (performance.now() > deadline)
      throw new Error(`no state of ${source} written: ${JSON.stringify(page)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function writeConfig(dir: string, lines: readonly string[]): Promise<string> {
  const file = path.join(dir, 'meshmux.yaml');
  await writeFile(file, [...lines, ''].join('\n'));
  return file;
}

function xdsSourceLines(address: string): string[] {
  return [
    '  - name: mesh',
    '    type: xds',
    `    address: ${address}`,
    '    kinds: [VirtualService, DestinationRule, ServiceEntry]',
  ];
}

/** A configuration persisting into `state/` with the one xds source `mesh`. */
function persistedXdsConfig(dir: string, address: string): Promise<string> {
  return writeConfig(dir, ['state: { dir: state }', 'sources:', ...xdsSourceLines(address)]);
}

/** Whether the istiod holds every object of {@link upstream}. */
function holdsTheUpstream(c: IstiodClient): boolean {
  return c.configs(VS).size === 5 && c.configs(DR).size === 5 && c.configs(SE).size === 5;
}

/** The first host of the VirtualService `shop/svc-0` the istiod holds. */
function firstRouteHost(c: IstiodClient): unknown {
  return (c.configs(VS).get('shop/svc-0')?.body['hosts'] as unknown[] | undefined)?.[0];
}

/**
 * Moves `svc-0` of {@link meshUpstream} to another host and adds `svc-5`, a change of two objects
 * among 15 (the store keeps it in the journal); resolves once the istiod holds it and it is kept.
 */
async function changeTwoRoutes(
  fake: FakeAdsServer,
  meshmux: MeshmuxProcess,
  client: IstiodClient,
): Promise<void> {
  const changedAt = Date.now();
  fake.set('VirtualService', [
    fakeVirtualService('svc-0', 'moved.example'),
    ...[1, 2, 3, 4, 5].map((i) => fakeVirtualService(`svc-${i}`)),
  ]);
  fake.push();
  await client.waitFor(
    (c) => c.configs(VS).has('shop/svc-5') && firstRouteHost(c) === 'moved.example',
    WAIT_MS,
    () => 'the change',
  );
  await persisted(meshmux, 'mesh', changedAt);
}

/**
 * Runs meshmux until the stand-in holds everything and the state is on disk (and `beforeKill`,
 * if given, is done), SIGKILLs it, lets `outage` take the upstream away, and restarts it on the
 * same port. Returns what the stand-in held before, and the restarted process.
 */
async function restartDuringOutage(
  configFile: string,
  cwd: string,
  hasEverything: (c: IstiodClient) => boolean,
  outage: () => Promise<void>,
  beforeKill?: (meshmux: MeshmuxProcess, client: IstiodClient) => Promise<void>,
): Promise<{ client: IstiodClient; meshmux: MeshmuxProcess; held: Set<string>; servedMs: number }> {
  const xds = `127.0.0.1:${await freePort()}`;
  // A change is written before it is served: its write is dated before the istiod holds it.
  const startedAt = Date.now();
  let meshmux = await MeshmuxProcess.start(configFile, { cwd, xds });
  const client = connectIstiod(xds);
  try {
    await client.waitFor(hasEverything, WAIT_MS, () => 'the first run served everything');
    await persisted(meshmux, 'mesh', startedAt);
    await beforeKill?.(meshmux, client);
  } catch (err) {
    // Nothing left running to hold the test's process open after its failure.
    client.close();
    await meshmux.kill();
    throw err;
  }
  const held = inventory(client);
  await meshmux.kill('SIGKILL');
  await outage();
  const streamsBefore = client.streams;
  meshmux = await MeshmuxProcess.start(configFile, { cwd, xds });
  await answeredAfter(client, streamsBefore, 'every type answered by the restarted meshmux');
  return { client, meshmux, held, servedMs: performance.now() - meshmux.spawnedAt };
}

describe('faults: meshmux restarted (SIGKILL) while its upstream is down', () => {
  it('serves every object of an xds upstream that is down from its persisted state, and is ready', async () => {
    const dir = await tempDir('meshmux-fault-restart-xds-');
    const fake = await meshUpstream();
    const configFile = await persistedXdsConfig(dir.dir, fake.address);
    const run = await restartDuringOutage(configFile, dir.dir, holdsTheUpstream, () => fake.stop());
    try {
      assert.deepEqual(lost(run.held, inventory(run.client)), [], 'objects lost');
      assert.equal(run.held.size, 15);
      const { status, body } = await readiness(run.meshmux.http);
      assert.equal(status, 200, JSON.stringify(body));
      assert.equal(body.sources[0]?.state, 'restored');
      const metrics = await (await fetch(`${run.meshmux.http}/metrics`)).text();
      assert.match(metrics, /meshmux_source_state\{source="mesh",state="restored"\} 1/);
      const page = await (await fetch(`${run.meshmux.admin}/`)).text();
      assert.match(page, /restored/);
      report('restart while an xds upstream is down', {
        'objects lost': 0,
        'ms from spawn to every type answered': run.servedMs,
      });
      // The upstream comes back with one change: it replaces the restored state through the merge.
      await fake.restart();
      fake.set(
        'VirtualService',
        [0, 1, 2, 3, 4, 5].map((i) => fakeVirtualService(`svc-${i}`)),
      );
      fake.push();
      await run.client.waitFor(
        (c) => c.configs(VS).has('shop/svc-5'),
        WAIT_MS,
        () => 'the upstream back',
      );
      assert.equal(inventory(run.client).size, 16);
      const { body: after } = await readiness(run.meshmux.http);
      assert.equal(after.sources[0]?.state, 'synced');
    } finally {
      run.client.close();
      await run.meshmux.kill();
      await fake.stop();
      await dir.dispose();
    }
  });

  it('serves the changes written to the state journal after the state file, once restarted during an outage', async () => {
    const dir = await tempDir('meshmux-fault-restart-journal-');
    const fake = await meshUpstream();
    const configFile = await persistedXdsConfig(dir.dir, fake.address);
    let journalBytes = 0;
    const run = await restartDuringOutage(
      configFile,
      dir.dir,
      holdsTheUpstream,
      () => fake.stop(),
      async (meshmux, client) => {
        await changeTwoRoutes(fake, meshmux, client);
        journalBytes = (await readFile(path.join(dir.dir, 'state', 'mesh.journal'))).byteLength;
      },
    );
    try {
      assert.ok(journalBytes > 0, 'the change went to the journal');
      assert.deepEqual(lost(run.held, inventory(run.client)), [], 'objects lost');
      assert.equal(run.held.size, 16);
      assert.equal(firstRouteHost(run.client), 'moved.example', 'the changed object as changed');
      report('restart during an outage after changes written to the journal', {
        'objects lost': 0,
        'journal bytes': journalBytes,
      });
    } finally {
      run.client.close();
      await run.meshmux.kill();
      await fake.stop();
      await dir.dispose();
    }
  });

  it('serves every object after its state folder was removed from outside, once restarted during an outage', async () => {
    const dir = await tempDir('meshmux-fault-restart-removed-');
    const fake = await meshUpstream();
    const configFile = await persistedXdsConfig(dir.dir, fake.address);
    const state = path.join(dir.dir, 'state');
    let putBackMs = 0;
    const run = await restartDuringOutage(
      configFile,
      dir.dir,
      holdsTheUpstream,
      () => fake.stop(),
      async (meshmux, client) => {
        // A change kept in the journal, then the whole folder goes (a cleaner of old files, a
        // hand): nothing the upstream sends changes meanwhile, so nothing is written.
        await changeTwoRoutes(fake, meshmux, client);
        // Moved away whole, then removed: a removal file by file could race the put-back.
        await rename(state, `${state}.gone`);
        const removedAt = performance.now();
        await rm(`${state}.gone`, { recursive: true, force: true });
        await until(
          () => existsSync(path.join(state, 'mesh.state')) && existsSync(path.join(state, 'mesh.journal')),
          WAIT_MS,
          'the state file and journal written back',
        );
        putBackMs = performance.now() - removedAt;
        await meshmux.waitForLog(
          (l) => l.msg?.startsWith('a state file was removed or replaced from outside') === true,
          0,
          WAIT_MS,
          'the write-back logged',
        );
        const metrics = await (await fetch(`${meshmux.http}/metrics`)).text();
        assert.match(metrics, /meshmux_state_files_put_back_total\{source="mesh"\} 2/);
      },
    );
    try {
      assert.deepEqual(lost(run.held, inventory(run.client)), [], 'objects lost');
      assert.equal(run.held.size, 16);
      assert.equal(firstRouteHost(run.client), 'moved.example', 'the change kept in the journal');
      report('restart during an outage after the state folder was removed', {
        'objects lost': 0,
        'ms from removal to the files written back': putBackMs,
      });
    } finally {
      run.client.close();
      await run.meshmux.kill();
      await fake.stop();
      await dir.dispose();
    }
  });

  it('serves the ServiceEntries of a ZooKeeper that is down from the persisted state', async () => {
    const zk = await ZookeeperServer.start();
    const dir = await tempDir('meshmux-fault-restart-zk-');
    const registry = await DubboRegistry.connect(zk.connectString, { root: '/dubbo' });
    try {
      for (const iface of ['com.shop.Cart', 'com.shop.Pay', 'com.shop.Ship'])
        await registry.register({ iface, ip: '10.0.0.7', port: 20880 });
      const configFile = await writeConfig(dir.dir, [
        'state: { dir: state }',
        'sources:',
        '  - name: mesh',
        '    type: zookeeper',
        `    servers: ${zk.connectString}`,
        '    root: /dubbo',
        '    namespace: dubbo',
      ]);
      const run = await restartDuringOutage(
        configFile,
        dir.dir,
        (c) => c.configs(SE).size === 3,
        async () => {
          // meshmux is down already: the providers' session may end with ZooKeeper.
          await registry.close();
          await zk.stop(true);
        },
      );
      try {
        assert.deepEqual(lost(run.held, inventory(run.client)), [], 'objects lost');
        assert.equal(run.held.size, 3);
        const { status, body } = await readiness(run.meshmux.http);
        assert.equal(status, 200, JSON.stringify(body));
        assert.equal(body.sources[0]?.state, 'restored');
        report('restart while ZooKeeper is down', {
          'objects lost': 0,
          'ms from spawn to every type answered': run.servedMs,
        });
      } finally {
        run.client.close();
        await run.meshmux.kill();
      }
    } finally {
      await zk.dispose();
      await dir.dispose();
    }
  });

  it('keeps the kinds of a source whose state file is corrupt unanswered, so the istiod keeps them', async () => {
    const dir = await tempDir('meshmux-fault-corrupt-');
    const fake = await meshUpstream();
    const configFile = await persistedXdsConfig(dir.dir, fake.address);
    const xds = `127.0.0.1:${await freePort()}`;
    const startedAt = Date.now();
    let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    const client = connectIstiod(xds);
    try {
      await client.waitFor(
        (c) => c.configs(SE).size === 5,
        WAIT_MS,
        () => 'the first run',
      );
      await persisted(meshmux, 'mesh', startedAt);
      const held = inventory(client);
      await meshmux.kill('SIGKILL');
      await fake.stop();
      const file = path.join(dir.dir, 'state', 'mesh.state');
      const bytes = await readFile(file);
      bytes[bytes.length - 3] = (bytes[bytes.length - 3] ?? 0) ^ 0xff;
      await writeFile(file, bytes);
      const streamsBefore = client.streams;
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      await client.waitFor(
        (c) => c.streams > streamsBefore,
        WAIT_MS,
        () => 'the stand-in redialled',
      );
      const page = await statePage(meshmux.admin);
      assert.match(page.problems.join('\n'), /mesh\.state.*checksum mismatch/);
      const { status, body } = await readiness(meshmux.http);
      assert.equal(status, 503);
      assert.deepEqual(body.waitingFor, ['mesh']);
      // The upstream comes back: once its objects arrived, nothing was answered empty before them.
      await fake.restart();
      await answeredAfter(client, streamsBefore, 'the upstream back');
      assert.deepEqual(lost(held, inventory(client)), [], 'objects lost');
      const emptyAnswers = client.received.filter((r) => r.stream > streamsBefore && r.resourceCount === 0);
      assert.deepEqual(
        emptyAnswers.filter((r) => [VS, DR, SE].includes(r.typeUrl)),
        [],
        'no kind of the source was answered empty',
      );
      report('corrupt state file at restart', { 'objects lost': 0 });
    } finally {
      client.close();
      await meshmux.kill();
      await fake.stop();
      await dir.dispose();
    }
  });
});

describe('faults: an upstream emptying itself one type at a time on a live stream', () => {
  it('holds the whole emptying: the istiod keeps every object, and a later change still arrives', async () => {
    const dir = await tempDir('meshmux-fault-wipe-');
    const fake = await meshUpstream();
    await mkdir(path.join(dir.dir, 'files'));
    const configFile = await writeConfig(dir.dir, [
      'state: { dir: none }',
      'sources:',
      ...xdsSourceLines(fake.address),
      '  - name: files',
      '    type: file',
      '    path: files',
    ]);
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connectIstiod(meshmux.xds);
    try {
      await client.waitFor(
        (c) => c.configs(SE).size === 5 && c.configs(DR).size === 5,
        WAIT_MS,
        () => 'synced',
      );
      // Every response the upstream sent is acknowledged: meshmux has taken the whole first state.
      await fake.waitFor(
        () => fake.sent.every((r) => fake.requests.some((q) => q.nonce === r.nonce)),
        WAIT_MS,
        'every upstream response acknowledged',
      );
      const held = inventory(client);
      const started = performance.now();
      fake.store.clear();
      for (const typeUrl of [VS, DR, SE]) {
        fake.pushType(typeUrl);
        await new Promise((r) => setTimeout(r, 150));
      }
      await meshmux.waitForLog(
        (e) => /empty state: holding it/.test(String(e['msg'])),
        0,
        WAIT_MS,
        'the hold',
      );
      const heldMs = performance.now() - started;
      // A marker through another source: once it arrived, any deletion sent before it has too.
      await writeFile(
        path.join(dir.dir, 'files', 'marker.yaml'),
        serviceEntry('marker', 'shop', 'marker.example.com'),
      );
      await client.waitFor(
        (c) => c.configs(SE).has('shop/marker'),
        WAIT_MS,
        () => 'the marker',
      );
      assert.deepEqual(lost(held, inventory(client)), [], 'objects lost');
      report('upstream emptied one type at a time (150 ms apart)', {
        'objects lost': 0,
        'ms from the first empty type to the hold': heldMs,
      });
    } finally {
      client.close();
      await meshmux.kill();
      await fake.stop();
      await dir.dispose();
    }
  });
});

/** Mounts a tmpfs on `dir` (root only); returns a way to remount it and to unmount it. */
function mountTmpfs(
  dir: string,
  size: string,
): { remount: (options: string) => void; unmount: () => void } | string {
  const run = (args: string[]): string | undefined => {
    const r = spawnSync('mount', args, { encoding: 'utf8' });
    return r.status === 0
      ? undefined
      : `mount ${args.join(' ')}: ${r.stderr || r.error?.message || 'failed'}`;
  };
  const failure = run(['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
  if (failure !== undefined) return failure;
  return {
    remount: (options) => {
      const f = run(['-o', `remount,${options}`, dir]);
      if (f !== undefined) throw new Error(f);
    },
    unmount: () => void spawnSync('umount', [dir]),
  };
}

describe('faults: a state folder that is read-only, or full', () => {
  let dir: { dir: string; dispose: () => Promise<void> };
  let mount: ReturnType<typeof mountTmpfs>;
  let fake: FakeAdsServer;

  before(async () => {
    dir = await tempDir('meshmux-fault-disk-');
    await mkdir(path.join(dir.dir, 'state'));
    mount = mountTmpfs(path.join(dir.dir, 'state'), '2m');
    fake = await meshUpstream();
  });
  /** The tmpfs; skips (or, in CI, fails) the test when it could not be mounted. */
  const mounted = (t: TestContext): Exclude<typeof mount, string> | undefined => {
    if (typeof mount !== 'string') return mount;
    if (process.env['CI'] !== undefined)
      assert.fail(`CI must be able to mount a tmpfs (run as root): ${mount}`);
    t.skip(`needs root to mount a tmpfs: ${mount}`);
    return undefined;
  };
  after(async () => {
    if (typeof mount !== 'string') mount.unmount();
    await fake.stop();
    await dir.dispose();
  });

  it('restores from a read-only folder, reports the failed writes and goes on serving', async (t) => {
    const tmpfs = mounted(t);
    if (tmpfs === undefined) return;
    const configFile = await persistedXdsConfig(dir.dir, fake.address);
    const run = await restartDuringOutage(configFile, dir.dir, holdsTheUpstream, async () => {
      await fake.stop();
      tmpfs.remount('ro');
    });
    try {
      assert.deepEqual(lost(run.held, inventory(run.client)), [], 'objects lost');
      await fake.restart();
      fake.set('VirtualService', [
        fakeVirtualService('svc-0'),
        fakeVirtualService('svc-1'),
        fakeVirtualService('svc-2'),
        fakeVirtualService('svc-3'),
        fakeVirtualService('svc-4'),
        fakeVirtualService('svc-new'),
      ]);
      fake.push();
      await run.client.waitFor(
        (c) => c.configs(VS).has('shop/svc-new'),
        WAIT_MS,
        () => 'a change after the restart',
      );
      const deadline = performance.now() + WAIT_MS;
      let page = await statePage(run.meshmux.admin);
      while (
        page.files.find((f) => f.source === 'mesh')?.lastError === undefined &&
        performance.now() < deadline
      ) {
        await new Promise((r) => setTimeout(r, 100));
        page = await statePage(run.meshmux.admin);
      }
      assert.match(
        page.files.find((f) => f.source === 'mesh')?.lastError ?? '',
        /read-only|EROFS/i,
        JSON.stringify(page),
      );
      const metrics = await (await fetch(`${run.meshmux.http}/metrics`)).text();
      assert.match(metrics, /meshmux_state_write_errors_total\{source="mesh"\} [1-9]/);
      report('read-only state folder', {
        'objects lost': 0,
        'ms from spawn to every type answered': run.servedMs,
      });
    } finally {
      run.client.close();
      await run.meshmux.kill();
      tmpfs.remount('rw');
    }
  });

  it('reports a full disk and goes on serving every change', async (t) => {
    const tmpfs = mounted(t);
    if (tmpfs === undefined) return;
    await fake.restart();
    fake.set(
      'ServiceEntry',
      [0, 1, 2, 3, 4].map((i) => meshServiceEntry(`svc-${i}`)),
    );
    const filler = path.join(dir.dir, 'state', 'filler');
    await writeFile(filler, Buffer.alloc(1024));
    // Fill the tmpfs to the last block.
    const fill = spawnSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=4k'], { encoding: 'utf8' });
    assert.match(fill.stderr, /No space left/);
    const configFile = await persistedXdsConfig(dir.dir, fake.address);
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connectIstiod(meshmux.xds);
    try {
      await client.waitFor(
        (c) => c.configs(SE).size === 5,
        WAIT_MS,
        () => 'served with a full disk',
      );
      await meshmux.waitForLog(
        (e) => /could not persist/.test(String(e['msg'])),
        0,
        WAIT_MS,
        'the write error',
      );
      fake.set(
        'ServiceEntry',
        [0, 1, 2, 3, 4, 5].map((i) => meshServiceEntry(`svc-${i}`)),
      );
      fake.push();
      await client.waitFor(
        (c) => c.configs(SE).has('shop/svc-5'),
        WAIT_MS,
        () => 'a change with a full disk',
      );
      const page = await statePage(meshmux.admin);
      assert.match(page.files.find((f) => f.source === 'mesh')?.lastError ?? '', /ENOSPC|no space/i);
      report('full state disk', { 'objects lost': 0 });
    } finally {
      client.close();
      await meshmux.kill();
    }
  });
});
