/**
 * Conformance with istio/api: every Istio document of the shared corpus, read and encoded by
 * meshmux, must decode to the same message as the body the official Go types produced, print the
 * same canonical JSON, and prune the same fields. The official bodies must also be fully described
 * by our schema, so a wrong field number or type in proto/ fails here.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { PACKAGE_ROOT } from '../src/core/paths.js';
import { relativePath } from '../src/schema/field-path.js';
import { KINDS } from '../src/schema/kinds.js';
import { toProtoJson } from '../src/schema/proto-json.js';
import { messageType } from '../src/schema/proto-root.js';
import { findUnknownFields } from '../src/schema/unknown-fields.js';
import { readYamlDocuments, type ReadYamlResult } from '../src/schema/yaml-reader.js';

const CORPUS = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'corpus');
const DEFAULT_NAMESPACE = 'corpus-default';

interface Expected {
  readonly file: string;
  readonly doc: number;
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string | null;
  readonly pruned: readonly string[];
  readonly body: string;
  readonly json: unknown;
}

const entries = JSON.parse(readFileSync(path.join(CORPUS, 'expected.json'), 'utf8')) as Expected[];

const results = new Map<string, ReadYamlResult>();
function read(file: string): ReadYamlResult {
  let result = results.get(file);
  if (result === undefined) {
    const text = readFileSync(path.join(CORPUS, 'istio', file), 'utf8');
    result = readYamlDocuments(text, { file, defaultNamespace: DEFAULT_NAMESPACE });
    results.set(file, result);
  }
  return result;
}

let identicalBytes = 0;
let passed = 0;

describe('the istio/api corpus', () => {
  test('has the 188 documents this suite was written for', () => {
    assert.equal(entries.length, 188);
  });

  for (const e of entries) {
    test(`${e.file} doc ${e.doc} (${e.kind} ${e.name}) encodes as istio/api encodes it`, () => {
      const result = read(e.file);
      const docErrors = result.errors.filter((err) => err.location.doc === e.doc);
      assert.deepEqual(
        docErrors.map((err) => err.describe()),
        [],
      );
      const resource = result.resources.find((r) => r.origin.doc === e.doc);
      assert.ok(resource, 'the document yields a resource');

      const kind = KINDS.fromApiVersion(e.apiVersion, e.kind);
      assert.ok(kind, `${e.apiVersion} ${e.kind} is a served kind`);
      assert.equal(resource.kind, kind.key);
      assert.equal(resource.name, e.name);
      assert.equal(resource.namespace, e.namespace ?? DEFAULT_NAMESPACE);

      const type = messageType(kind.bodyType);
      const official = Buffer.from(e.body, 'base64');
      assert.deepEqual(
        findUnknownFields(type, official),
        [],
        'the official body is fully described by proto/',
      );
      assert.deepEqual(findUnknownFields(type, resource.body), [], 'our body is fully described by proto/');

      const officialJson = toProtoJson(type, type.decode(official));
      const ourJson = toProtoJson(type, type.decode(resource.body));
      assert.deepEqual(ourJson, officialJson, 'our body decodes to the same message as the official one');
      assert.deepEqual(officialJson, e.json, 'the official body prints as the expected canonical JSON');
      assert.deepEqual(ourJson, e.json, 'our body prints as the expected canonical JSON');

      const pruned = result.warnings
        .filter((w) => w.location.doc === e.doc && w.code === 'SCHEMA' && w.location.field !== undefined)
        .map((w) => relativePath(w.location.field ?? '', 'spec'));
      assert.deepEqual(pruned.sort(), [...e.pruned].sort(), 'the same unknown fields are pruned');

      if (Buffer.compare(official, Buffer.from(resource.body)) === 0) identicalBytes++;
      passed++;
    });
  }

  test('yields no errors and no resources beyond the expected ones in any corpus file', () => {
    const byFile = new Map<string, Set<number>>();
    for (const e of entries) byFile.set(e.file, (byFile.get(e.file) ?? new Set()).add(e.doc));
    for (const [file, docs] of byFile) {
      const result = read(file);
      assert.deepEqual(
        result.errors.map((err) => err.describe()),
        [],
        file,
      );
      assert.deepEqual(
        result.resources.map((r) => r.origin.doc).sort((a, b) => (a ?? 0) - (b ?? 0)),
        [...docs].sort((a, b) => a - b),
        file,
      );
    }
  });

  test('ran every document through to the end', (t) => {
    t.diagnostic(`${passed}/${entries.length} corpus documents conform; ${identicalBytes} byte-identical`);
    // A document test that returned early (or was skipped) would leave this short.
    assert.equal(passed, entries.length);
    assert.ok(identicalBytes <= passed);
  });
});
