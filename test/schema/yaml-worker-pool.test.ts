import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import type { Timestamp } from '../../src/core/resource.js';
import { readYamlDocuments, readYamlDocumentsAsync } from '../../src/schema/yaml-reader.js';
import { YamlWorkerPool } from '../../src/schema/yaml-worker-pool.js';
import { YAML_REPLY_PART_SIZE } from '../../src/schema/yaml-worker-protocol.js';
import { within } from '../support/deadline.js';
import { aliasBomb, plainServiceEntry } from '../support/hostile-files.js';

const OPTIONS = { file: 'mesh.yaml', defaultNamespace: 'default' };

/** One ServiceEntry with as many hosts as asked, in a single document. */
function oneHugeDocument(hosts: number): string {
  let text = `apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: huge, namespace: shop}\nspec:\n  hosts:\n`;
  for (let i = 0; i < hosts; i++) text += `  - h${i}.example.com\n`;
  return text;
}

describe('reading YAML on a worker thread', () => {
  const pools: YamlWorkerPool[] = [];
  after(async () => {
    for (const p of pools) await p.close();
  });

  it('gives what the in-process reader gives: bodies, versions, origins, createTimeFor applied here, errors and warnings', async () => {
    const text = [
      plainServiceEntry('a'),
      `apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: stamped, namespace: shop, creationTimestamp: "2021-03-04T05:06:07Z", labels: {app: x}}\nspec: {hosts: [s.example.com], unknownField: 1}\n`,
      aliasBomb('bomb'),
      'a: b: c\n',
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skipped}\n',
      plainServiceEntry('b'),
    ].join('---\n');
    const asked: string[] = [];
    const createTimeFor = (kind: string, namespace: string, name: string): Timestamp => {
      asked.push(`${kind}|${namespace}/${name}`);
      return { seconds: 1000 + asked.length, nanos: 7 };
    };
    const inProcess = readYamlDocuments(text, {
      ...OPTIONS,
      createTimeFor: () => ({ seconds: 0, nanos: 0 }),
    });
    const onWorker = await within(
      readYamlDocumentsAsync(text, { ...OPTIONS, createTimeFor }),
      60_000,
      'the worker to read the text',
    );
    assert.deepEqual(
      onWorker.resources.map((r) => [
        r.kind,
        r.namespace,
        r.name,
        r.version,
        Buffer.from(r.body).toString('hex'),
        r.labels,
        r.origin,
      ]),
      inProcess.resources.map((r) => [
        r.kind,
        r.namespace,
        r.name,
        r.version,
        Buffer.from(r.body).toString('hex'),
        r.labels,
        r.origin,
      ]),
    );
    assert.deepEqual(
      asked,
      ['networking.istio.io/ServiceEntry|shop/a', 'networking.istio.io/ServiceEntry|shop/b'],
      'asked in document order, only for documents without creationTimestamp',
    );
    assert.deepEqual(
      onWorker.resources.map((r) => r.createTime),
      [{ seconds: 1001, nanos: 7 }, inProcess.resources[1]?.createTime, { seconds: 1002, nanos: 7 }],
    );
    for (const key of ['errors', 'warnings'] as const) {
      assert.ok(inProcess[key].length > 0, `the text has ${key}`);
      assert.deepEqual(
        onWorker[key].map((e) => [e.name, e.code, e.describe()]),
        inProcess[key].map((e) => [e.name, e.code, e.describe()]),
        key,
      );
    }
  });

  it('hands a large answer over in parts and puts them together in document order', async () => {
    const docs: string[] = [];
    for (let i = 0; i < 1300; i++)
      docs.push(i % 4 === 3 ? `kind: [broken-${i}\n` : plainServiceEntry(`many-${i}`));
    const text = docs.join('---\n');
    const inProcess = readYamlDocuments(text, OPTIONS);
    const onWorker = await within(
      readYamlDocumentsAsync(text, OPTIONS),
      60_000,
      'the worker to read 1,300 documents',
    );
    assert.ok(
      inProcess.resources.length + inProcess.errors.length > YAML_REPLY_PART_SIZE * 2,
      'more than two parts',
    );
    assert.deepEqual(
      onWorker.resources.map((r) => [r.name, r.version, r.origin.doc]),
      inProcess.resources.map((r) => [r.name, r.version, r.origin.doc]),
    );
    assert.deepEqual(
      onWorker.errors.map((e) => e.describe()),
      inProcess.errors.map((e) => e.describe()),
    );
  });

  it('refuses a file that needs more than the memory cap with an error naming it, and reads the next file', async () => {
    const pool = new YamlWorkerPool({ heapLimitMb: 16 });
    pools.push(pool);
    const refused = await within(
      pool.read(oneHugeDocument(200_000), { ...OPTIONS, file: 'hosts/huge.yaml' }),
      120_000,
      'the worker to run out of memory on huge.yaml',
    );
    assert.deepEqual(refused.resources, []);
    assert.equal(refused.errors.length, 1);
    assert.equal(refused.errors[0]?.code, 'LIMIT');
    assert.match(
      refused.errors[0]?.describe() ?? '',
      /^hosts\/huge\.yaml: reading this file needs more than the YAML reader's memory limit of 16 MiB$/,
    );
    const next = await within(
      pool.read(plainServiceEntry('after'), { ...OPTIONS, file: 'after.yaml' }),
      60_000,
      'a new worker to read after.yaml',
    );
    assert.deepEqual(next.errors, []);
    assert.deepEqual(
      next.resources.map((r) => r.name),
      ['after'],
    );
  });

  it('reads texts queued behind one that kills the worker, each with its own result', async () => {
    const pool = new YamlWorkerPool({ heapLimitMb: 16 });
    pools.push(pool);
    const results = await within(
      Promise.all([
        pool.read(plainServiceEntry('first'), { ...OPTIONS, file: 'first.yaml' }),
        pool.read(oneHugeDocument(200_000), { ...OPTIONS, file: 'huge.yaml' }),
        pool.read(plainServiceEntry('third'), { ...OPTIONS, file: 'third.yaml' }),
      ]),
      120_000,
      'three queued reads',
    );
    assert.deepEqual(
      results.map((r) => [r.resources.map((x) => x.name), r.errors.map((e) => e.location.file)]),
      [
        [['first'], []],
        [[], ['huge.yaml']],
        [['third'], []],
      ],
    );
  });

  it('answers every queued read once closed, and does not hold the process open when idle', async () => {
    const pool = new YamlWorkerPool();
    const pending = pool.read(plainServiceEntry('late'), OPTIONS);
    await pool.close();
    const closed = await within(pending, 30_000, 'the read queued before close to be answered');
    assert.match(closed.errors[0]?.describe() ?? '', /^mesh\.yaml: the YAML reader is closed$/);

    // A process that read a file through the worker and has nothing else to do exits by itself.
    const reader = fileURLToPath(new URL('../../src/schema/yaml-reader.js', import.meta.url));
    const script = `import(${JSON.stringify(reader)}).then((m) => m.readYamlDocumentsAsync(${JSON.stringify(plainServiceEntry('x'))}, { file: 'x.yaml', defaultNamespace: 'd' })).then((r) => console.log(r.resources.map((x) => x.name).join()))`;
    const output = await within(
      new Promise<string>((resolve, reject) => {
        execFile(
          process.execPath,
          ['--input-type=module', '-e', script],
          { timeout: 60_000 },
          (err, stdout) =>
            err === null ? resolve(stdout) : reject(new Error(`the child failed: ${err.message}`)),
        );
      }),
      60_000,
      'a child process that read one file to exit on its own',
    );
    assert.equal(output.trim(), 'x');
  });
});
