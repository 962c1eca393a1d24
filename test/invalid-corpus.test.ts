/**
 * The invalid corpus: each file holds one mistake, and reading it must reject exactly the broken
 * document with an error that names the file, the document and the field, while every valid
 * document beside it is still returned.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import type { ErrorCode } from '../src/core/errors.js';
import { PACKAGE_ROOT } from '../src/core/paths.js';
import { readYamlDocuments, type ReadYamlResult } from '../src/schema/yaml-reader.js';

const INVALID = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'corpus', 'invalid');

function read(file: string): ReadYamlResult {
  return readYamlDocuments(readFileSync(path.join(INVALID, file), 'utf8'), {
    file,
    defaultNamespace: 'default',
  });
}

interface Rejection {
  readonly code: ErrorCode;
  readonly doc: number;
  /** The field path the error must name; undefined for syntax errors, which name a line instead. */
  readonly field: string | undefined;
  /** Text the reason must contain. */
  readonly mentions: RegExp;
}

/** What each file must yield: its errors (in order) and the names of the resources still served. */
const EXPECTATIONS: Readonly<Record<string, { errors: Rejection[]; served: string[]; warnings?: number }>> = {
  'bad-duration.yaml': {
    errors: [
      {
        code: 'SCHEMA',
        doc: 0,
        field: 'spec.trafficPolicy.connectionPool.tcp.connectTimeout',
        mentions: /"soon" is not a valid duration/,
      },
    ],
    served: [],
  },
  'invalid-name.yaml': {
    errors: [
      { code: 'METADATA', doc: 0, field: 'metadata.name', mentions: /"Bad_Gateway\/x" is not a DNS-1123/ },
    ],
    served: [],
  },
  'missing-name.yaml': {
    errors: [{ code: 'METADATA', doc: 0, field: 'metadata.name', mentions: /required/ }],
    served: [],
  },
  'not-yaml.yaml': {
    errors: [
      {
        code: 'YAML_SYNTAX',
        doc: 0,
        field: undefined,
        mentions: /invalid YAML: Flow sequence .* end with a \]/,
      },
      { code: 'YAML_SYNTAX', doc: 0, field: undefined, mentions: /invalid YAML: Flow map .* end with a \}/ },
    ],
    served: [],
  },
  'one-bad-among-good.yaml': {
    errors: [
      { code: 'SCHEMA', doc: 1, field: 'spec.hosts', mentions: /expected a list, got a string/ },
      { code: 'SCHEMA', doc: 1, field: 'spec.ports', mentions: /expected a list, got a string \("eighty"\)/ },
    ],
    served: ['good-one', 'good-two'],
  },
  'unknown-enum.yaml': {
    errors: [{ code: 'SCHEMA', doc: 0, field: 'spec.mtls.mode', mentions: /unknown value "UNKNOWN_MODE"/ }],
    served: [],
  },
  'unknown-kind.yaml': { errors: [], served: [], warnings: 1 },
  'wrong-type.yaml': {
    errors: [
      { code: 'SCHEMA', doc: 0, field: 'spec.hosts[0]', mentions: /expected a string, got an object/ },
    ],
    served: [],
  },
};

describe('the invalid corpus', () => {
  test('has an expectation for every file, so a new file cannot slip through untested', () => {
    assert.deepEqual(readdirSync(INVALID).sort(), Object.keys(EXPECTATIONS).sort());
  });

  for (const [file, expected] of Object.entries(EXPECTATIONS)) {
    test(`${file} is rejected with errors naming the file, document and field`, () => {
      const result = read(file);
      assert.equal(
        result.errors.length,
        expected.errors.length,
        result.errors.map((e) => e.describe()).join('\n'),
      );
      expected.errors.forEach((want, i) => {
        const got = result.errors[i];
        assert.ok(got);
        assert.equal(got.code, want.code);
        assert.equal(got.location.file, file);
        assert.equal(got.location.doc, want.doc);
        assert.equal(got.location.field, want.field);
        assert.ok(typeof got.location.line === 'number' && got.location.line >= 1, 'a line is named');
        assert.match(got.reason, want.mentions);
        const described = got.describe();
        assert.ok(described.startsWith(`${file} doc ${want.doc} line `), described);
        if (want.field !== undefined) assert.ok(described.includes(`field ${want.field}: `), described);
      });
      assert.deepEqual(
        result.resources.map((r) => r.name),
        expected.served,
      );
      if (expected.warnings !== undefined) assert.equal(result.warnings.length, expected.warnings);
    });
  }

  test('unknown-kind.yaml: a ConfigMap is skipped with an UNKNOWN_KIND warning, never an error', () => {
    const result = read('unknown-kind.yaml');
    assert.deepEqual(result.errors, []);
    assert.equal(result.warnings[0]?.code, 'UNKNOWN_KIND');
    assert.match(
      result.warnings[0]?.describe() ?? '',
      /^unknown-kind\.yaml doc 0 line 2 field kind: skipped ConfigMap/,
    );
  });

  test('one-bad-among-good.yaml: the valid documents around the broken one are served with their origin', () => {
    const result = read('one-bad-among-good.yaml');
    assert.deepEqual(
      result.resources.map((r) => [r.kind, r.namespace, r.name, r.origin.doc]),
      [
        ['networking.istio.io/ServiceEntry', 'shop', 'good-one', 0],
        ['networking.istio.io/ServiceEntry', 'shop', 'good-two', 2],
      ],
    );
  });

  test('not-yaml.yaml: the syntax error points at a line inside the broken document', () => {
    const [first] = read('not-yaml.yaml').errors;
    assert.ok(first?.location.line !== undefined && first.location.line >= 4 && first.location.line <= 6);
  });
});
