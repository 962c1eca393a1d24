import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { MeshmuxError } from '../../src/core/errors.js';
import { checkLabelValue, checkQualifiedName } from '../../src/schema/kubernetes-names.js';
import { checkTypedMeta, readObjectMeta } from '../../src/schema/object-meta.js';

interface Meta {
  readonly name: string;
  readonly namespace: string;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
}

/** What a check found, comparable: each problem's field and message, errors then warnings. */
function found(check: (errors: MeshmuxError[], warnings: MeshmuxError[]) => void): string[] {
  const errors: MeshmuxError[] = [];
  const warnings: MeshmuxError[] = [];
  check(errors, warnings);
  return [
    ...errors.map((e) => `error ${e.location.field ?? ''}: ${e.message}`),
    ...warnings.map((e) => `warning ${e.location.field ?? ''}: ${e.message}`),
  ];
}

const typed = (m: Meta): string[] => found((e, w) => checkTypedMeta(m, e, w));
const asFileReadsIt = (m: Meta): string[] => found((e, w) => readObjectMeta(m, m.namespace, e, w));

/** Strings that pass and strings that fail Kubernetes' name rules, and the odd ones between. */
const word = fc.oneof(
  fc.constantFrom('shop', 'reviews', 'a.b', 'Upper', 'UPPER.case', '-bad', 'bad-', '', 'x'.repeat(64)),
  fc.constantFrom('example.com/zone', 'app', 'a/b/c', '/x', 'istio.io/rev', '__proto__', 'ünï'),
  fc.string({ maxLength: 12 }),
);
const map = fc.dictionary(word, fc.oneof(word, fc.constant('v'.repeat(70))), { maxKeys: 4 });

/** `text` as a regular expression that matches it literally. */
function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('checkTypedMeta', () => {
  it('finds what readObjectMeta finds in the same metadata, field for field', () => {
    fc.assert(
      fc.property(word, word, map, map, (name, namespace, labels, annotations) => {
        const meta = { name, namespace, labels, annotations };
        assert.deepEqual(typed(meta), asFileReadsIt(meta));
      }),
      { numRuns: 2000, seed: 11 },
    );
  });

  it('judges each label by the rules however often its key passed or failed before', () => {
    fc.assert(
      fc.property(word, fc.oneof(word, fc.constant('v'.repeat(70))), (key, value) => {
        const expected = checkQualifiedName(key) ?? checkLabelValue(value);
        // Twice with the value, then with a good value and a bad one: what passed once is no pass.
        for (const v of [value, value, 'good', '-bad']) {
          const problems = typed({ name: 'shop', namespace: 'shop', labels: { [key]: v }, annotations: {} });
          const rule = v === value ? expected : (checkQualifiedName(key) ?? checkLabelValue(v));
          assert.equal(problems.length, rule === undefined ? 0 : 1, `${key}=${v}: ${problems.join('; ')}`);
          if (rule !== undefined) assert.match(problems[0] ?? '', new RegExp(`: ${escape(rule)}$`));
        }
      }),
      { numRuns: 1000, seed: 12 },
    );
  });

  it('bounds the annotations that pass at 256 KiB, as the API server does', () => {
    const big = 'v'.repeat(200 * 1024);
    const meta = {
      name: 'shop',
      namespace: 'shop',
      labels: {},
      annotations: { 'example.com/a': big, 'example.com/b': big, 'bad key!': big },
    };
    const problems = typed(meta);
    assert.equal(problems.length, 2, problems.join('\n'));
    assert.match(problems[0] ?? '', /^error metadata\.annotations\["bad key!"\]: /);
    assert.match(problems[1] ?? '', /^error metadata\.annotations: annotations total 409626 bytes/);
    assert.deepEqual(problems, asFileReadsIt(meta));
    assert.deepEqual(typed({ ...meta, annotations: { 'example.com/a': big, 'bad key!': big } }).length, 1);
  });

  it('accepts an upper-case name with a warning and refuses an empty one', () => {
    assert.deepEqual(typed({ name: 'Reviews', namespace: 'shop', labels: {}, annotations: {} }), [
      asFileReadsIt({ name: 'Reviews', namespace: 'shop', labels: {}, annotations: {} })[0],
    ]);
    assert.match(
      typed({ name: 'Reviews', namespace: 'shop', labels: {}, annotations: {} })[0] ?? '',
      /^warning/,
    );
    assert.deepEqual(typed({ name: '', namespace: 'shop', labels: {}, annotations: {} }), [
      'error metadata.name: metadata.name is required',
    ]);
  });
});
