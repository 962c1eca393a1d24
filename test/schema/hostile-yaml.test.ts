import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeUtf8, firstInvalidUtf8 } from '../../src/schema/utf8-text.js';
import { readYamlDocuments, readYamlDocumentsInSlices } from '../../src/schema/yaml-reader.js';
import { aliasBomb } from '../support/hostile-files.js';

const OPTIONS = { file: 'mesh.yaml', defaultNamespace: 'default' };

function serviceEntry(name: string): string {
  return `apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ${name}, namespace: shop}\nspec: {hosts: [${name}.example.com]}\n`;
}

describe('hostile YAML', () => {
  it('says "alias expansion limit" for an alias bomb, not that apiVersion is missing', () => {
    const r = readYamlDocuments(aliasBomb('bomb'), OPTIONS);
    assert.equal(r.errors.length, 1);
    assert.equal(r.errors[0]?.code, 'LIMIT');
    assert.match(r.errors[0]?.describe() ?? '', /^mesh\.yaml doc 0 line 1 field \S+: alias expansion limit/);
    assert.doesNotMatch(r.errors[0]?.message ?? '', /apiVersion/);
  });

  it('counts alias expansion per file: documents each under the limit are refused once together they pass it', () => {
    // About 25,000 expanded nodes each: fine alone, over an 80,000 budget from the fourth on.
    const docs = Array.from({ length: 6 }, (_, i) => aliasBomb(`small-${i}`, 3, 7));
    const r = readYamlDocuments([...docs, serviceEntry('plain')].join('---\n'), {
      ...OPTIONS,
      aliasLimit: 80_000,
    });
    assert.deepEqual(
      r.resources.map((x) => x.name),
      ['small-0', 'small-1', 'small-2', 'plain'],
      'documents without aliases are still read after the budget is spent',
    );
    assert.deepEqual(
      r.errors.map((e) => e.location.doc),
      [3, 4, 5],
    );
    for (const e of r.errors) assert.match(e.message, /alias expansion limit/);
  });

  it('resolves many aliases of one anchor in one pass over the document', () => {
    const items = Array.from({ length: 20_000 }, () => '  - *h').join('\n');
    const text = `${serviceEntry('many').replace('spec: {hosts: [many.example.com]}\n', '')}a: &h many.example.com\nspec:\n hosts: [*h]\nx:\n${items}\n`;
    const started = performance.now();
    const r = readYamlDocuments(text, OPTIONS);
    const ms = performance.now() - started;
    assert.deepEqual(r.errors, []);
    assert.deepEqual(
      r.resources.map((x) => x.name),
      ['many'],
    );
    console.log(`# 20,000 aliases of one anchor read in ${ms.toFixed(0)} ms`);
  });

  it('reads the same way with or without yielding, and lets a timer run between documents', async () => {
    const text = [
      serviceEntry('a'),
      aliasBomb('bomb'),
      serviceEntry('b'),
      'a: b: c\n',
      serviceEntry('c'),
    ].join('---\n');
    const sync = readYamlDocuments(text, OPTIONS);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    let clock = 0;
    // Every document takes "20 ms" on this clock, so the reader yields after each one.
    const async = await readYamlDocumentsInSlices(text, {
      ...OPTIONS,
      sliceMs: 10,
      now: () => (clock += 10),
    });
    clearInterval(timer);
    assert.deepEqual(
      async.resources.map((r) => r.name),
      sync.resources.map((r) => r.name),
    );
    assert.deepEqual(
      async.errors.map((e) => e.describe()),
      sync.errors.map((e) => e.describe()),
    );
    assert.deepEqual(
      async.resources.map((r) => r.name),
      ['a', 'b', 'c'],
    );
    assert.deepEqual(
      async.errors.map((e) => [e.location.doc, e.code]),
      [
        [1, 'LIMIT'],
        [3, 'YAML_SYNTAX'],
      ],
    );
    assert.ok(ticks >= 2, `timers ran while the file was read (${ticks} ticks)`);
  });

  it('finds the first byte that is not UTF-8 and names its line and column', () => {
    assert.equal(firstInvalidUtf8(Buffer.from('plain ascii and ünïcödé ✓ 😀')), undefined);
    for (const [bytes, at] of [
      [[0x61, 0xff], 1],
      [[0x61, 0xc0, 0xaf], 1], // overlong "/"
      [[0xed, 0xa0, 0x80], 0], // a UTF-16 surrogate
      [[0xf4, 0x90, 0x80, 0x80], 0], // above U+10FFFF
      [[0x61, 0x62, 0xe2, 0x82], 2], // truncated at the end
    ] as const) {
      assert.equal(firstInvalidUtf8(Uint8Array.from(bytes)), at, `bytes ${bytes.join(',')}`);
    }
    const bytes = Buffer.concat([Buffer.from('a: 1\nb: "x'), Buffer.from([0xfe]), Buffer.from('"\n')]);
    assert.throws(
      () => decodeUtf8(bytes, 'mesh.yaml'),
      (err: Error & { describe?: () => string }) =>
        /^mesh\.yaml line 2: invalid UTF-8: byte 0xfe at column 6 \(byte offset 10\)/.test(
          err.describe?.() ?? '',
        ),
    );
    assert.equal(
      decodeUtf8(Buffer.from('\uFEFFa: 1\n'), 'mesh.yaml'),
      'a: 1\n',
      'a byte-order mark is dropped',
    );
  });
});
