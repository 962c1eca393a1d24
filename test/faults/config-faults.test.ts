/**
 * A source left out of the configuration by an edit (dropped, or renamed, by a slip of the
 * operator or of a template), against meshmux running as its own process with an istiod stand-in
 * connected: on a live reload and across a restart, the stand-in must lose nothing until the
 * removal is confirmed. An `xds` upstream (15 objects) and a file source beside it, which answers
 * every kind, so a missing source's kinds are answered without its objects.
 */
import assert from 'node:assert/strict';
import { access, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { fakeVirtualService } from '../support/fake-objects.js';
import {
  answeredAfter,
  confirm,
  connectIstiod,
  inventory,
  lost,
  MESH_NAMES,
  meshUpstream,
  readiness,
  report,
} from '../support/fault-kit.js';
import { freePort } from '../support/free-port.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { DR, SE, VS } from '../support/type-urls.js';

const WAIT_MS = 20_000;

function localVs(name: string): string {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: local}
spec: {hosts: [${name}], http: [{route: [{destination: {host: ${name}}}]}]}
`;
}

interface SourcesPage {
  name: string;
  state: string;
  held?: { reason: string; deletions: number; total: number };
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = performance.now() + WAIT_MS;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Whether meshmux keeps a state file of `source` in `dir`'s `state` folder. */
function stateFileOf(dir: string, source: string): Promise<boolean> {
  return access(path.join(dir, 'state', `${source}.state`)).then(
    () => true,
    () => false,
  );
}

async function heldReason(meshmux: MeshmuxProcess, source: string): Promise<SourcesPage['held']> {
  const sources = await meshmux.debug<SourcesPage[]>('sources');
  const held = sources.find((s) => s.name === source)?.held;
  return held === undefined
    ? undefined
    : { reason: held.reason, deletions: held.deletions, total: held.total };
}

async function heldRemoval(meshmux: MeshmuxProcess, source: string): Promise<SourcesPage['held']> {
  const held = await heldReason(meshmux, source);
  return held?.reason === 'removed' ? held : undefined;
}

describe('faults: a source left out of the configuration by an edit', () => {
  let fake: FakeAdsServer;

  before(async () => {
    fake = await meshUpstream();
  });
  after(async () => {
    await fake.stop();
  });

  const meshLine = (address: string, extra = ''): string =>
    `  - { name: mesh, type: xds, address: ${address}, kinds: [VirtualService, DestinationRule, ServiceEntry]${extra} }`;

  /**
   * A folder with the file source's one object and a configuration of it and, when `write` is
   * given `true` or a line of its own, the `mesh` source.
   */
  async function setUp(prefix: string) {
    const dir = await tempDir(prefix);
    await mkdir(path.join(dir.dir, 'local'));
    await writeFile(path.join(dir.dir, 'local', 'vs.yaml'), localVs('front'));
    const configFile = path.join(dir.dir, 'meshmux.yaml');
    const write = (mesh: boolean | string): Promise<void> =>
      writeFile(
        configFile,
        [
          'state: { dir: state }',
          'sources:',
          '  - { name: local, type: file, path: ./local }',
          ...(mesh === false ? [] : [mesh === true ? meshLine(fake.address) : mesh]),
          '',
        ].join('\n'),
      );
    await write(true);
    return { dir, configFile, write };
  }

  const holdsAll = (c: IstiodClient): boolean =>
    c.configs(VS).size === 6 && c.configs(SE).size === 5 && c.configs(VS).has('local/front');

  it('keeps serving a source dropped by a live reload until its removal is confirmed', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-config-reload-');
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connectIstiod(meshmux.xds);
    try {
      await client.waitFor(holdsAll, WAIT_MS, () => 'the first state');
      const before = inventory(client);
      await write(false);
      await until(async () => {
        const sources = await meshmux.debug<SourcesPage[]>('sources');
        return sources.every((s) => s.name !== 'mesh' || s.held !== undefined);
      }, 'the reload applied');
      // A later change of the file source is served: everything pushed after the reload is in.
      await writeFile(path.join(dir.dir, 'local', 'vs2.yaml'), localVs('back'));
      await client.waitFor(
        (c) => c.configs(VS).has('local/back'),
        WAIT_MS,
        () => 'a later change',
      );
      assert.deepEqual(lost(before, inventory(client)), [], 'objects lost by the reload');
      assert.deepEqual(await heldRemoval(meshmux, 'mesh'), {
        reason: 'removed',
        deletions: 15,
        total: 15,
      });
      const ready = await readiness(meshmux.http);
      assert.equal(ready.status, 200, JSON.stringify(ready.body));
      await until(() => stateFileOf(dir.dir, 'mesh'), 'the removed source’s record kept');

      const confirmedAt = performance.now();
      await confirm(meshmux, 'mesh');
      await client.waitFor(
        (c) => c.configs(SE).size === 0 && c.configs(DR).size === 0 && c.configs(VS).size === 2,
        WAIT_MS,
        () => 'the confirmed removal',
      );
      const withdrawnMs = performance.now() - confirmedAt;
      assert.deepEqual(
        [...client.configs(VS).keys()].sort(),
        ['local/back', 'local/front'],
        'exactly the removed source’s objects withdrawn',
      );
      const sources = await meshmux.debug<SourcesPage[]>('sources');
      assert.deepEqual(
        sources.map((s) => s.name),
        ['local'],
      );
      await until(
        async () => !(await stateFileOf(dir.dir, 'mesh')),
        'the removed source’s state file deleted',
      );
      report('a source dropped by a live reload', {
        'objects lost before the confirmation': 0,
        'objects held': 15,
        'ms from confirmation to withdrawal': withdrawnMs,
      });
    } finally {
      client.close();
      await meshmux.kill();
      await dir.dispose();
    }
  });

  it('serves a source dropped while meshmux was down from its persisted state, held until confirmed', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-config-restart-');
    const xds = `127.0.0.1:${await freePort()}`;
    let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    const client = connectIstiod(xds);
    try {
      await client.waitFor(holdsAll, WAIT_MS, () => 'the first state');
      await until(() => stateFileOf(dir.dir, 'mesh'), 'the state of mesh written');
      const before = inventory(client);
      await meshmux.kill('SIGKILL');
      await write(false);
      const streams = client.streams;
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      await answeredAfter(client, streams, 'every type answered by the restarted meshmux');
      const servedMs = performance.now() - meshmux.spawnedAt;
      assert.deepEqual(lost(before, inventory(client)), [], 'objects lost by the restart');
      assert.deepEqual(await heldRemoval(meshmux, 'mesh'), {
        reason: 'removed',
        deletions: 15,
        total: 15,
      });
      const ready = await readiness(meshmux.http);
      assert.equal(ready.status, 200, JSON.stringify(ready.body));
      report('a source dropped from the configuration while meshmux was down', {
        'objects lost': 0,
        'ms from spawn to every type answered': servedMs,
      });
      // Configured again: the same objects, from its upstream, and nothing left held.
      await write(true);
      await until(async () => {
        const sources = await meshmux.debug<SourcesPage[]>('sources');
        return sources.some((s) => s.name === 'mesh' && s.held === undefined);
      }, 'the removal dropped once configured again');
      assert.deepEqual(lost(before, inventory(client)), []);
    } finally {
      client.close();
      await meshmux.kill();
      await dir.dispose();
    }
  });

  it('serves every other change while a source added by a reload with a wrong address never answers', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-config-added-');
    await write(false);
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connectIstiod(meshmux.xds);
    try {
      await client.waitFor(
        (c) => c.configs(VS).has('local/front'),
        WAIT_MS,
        () => 'the first state',
      );
      await write(meshLine(`127.0.0.1:${await freePort()}`));
      await until(async () => {
        const sources = await meshmux.debug<SourcesPage[]>('sources');
        return sources.some((s) => s.name === 'mesh');
      }, 'the reload applied');
      const changedAt = performance.now();
      await writeFile(path.join(dir.dir, 'local', 'vs2.yaml'), localVs('back'));
      await client.waitFor(
        (c) => c.configs(VS).has('local/back'),
        WAIT_MS,
        () => 'a later change',
      );
      const changeMs = performance.now() - changedAt;
      const ready = await readiness(meshmux.http);
      assert.equal(ready.status, 200, JSON.stringify(ready.body));
      const late = connectIstiod(meshmux.xds);
      try {
        await late.waitFor(
          (c) => c.configs(VS).size === 2 && c.requestedTypeUrls.every((t) => c.store.has(t)),
          WAIT_MS,
          () => 'every type answered to an istiod connecting now',
        );
      } finally {
        late.close();
      }
      report('a source with a wrong address added by a reload', {
        'ms for a change of another source to reach the istiod': changeMs,
      });
    } finally {
      client.close();
      await meshmux.kill();
      await dir.dispose();
    }
  });

  it('serves the record of a source whose type an edit changed while meshmux was down, and holds its empty first state', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-config-type-');
    const empty = await FakeAdsServer.start({ peer: 'istiod' });
    const xds = `127.0.0.1:${await freePort()}`;
    // First a file source named mesh, holding 3 VirtualServices.
    await mkdir(path.join(dir.dir, 'mesh'));
    await writeFile(
      path.join(dir.dir, 'mesh', 'vs.yaml'),
      ['a', 'b', 'c'].map((n) => localVs(n).replace('namespace: local', 'namespace: shop')).join('---\n'),
    );
    await write('  - { name: mesh, type: file, path: ./mesh }');
    let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    const client = connectIstiod(xds);
    try {
      await client.waitFor(
        (c) => c.configs(VS).size === 4,
        WAIT_MS,
        () => 'the first state',
      );
      await until(() => stateFileOf(dir.dir, 'mesh'), 'the state of mesh written');
      const before = inventory(client);
      await meshmux.kill('SIGKILL');
      // Now an xds source of the same name, its upstream answering nothing.
      await write(meshLine(empty.address));
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      await until(
        async () =>
          (await meshmux.debug<SourcesPage[]>('sources')).some(
            (s) => s.name === 'mesh' && s.state === 'synced',
          ),
        'the new source synced',
      );
      await writeFile(path.join(dir.dir, 'local', 'vs2.yaml'), localVs('back'));
      await client.waitFor(
        (c) => c.configs(VS).has('local/back'),
        WAIT_MS,
        () => 'a later change',
      );
      assert.deepEqual(lost(before, inventory(client)), [], 'objects lost');
      await until(
        async () => (await meshmux.debug<SourcesPage[]>('sources')).some((s) => s.held !== undefined),
        'the empty first state judged (after settle)',
      );
      assert.deepEqual(lost(before, inventory(client)), [], 'objects lost once judged');
      const held = (await meshmux.debug<SourcesPage[]>('sources')).find((s) => s.name === 'mesh')?.held;
      assert.deepEqual([held?.reason, held?.deletions], ['empty', 3]);
      report('a source whose type changed while meshmux was down', { 'objects lost': 0 });
    } finally {
      client.close();
      await meshmux.kill();
      await empty.stop();
      await dir.dispose();
    }
  });

  it('counts maxStale from the restart, not from the last change of a quiet, healthy source', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-config-stale-');
    const quiet = await FakeAdsServer.start({ peer: 'istiod' });
    quiet.set(
      'VirtualService',
      MESH_NAMES.map((n) => fakeVirtualService(n)),
    );
    await write(meshLine(quiet.address, ', maxStale: 3s'));
    const xds = `127.0.0.1:${await freePort()}`;
    let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    const client = connectIstiod(xds);
    try {
      await client.waitFor(
        (c) => c.configs(VS).size === 6,
        WAIT_MS,
        () => 'the first state',
      );
      // Synced and unchanged for longer than maxStale, then restarted while the upstream is away.
      await new Promise((r) => setTimeout(r, 4_000));
      const before = inventory(client);
      await meshmux.kill('SIGKILL');
      await quiet.stop();
      const streams = client.streams;
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      await answeredAfter(client, streams, 'every type answered by the restarted meshmux');
      assert.deepEqual(lost(before, inventory(client)), [], 'objects lost at the restart');
      // Stale past maxStale counted from the restart: then dropped, as configured.
      const restartedAt = meshmux.spawnedAt;
      await client.waitFor(
        (c) => c.configs(VS).size === 1,
        WAIT_MS,
        () => 'dropped past maxStale',
      );
      const droppedAfterMs = performance.now() - restartedAt;
      assert.ok(droppedAfterMs >= 3_000, `dropped ${Math.round(droppedAfterMs)} ms after the restart`);
      report('a quiet source restarted with maxStale 3s', {
        'objects lost at the restart': 0,
        'ms from the restart to the drop maxStale asks for': droppedAfterMs,
      });
    } finally {
      client.close();
      await meshmux.kill();
      await quiet.stop();
      await dir.dispose();
    }
  });

  it("withdraws, as its guards allow, the objects of a kind taken out of a source's kinds by an edit", async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-config-kinds-');
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connectIstiod(meshmux.xds);
    try {
      await client.waitFor(holdsAll, WAIT_MS, () => 'the first state');
      assert.equal(client.configs(DR).size, 5);
      const editedAt = performance.now();
      await write(
        `  - { name: mesh, type: xds, address: ${fake.address}, kinds: [VirtualService, ServiceEntry] }`,
      );
      await client.waitFor(
        (c) => c.configs(DR).size === 0,
        WAIT_MS,
        () => 'the DestinationRules withdrawn',
      );
      const withdrawnMs = performance.now() - editedAt;
      assert.ok(holdsAll(client), 'the kinds still configured are served as they were');
      report("a kind taken out of a source's kinds by an edit", {
        'objects of it served after the edit': client.configs(DR).size,
        'ms from the edit to their withdrawal': withdrawnMs,
      });
    } finally {
      client.close();
      await meshmux.kill();
      await dir.dispose();
    }
  });

  it('holds access rules edited with a typo, on a live reload and across a restart, until confirmed', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-config-allow-');
    await write(meshLine(fake.address, ", allow: { namespaces: ['shop'] }"));
    const xds = `127.0.0.1:${await freePort()}`;
    let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    const client = connectIstiod(xds);
    try {
      await client.waitFor(holdsAll, WAIT_MS, () => 'the first state');
      const before = inventory(client);
      await write(meshLine(fake.address, ", allow: { namespaces: ['shp'] }"));
      await until(async () => {
        const sources = await meshmux.debug<SourcesPage[]>('sources');
        return sources.some((s) => s.name === 'mesh' && s.held?.reason === 'rules');
      }, 'the edited rules held');
      await writeFile(path.join(dir.dir, 'local', 'vs2.yaml'), localVs('back'));
      await client.waitFor(
        (c) => c.configs(VS).has('local/back'),
        WAIT_MS,
        () => 'a later change',
      );
      assert.deepEqual(lost(before, inventory(client)), [], 'objects lost by the reload');

      // Restarted with the typo still in the file: the record's rules serve, the edit is held again.
      await until(async () => {
        const page = await meshmux.debug<{ files: Array<{ source: string; lastWrite?: string }> }>('state');
        return page.files.some((f) => f.source === 'mesh' && f.lastWrite !== undefined);
      }, 'the record of mesh written');
      await meshmux.kill('SIGKILL');
      const streams = client.streams;
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      await answeredAfter(client, streams, 'every type answered by the restarted meshmux');
      await until(async () => {
        const sources = await meshmux.debug<SourcesPage[]>('sources');
        return sources.some((s) => s.name === 'mesh' && s.state === 'synced');
      }, 'the upstream heard again');
      await writeFile(path.join(dir.dir, 'local', 'vs3.yaml'), localVs('side'));
      await client.waitFor(
        (c) => c.configs(VS).has('local/side'),
        WAIT_MS,
        () => 'a change after the restart',
      );
      assert.deepEqual(lost(before, inventory(client)), [], 'objects lost by the restart');
      assert.deepEqual(await heldReason(meshmux, 'mesh'), { reason: 'rules', deletions: 15, total: 15 });

      await confirm(meshmux, 'mesh');
      await client.waitFor(
        (c) => c.configs(SE).size === 0 && c.configs(VS).size === 3,
        WAIT_MS,
        () => 'the confirmed rules applied',
      );
      report('access rules edited with a typo (a namespace glob matching none of 15 objects)', {
        'objects lost on reload': 0,
        'objects lost on restart': 0,
      });
    } finally {
      client.close();
      await meshmux.kill();
      await dir.dispose();
    }
  });
});
