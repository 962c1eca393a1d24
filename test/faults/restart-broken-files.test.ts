/**
 * A file that turned broken (an invalid document, or bytes that are not UTF-8) keeps serving the
 * objects it held, and a restart of meshmux with its state folder intact must not change that:
 * the restarted file and git sources read the same broken file first, and the objects the record
 * kept for it stay served. Real meshmux processes, an istiod stand-in connected across the
 * restart, a folder and a `file://` git remote.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { connectIstiod, report } from '../support/fault-kit.js';
import { TestRepo } from '../support/git-fixtures.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { SE } from '../support/type-urls.js';

const WAIT_MS = 20_000;
const SHOP = ['cart', 'pay', 'ship', 'search', 'auth'];

/** Five ServiceEntries of namespace `shop`, `pay`'s port turned into a word when `broken`. */
function shopYaml(broken: boolean): string {
  return SHOP.map((n) => {
    const doc = plainServiceEntry(n);
    return broken && n === 'pay' ? doc.replace('number: 443', 'number: https') : doc;
  }).join('---\n');
}

interface SourcePage {
  name: string;
  state: string;
  errors: string[];
}

/** Polls `/debug/<page>` until `done` holds for it; rejects after {@link WAIT_MS}, naming `what`. */
async function debugUntil<T>(
  meshmux: MeshmuxProcess,
  page: string,
  done: (body: T) => boolean,
  what: string,
): Promise<T> {
  const deadline = performance.now() + WAIT_MS;
  for (;;) {
    const body = await meshmux.debug<T>(page);
    if (done(body)) return body;
    if (performance.now() > deadline) throw new Error(`${what}: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts meshmux in `dir` on a file source of its folder `mesh`, its state in `state`. */
async function startOnFolder(configFile: string, dir: string): Promise<MeshmuxProcess> {
  await writeFile(
    configFile,
    'state: { dir: state }\nsources:\n  - { name: local, type: file, path: mesh }\n',
  );
  return MeshmuxProcess.start(configFile, { cwd: dir });
}

/** Resolves once meshmux has written `source`'s record after `since` (ms since the epoch). */
async function recorded(meshmux: MeshmuxProcess, source: string, since: number): Promise<void> {
  await debugUntil<{ files: Array<{ source: string; lastWrite?: string }> }>(
    meshmux,
    'state',
    (page) => {
      const written = page.files.find((f) => f.source === source)?.lastWrite;
      return written !== undefined && Date.parse(written) >= since;
    },
    `no record of ${source} written`,
  );
}

/**
 * Restarts meshmux on the same ADS port once the broken file's state is recorded, waits until
 * `source` has synced with what it reads now, then has `change` add `shop/later` and waits for the
 * stand-in to hold it: the first state read after the restart has reached it by then.
 */
async function restartAndChange(
  meshmux: MeshmuxProcess,
  client: IstiodClient,
  configFile: string,
  cwd: string,
  source: string,
  change: () => Promise<unknown>,
): Promise<{ meshmux: MeshmuxProcess; sources: SourcePage[] }> {
  const held = [...client.configs(SE).keys()];
  await meshmux.stop();
  const started = performance.now();
  const restarted = await MeshmuxProcess.start(configFile, { cwd, xds: meshmux.xds });
  // What the stand-in lost at worst after the restart, and when it first lost something.
  let lost = 0;
  let firstLossMs: number | undefined;
  const look = (): void => {
    const missing = held.filter((name) => !client.configs(SE).has(name)).length;
    if (missing > 0) firstLossMs ??= performance.now() - started;
    lost = Math.max(lost, missing);
  };
  const watcher = setInterval(look, 20);
  try {
    const sources = await debugUntil<SourcePage[]>(
      restarted,
      'sources',
      (page) => page.find((s) => s.name === source)?.state === 'synced',
      `${source} never synced after the restart`,
    );
    await change();
    await client.waitFor(
      (c) => c.configs(SE).has('shop/later'),
      WAIT_MS,
      () => 'shop/later served',
    );
    // A deletion may reach the stand-in in the response that brings `shop/later`.
    look();
    report(`restart with a broken file (${source})`, {
      'objects held before': held.length,
      'objects lost': lost,
      'first lost, ms after the restart began': firstLossMs ?? '-',
    });
    return { meshmux: restarted, sources };
  } catch (err) {
    await restarted.stop();
    throw err;
  } finally {
    clearInterval(watcher);
  }
}

/**
 * Rewrites `configFile` with `config` once a file is broken, waits until meshmux applied it (the
 * source runs anew, its settings changed), then has `change` add `shop/later` and waits for the
 * stand-in to hold it, watching all along for anything it held going missing.
 */
async function reloadAndChange(
  meshmux: MeshmuxProcess,
  client: IstiodClient,
  configFile: string,
  config: string,
  change: () => Promise<unknown>,
): Promise<void> {
  const held = [...client.configs(SE).keys()];
  let lost = 0;
  const look = (): void => {
    lost = Math.max(lost, held.filter((name) => !client.configs(SE).has(name)).length);
  };
  const watcher = setInterval(look, 20);
  try {
    const from = meshmux.logs.length;
    await writeFile(configFile, config);
    await meshmux.waitForLog((l) => l.msg === 'sources reconfigured', from, WAIT_MS, 'the reload');
    await change();
    await client.waitFor(
      (c) => c.configs(SE).has('shop/later'),
      WAIT_MS,
      () => 'shop/later served',
    );
    look();
    report('reload with a broken file', { 'objects held before': held.length, 'objects lost': lost });
    assert.equal(lost, 0, 'objects the stand-in lost while the reloaded source read the broken file');
  } finally {
    clearInterval(watcher);
  }
}

/** A source serving the five objects of `shop.yaml`, then a commit or an edit that broke `pay`'s document. */
interface BrokenCase {
  readonly dir: string;
  readonly configFile: string;
  /** The source's name. */
  readonly source: string;
  /** Its configuration, `setting` (`interval: 2s`, say) among the source's fields. */
  readonly config: (setting: string) => string;
  readonly meshmux: MeshmuxProcess;
  readonly client: IstiodClient;
  /** Adds `shop/later` the way the source reads (a file, or a commit). */
  readonly addLater: () => Promise<unknown>;
  /** When `pay`'s document was broken (ms since the epoch). */
  readonly brokenAt: number;
  /** Removes the folder; the caller closes the stand-in and stops meshmux first. */
  readonly dispose: () => Promise<void>;
}

/**
 * Starts meshmux on a file or a git source of `shop.yaml`, an istiod stand-in holding its five
 * objects, then breaks `pay`'s document, waiting until meshmux rejected it while still serving it.
 */
async function brokenCase(type: 'file' | 'git', prefix: string): Promise<BrokenCase> {
  const { dir, dispose } = await tempDir(prefix);
  const configFile = path.join(dir, 'meshmux.yaml');
  let config: (setting: string) => string;
  let write: (file: string, text: string, why: string) => Promise<unknown>;
  if (type === 'file') {
    await mkdir(path.join(dir, 'mesh'));
    config = (setting) =>
      `state: { dir: state }\nsources:\n  - { name: local, type: file, path: mesh${setting} }\n`;
    write = (file, text) => writeFile(path.join(dir, 'mesh', file), text);
  } else {
    const repo = await TestRepo.create(dir);
    config = (setting) =>
      'state: { dir: state }\nsources:\n' +
      `  - { name: config, type: git, url: '${repo.fileUrl}', cacheDir: git-cache${setting || ', interval: 1s'} }\n`;
    write = (file, text, why) => repo.commitAndPush({ [file]: text }, why);
  }
  await write('shop.yaml', shopYaml(false), 'five');
  await writeFile(configFile, config(''));
  const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir });
  const client = connectIstiod(meshmux.xds);
  try {
    await client.waitFor(
      (c) => c.configs(SE).size === 5,
      WAIT_MS,
      () => 'all five served',
    );
    const brokenAt = Date.now();
    await write('shop.yaml', shopYaml(true), 'break pay');
    await meshmux.waitForLog((l) => l.msg === 'rejected a document', 0, WAIT_MS, 'the rejection');
    assert.ok(client.configs(SE).has('shop/pay'), 'pay kept while its document is invalid');
    return {
      dir,
      configFile,
      source: type === 'file' ? 'local' : 'config',
      config,
      meshmux,
      client,
      addLater: () => write('later.yaml', plainServiceEntry('later'), 'later'),
      brokenAt,
      dispose,
    };
  } catch (err) {
    client.close();
    await meshmux.stop();
    await dispose();
    throw err;
  }
}

/** Whether the stand-in holds the five objects of `shop.yaml` and `shop/later`, and nothing else. */
function holdsShopAndLater(client: IstiodClient): void {
  assert.deepEqual([...client.configs(SE).keys()].sort(), [...SHOP, 'later'].map((n) => `shop/${n}`).sort());
}

describe('faults: a restart with a broken file', () => {
  for (const type of ['file', 'git'] as const) {
    it(`still serves the object of a document that turned invalid, in a ${type} source, after a restart`, async () => {
      const broken = await brokenCase(type, `meshmux-fault-broken-restart-${type}-`);
      let { meshmux } = broken;
      try {
        await recorded(meshmux, broken.source, broken.brokenAt);
        const run = await restartAndChange(
          meshmux,
          broken.client,
          broken.configFile,
          broken.dir,
          broken.source,
          broken.addLater,
        );
        meshmux = run.meshmux;
        holdsShopAndLater(broken.client);
        const errors = run.sources.find((s) => s.name === broken.source)?.errors ?? [];
        assert.ok(
          errors.some((e) => e.includes('shop.yaml')),
          `the invalid document is still reported: ${errors.join('; ')}`,
        );
      } finally {
        broken.client.close();
        await meshmux.stop();
        await broken.dispose();
      }
    });

    it(`still serves the object of a document that turned invalid, in a ${type} source whose settings a reload changed`, async () => {
      const broken = await brokenCase(type, `meshmux-fault-broken-reload-${type}-`);
      try {
        const setting = type === 'file' ? ', rescanInterval: 7s' : ', interval: 2s';
        await reloadAndChange(
          broken.meshmux,
          broken.client,
          broken.configFile,
          broken.config(setting),
          broken.addLater,
        );
        holdsShopAndLater(broken.client);
      } finally {
        broken.client.close();
        await broken.meshmux.stop();
        await broken.dispose();
      }
    });
  }

  it('still serves the objects of a file saved in Latin-1, in a file source, after a restart', async () => {
    const { dir, dispose } = await tempDir('meshmux-fault-latin1-restart-');
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'shop.yaml'), shopYaml(false));
    const other = ['a', 'b', 'c'].map((n) => plainServiceEntry(`other-${n}`)).join('---\n');
    const otherFile = path.join(dir, 'mesh', 'other.yaml');
    await writeFile(otherFile, other);
    const configFile = path.join(dir, 'meshmux.yaml');
    // The record is written before the istiod is sent it, and the refused file changes nothing
    // in it: the write to wait for is the first one of this run.
    const since = Date.now();
    let meshmux = await startOnFolder(configFile, dir);
    const client = connectIstiod(meshmux.xds);
    try {
      await client.waitFor(
        (c) => c.configs(SE).size === 8,
        WAIT_MS,
        () => 'all eight served',
      );
      // An editor saves it in Latin-1: the whole file is refused, its three objects kept.
      await writeFile(otherFile, Buffer.from(`${other}# café\n`, 'latin1'));
      await meshmux.waitForLog((l) => l.msg === 'rejected a document', 0, WAIT_MS, 'the rejection');
      await recorded(meshmux, 'local', since);
      assert.equal(client.configs(SE).size, 8);
      const run = await restartAndChange(meshmux, client, configFile, dir, 'local', () =>
        writeFile(path.join(dir, 'mesh', 'later.yaml'), plainServiceEntry('later')),
      );
      meshmux = run.meshmux;
      assert.equal(client.configs(SE).size, 9, [...client.configs(SE).keys()].sort().join(', '));
      for (const n of ['a', 'b', 'c']) assert.ok(client.configs(SE).has(`shop/other-${n}`), n);
    } finally {
      client.close();
      await meshmux.stop();
      await dispose();
    }
  });
});
