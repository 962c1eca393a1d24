import assert from 'node:assert/strict';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAX_DOCUMENTS_WITH_PROBLEMS_LISTED, MAX_REJECTED_DOCUMENTS } from '../../src/schema/yaml-reader.js';
import { IstiodClient } from '../support/istiod-client.js';
import { aliasBomb, plainServiceEntry, writeHugeYaml } from '../support/hostile-files.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess, type LogLine } from '../support/meshmux-process.js';
import { SE } from '../support/type-urls.js';

const MiB = 1024 * 1024;

/** The error text of a file source's "rejected a document" log line. */
function rejection(line: LogLine): string {
  return line.msg === 'rejected a document' && typeof line.error === 'string' ? line.error : '';
}

describe('hostile files in a watched folder', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;
  let client: IstiodClient;

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-hostile-files-'));
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'cart.yaml'), plainServiceEntry('cart'));
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      'sources:\n  - name: local\n    type: file\n    path: ./mesh\n    rescanInterval: 500ms\n',
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    client = new IstiodClient({ address: meshmux.xds }).start();
    await client.waitFor(
      (c) => c.configs(SE).has('shop/cart'),
      20_000,
      () => 'cart',
    );
  });
  after(async () => {
    client.close();
    await meshmux.stop();
    await dispose();
  });

  /** Writes a new file and waits until the istiod stand-in has it: the process is alive and serving. */
  async function stillServes(name: string): Promise<void> {
    await writeFile(path.join(dir, 'mesh', `${name}.yaml`), plainServiceEntry(name));
    await client.waitFor(
      (c) => c.configs(SE).has(`shop/${name}`),
      30_000,
      () => `${name} served`,
    );
    assert.ok(client.configs(SE).has('shop/cart'), 'cart is still served');
    assert.equal(client.streamEnds.length, 0, 'the stream never ended');
  }

  it('refuses a 200 MB file with an error naming it and the cap, and keeps serving the other files', async () => {
    const from = meshmux.logs.length;
    await meshmux.resetCounters();
    // Written beside the folder, then moved in whole, as a deploy would.
    const huge = path.join(dir, 'mesh', 'huge.yaml');
    await writeHugeYaml(path.join(dir, 'huge.yaml'), 200 * MiB);
    await rename(path.join(dir, 'huge.yaml'), huge);
    const refused = await meshmux.waitForLog(
      (l) => /huge\.yaml: file too large: \d+ bytes is more than the limit of 32 MiB/.test(rejection(l)),
      from,
      60_000,
      'huge.yaml refused for its size',
    );
    await stillServes('after-huge');
    const { process: counters } = await meshmux.counters();
    console.log(
      `# 200 MB file: "${rejection(refused)}"; RSS ${(counters.rssBytes / MiB).toFixed(0)} MiB (max ${(counters.maxRssBytes / MiB).toFixed(0)} MiB), longest event-loop stall ${counters.eventLoopDelayMaxMs} ms`,
    );
    assert.ok(counters.maxRssBytes < 200 * MiB, 'the file was never held in memory');
    await rm(huge);
  });

  it('refuses a file of alias bombs with "alias expansion limit", reads its other documents, and keeps the event loop moving', async () => {
    const from = meshmux.logs.length;
    await meshmux.resetCounters();
    const bombs = Array.from({ length: 2_000 }, (_, i) => aliasBomb(`bomb-${i}`));
    await writeFile(
      path.join(dir, 'mesh', 'bombs.yaml'),
      [...bombs, plainServiceEntry('behind-bombs')].join('---\n'),
    );
    await client.waitFor(
      (c) => c.configs(SE).has('shop/behind-bombs'),
      60_000,
      () => 'the valid document after the bombs',
    );
    const refused = await meshmux.waitForLog(
      (l) => /bombs\.yaml doc 0 line 1 field \S+: alias expansion limit/.test(rejection(l)),
      from,
      10_000,
      'the first bomb refused',
    );
    const { process: counters } = await meshmux.counters();
    const sources = (await (await fetch(`${meshmux.admin}/debug/sources`)).json()) as Array<{
      errors: string[];
    }>;
    const errors = sources.flatMap((x) => x.errors);
    const refusals = errors.filter((e) => /bombs\.yaml doc \d+ .*alias expansion limit/.test(e)).length;
    console.log(
      `# 2,000 alias-bomb documents (${bombs.join('').length} bytes): ${refusals} refusals listed ("${rejection(refused)}"); longest event-loop stall while read ${counters.eventLoopDelayMaxMs} ms (goal ≤ 50 ms)`,
    );
    assert.equal(refusals, MAX_DOCUMENTS_WITH_PROBLEMS_LISTED);
    assert.ok(errors.some((e) => /bombs\.yaml: 1900 more documents rejected/.test(e)));
    assert.ok(!client.configs(SE).has('shop/bomb-0'));
    await stillServes('after-bombs');
  });

  it('refuses an EnvoyFilter nested past what protobuf encodes, and serves the documents beside it', async () => {
    const from = meshmux.logs.length;
    // 60 levels of a free-form patch value: 120 messages deep once encoded, past protobufjs's 100.
    let value: unknown = { leaf: 'x' };
    for (let i = 0; i < 60; i++) value = { nested: value };
    const filter = {
      apiVersion: 'networking.istio.io/v1alpha3',
      kind: 'EnvoyFilter',
      metadata: { name: 'deep', namespace: 'shop' },
      spec: { configPatches: [{ applyTo: 'HTTP_FILTER', patch: { operation: 'MERGE', value } }] },
    };
    await writeFile(
      path.join(dir, 'mesh', 'deep.yaml'),
      [plainServiceEntry('beside-deep'), JSON.stringify(filter), plainServiceEntry('after-deep')].join(
        '\n---\n',
      ),
    );
    await client.waitFor(
      (c) => c.configs(SE).has('shop/beside-deep') && c.configs(SE).has('shop/after-deep'),
      30_000,
      () => 'the ServiceEntries before and after the deep EnvoyFilter',
    );
    const refused = await meshmux.waitForLog(
      (l) => rejection(l).includes('deep.yaml'),
      from,
      20_000,
      'deep.yaml refused',
    );
    console.log(`# EnvoyFilter nested 60 levels: "${rejection(refused)}"`);
    assert.match(
      rejection(refused),
      /deep\.yaml doc 1 line \d+ field spec: nested more than 100 messages deep once encoded/,
    );
    await stillServes('after-deep-file');
  });

  it('refuses a file that is not UTF-8 with the line and column of the bad byte', async () => {
    const from = meshmux.logs.length;
    const text = Buffer.from(
      plainServiceEntry('latin1').replace('latin1.example.com', 'caf\u00e9.example.com'),
      'latin1',
    );
    await writeFile(path.join(dir, 'mesh', 'latin1.yaml'), text);
    const refused = await meshmux.waitForLog(
      (l) => rejection(l).includes('latin1.yaml'),
      from,
      20_000,
      'latin1.yaml refused',
    );
    assert.match(
      rejection(refused),
      /latin1\.yaml line 4: invalid UTF-8: byte 0xe9 at column \d+ \(byte offset \d+\)/,
    );
    console.log(`# invalid UTF-8: "${rejection(refused)}"`);
    assert.ok(!client.configs(SE).has('shop/latin1'));
    await stillServes('after-latin1');
  });
  it('lists the first rejected documents of a file of 200,000 tiny invalid ones and counts the rest, and keeps serving', async () => {
    const from = meshmux.logs.length;
    await meshmux.resetCounters();
    const documents = 200_000;
    // 1.1 MiB, far under the size cap: every document `x`, a scalar where a map belongs.
    await writeFile(path.join(dir, 'tiny.yaml'), 'x\n---\n'.repeat(documents));
    const movedAt = performance.now();
    await rename(path.join(dir, 'tiny.yaml'), path.join(dir, 'mesh', 'tiny.yaml'));
    const counted =
      `tiny.yaml: ${MAX_REJECTED_DOCUMENTS - MAX_DOCUMENTS_WITH_PROBLEMS_LISTED} more documents rejected; ` +
      `the first ${MAX_DOCUMENTS_WITH_PROBLEMS_LISTED} with errors are listed; ` +
      `nothing after document ${MAX_REJECTED_DOCUMENTS - 1} is read`;
    await meshmux.waitForLog(
      (l) => rejection(l).startsWith('mesh/tiny.yaml doc 0 '),
      from,
      60_000,
      'the first tiny document rejected',
    );
    await stillServes('after-tiny');
    const servedMs = performance.now() - movedAt;
    const body = await (await fetch(`${meshmux.admin}/debug/sources`)).text();
    const errors = (JSON.parse(body) as Array<{ errors: string[] }>).flatMap((x) => x.errors);
    const listed = errors.filter((e) => e.startsWith('mesh/tiny.yaml doc ')).length;
    const { process: counters } = await meshmux.counters();
    console.log(
      `# ${documents} tiny invalid documents: ${listed} listed, then "${counted}": ${errors.some((e) => e.includes(counted))}; another file's edit served ${servedMs.toFixed(0)} ms after the move; /debug/sources ${body.length} bytes; max RSS ${(counters.maxRssBytes / MiB).toFixed(0)} MiB, longest event-loop stall ${counters.eventLoopDelayMaxMs} ms`,
    );
    assert.equal(listed, MAX_DOCUMENTS_WITH_PROBLEMS_LISTED);
    assert.ok(
      errors.some((e) => e.includes(counted)),
      `"${counted}" is listed`,
    );
    assert.ok(body.length < MiB, '/debug/sources stays small');
    await rm(path.join(dir, 'mesh', 'tiny.yaml'));
  });
});
