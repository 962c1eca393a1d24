import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseDocument } from 'yaml';
import { yamlToJson, type YamlJsonResult } from '../../src/schema/yaml-to-json.js';

function convert(text: string): YamlJsonResult {
  const doc = parseDocument(text, { schema: 'failsafe', uniqueKeys: false });
  assert.deepEqual(doc.errors, []);
  return yamlToJson(doc.contents, doc);
}

function value(text: string): unknown {
  const r = convert(text);
  assert.deepEqual(r.errors, []);
  return r.value;
}

describe('yamlToJson (as sigs.k8s.io/yaml reads YAML for Istio and kubectl)', () => {
  test('resolves YAML 1.1 booleans, so unquoted yes/no/on/off are booleans while quoted ones stay strings', () => {
    assert.deepEqual(value('[yes, No, ON, off, y, N, true, False, "yes", \'on\']'), [
      true,
      false,
      true,
      false,
      true,
      false,
      true,
      false,
      'yes',
      'on',
    ]);
  });

  test('resolves YAML 1.1 integers: octal, hex, binary, underscores and signs', () => {
    assert.deepEqual(
      value('[0755, 0o17, 0x1F, 0b101, 1_000, +12, -7, 08, 0]'),
      [493, 15, 31, 5, 1000, 12, -7, 8, 0],
    );
  });

  test('resolves floats, and keeps what Go cannot parse as text', () => {
    assert.deepEqual(value('[1.5, .5, 1e3, -2.5E-1, 1., 1e400, 1:30, .e1]'), [
      1.5,
      0.5,
      1000,
      -0.25,
      1,
      '1e400',
      '1:30',
      '.e1',
    ]);
  });

  test('keeps timestamps, version-like and other words as strings', () => {
    assert.deepEqual(value('[2024-05-01T12:00:00Z, 2024-05-01, 1.2.3, v1, Yes please, nan, Infinity]'), [
      '2024-05-01T12:00:00Z',
      '2024-05-01',
      '1.2.3',
      'v1',
      'Yes please',
      'nan',
      'Infinity',
    ]);
  });

  test('reads ~, null and empty values as null', () => {
    assert.deepEqual(value('{a: ~, b: null, c: NULL, d:}'), { a: null, b: null, c: null, d: null });
  });

  test('writes non-string keys as strings: numbers in decimal, booleans as true/false', () => {
    assert.deepEqual(value('{80: a, on: b, 0x10: c, 1.5: d, 1e6: e, n: f}'), {
      '80': 'a',
      true: 'b',
      false: 'f',
      '16': 'c',
      '1.5': 'd',
      '1e+06': 'e',
    });
  });

  test('honours explicit tags and reports values that do not fit them', () => {
    assert.deepEqual(value('[!!str 80, !!int "80", !!float 1, !!bool "yes", !custom hi]'), [
      '80',
      80,
      1,
      true,
      'hi',
    ]);
    const r = convert('a: !!int abc');
    assert.deepEqual(r.errors, [{ path: 'a', reason: 'cannot read "abc" as !!int' }]);
  });

  test('reads block and quoted scalars as strings', () => {
    assert.deepEqual(value('a: |\n  80\nb: >-\n  yes\nc: "0755"'), { a: '80\n', b: 'yes', c: '0755' });
  });

  test('resolves anchors, aliases and << merges; later keys win, as in go-yaml v2', () => {
    const text = [
      'base: &base {a: 1, b: 2}',
      'merged: {<<: *base, b: 3}',
      'before: {b: 0, <<: *base}',
      'list: {<<: [{p: 1}, {p: 2, q: 2}]}',
      'alias: *base',
    ].join('\n');
    assert.deepEqual(value(text), {
      base: { a: 1, b: 2 },
      merged: { a: 1, b: 3 },
      before: { b: 2, a: 1 },
      list: { p: 1, q: 2 },
      alias: { a: 1, b: 2 },
    });
  });

  test('warns about duplicate keys and keeps the last value', () => {
    const r = convert('a: 1\na: 2');
    assert.deepEqual(r.value, { a: 2 });
    assert.deepEqual(r.warnings, [{ path: 'a', reason: 'duplicate key "a"; the last one wins' }]);
  });

  test('rejects what JSON cannot hold: NaN, infinities and null keys', () => {
    assert.deepEqual(convert('a: .nan').errors, [{ path: 'a', reason: 'NaN cannot be represented in JSON' }]);
    assert.deepEqual(convert('a: [-.inf]').errors, [
      { path: 'a[0]', reason: '-Infinity cannot be represented in JSON' },
    ]);
    assert.deepEqual(convert('~: 1').errors, [{ path: '', reason: 'a map key is null' }]);
  });

  test('stops alias bombs instead of expanding them', () => {
    const lines = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 9; i++) {
      const prev = String.fromCharCode(96 + i);
      const cur = String.fromCharCode(97 + i);
      lines.push(`${cur}: &${cur} [${Array(10).fill(`*${prev}`).join(', ')}]`);
    }
    const r = convert(lines.join('\n'));
    assert.equal(r.value, undefined);
    assert.match(r.errors[0]?.reason ?? '', /alias expansion limit/);
  });

  test('keeps keys such as __proto__ as data', () => {
    const v = value('__proto__: {polluted: yes}') as Record<string, unknown>;
    assert.deepEqual(Object.keys(v), ['__proto__']);
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
  });
});
