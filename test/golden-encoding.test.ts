/**
 * Golden bytes: for every document of the istio/api corpus, the body meshmux encodes from the
 * YAML is compared with the body the official istio/api Go types encoded (test/fixtures/corpus,
 * `expected.json`). The comparison does not use our .proto files: a schema-free wire walker reads
 * both, so a dropped field, a wrong field number or a wrong wire type in our schema shows here even
 * when encoding and decoding with that same schema would round-trip.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { PACKAGE_ROOT } from '../src/core/paths.js';
import { CONFIG_KINDS, KINDS } from '../src/schema/kinds.js';
import { readYamlDocuments, type ReadYamlResult } from '../src/schema/yaml-reader.js';
import { renderFields, walkMessage } from './support/wire-walker.js';

const CORPUS = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'corpus');

interface Expected {
  readonly file: string;
  readonly doc: number;
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly body: string;
}

/** Kinds meshmux serves that the corpus has no document of (so no golden bytes). */
const NOT_IN_CORPUS = ['extensions.istio.io/TrafficExtension'];

const entries = JSON.parse(readFileSync(path.join(CORPUS, 'expected.json'), 'utf8')) as Expected[];
const results = new Map<string, ReadYamlResult>();
function ours(e: Expected): Uint8Array {
  let result = results.get(e.file);
  if (result === undefined) {
    const text = readFileSync(path.join(CORPUS, 'istio', e.file), 'utf8');
    result = readYamlDocuments(text, { file: e.file, defaultNamespace: 'golden' });
    results.set(e.file, result);
  }
  const resource = result.resources.find((r) => r.origin.doc === e.doc);
  assert.ok(resource, `${e.file} doc ${e.doc} yields a resource`);
  return resource.body;
}

const identicalByKind = new Map<string, number>();
const mapOrderOnly: string[] = [];

describe('golden encodings from istio/api', () => {
  for (const e of entries) {
    test(`${e.file} doc ${e.doc}: our ${e.kind} ${e.name} has the official bytes`, () => {
      const official = Buffer.from(e.body, 'base64');
      const mine = Buffer.from(ours(e));
      const officialFields = walkMessage(official);
      assert.ok(officialFields, 'the official body is a well-formed message');
      const key = KINDS.fromApiVersion(e.apiVersion, e.kind)?.key ?? e.kind;
      if (Buffer.compare(mine, official) === 0) {
        identicalByKind.set(key, (identicalByKind.get(key) ?? 0) + 1);
        return;
      }
      // Not identical: the only freedom protobuf leaves an encoder is the order of map entries.
      const mineFields = walkMessage(mine);
      assert.ok(mineFields, 'our body is a well-formed message');
      assert.deepEqual(
        renderFields(mineFields, { sortMapEntries: true }),
        renderFields(officialFields, { sortMapEntries: true }),
        'same field numbers, wire types and values as the official body',
      );
      assert.equal(mine.length, official.length);
      mapOrderOnly.push(`${e.file} doc ${e.doc}`);
    });
  }

  test('has a byte-identical golden body for every kind meshmux serves, except those the corpus lacks', () => {
    const uncovered = CONFIG_KINDS.map((k) => k.key).filter((k) => !identicalByKind.has(k));
    assert.deepEqual(uncovered.sort(), [...NOT_IN_CORPUS].sort());
  });

  test('differs from the official bytes only in the order of map entries, in the known documents', (t) => {
    t.diagnostic(
      `byte-identical: ${[...identicalByKind.values()].reduce((a, b) => a + b, 0)}/${entries.length}; ` +
        `map order only: ${mapOrderOnly.join(', ')}`,
    );
    // google.protobuf.Struct fields (EnvoyFilter patches, WasmPlugin pluginConfig) are maps.
    assert.ok(
      mapOrderOnly.length <= 4,
      `more documents than the 4 with Struct maps differ: ${mapOrderOnly.join(', ')}`,
    );
  });
});

describe('the wire walker', () => {
  test('reads field numbers, wire types and nested messages without a schema', () => {
    // field 1 varint 150; field 2 bytes that are no message; field 3 message { field 1 varint 1 };
    // field 4 fixed32.
    const bytes = Uint8Array.of(
      0x08,
      0x96,
      0x01,
      0x12,
      0x02,
      0x0f,
      0x0f,
      0x1a,
      0x02,
      0x08,
      0x01,
      0x25,
      1,
      2,
      3,
      4,
    );
    assert.deepEqual(renderFields(walkMessage(bytes) ?? [], { sortMapEntries: false }), [
      '1:0 150',
      '2:2 0f0f',
      '3:2 {',
      '  1:0 1',
      '}',
      '4:5 01020304',
    ]);
  });

  test('refuses truncated input and group wire types', () => {
    assert.equal(walkMessage(Uint8Array.of(0x12, 0x05, 0x68)), undefined);
    assert.equal(walkMessage(Uint8Array.of(0x0b)), undefined);
  });

  test('sorts map entries only when asked, so a swapped field order still fails', () => {
    const a = Uint8Array.of(0x0a, 0x03, 0x0a, 0x01, 0x62, 0x0a, 0x03, 0x0a, 0x01, 0x61);
    const b = Uint8Array.of(0x0a, 0x03, 0x0a, 0x01, 0x61, 0x0a, 0x03, 0x0a, 0x01, 0x62);
    const render = (x: Uint8Array, sortMapEntries: boolean): string[] =>
      renderFields(walkMessage(x) ?? [], { sortMapEntries });
    assert.deepEqual(render(a, true), render(b, true));
    assert.notDeepEqual(render(a, false), render(b, false));
    // Two different fields are never reordered.
    const swapped = Uint8Array.of(0x10, 0x01, 0x08, 0x02);
    assert.notDeepEqual(render(swapped, true), render(Uint8Array.of(0x08, 0x02, 0x10, 0x01), true));
  });
});
