/**
 * Every map keyed by object (the channel's and the ledger's states, the kind table) is keyed by
 * the object's own `key`: it must be `<namespace>/<name>` whichever way the object was built,
 * taking a key given only when it names the same object.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  makeResource,
  makeResourceFrom,
  nameKey,
  restoreResource,
  withProvenance,
  type ResourceFields,
} from '../../src/core/resource.js';

function fields(namespace: string, name: string, key?: string): ResourceFields {
  return {
    kind: 'networking.istio.io/ServiceEntry',
    namespace,
    name,
    ...(key === undefined ? {} : { key }),
    labels: {},
    annotations: {},
    createTime: { seconds: 1, nanos: 0 },
    body: new Uint8Array([10, 3, 97, 46, 98]),
    origin: {},
  };
}

describe('the key of a resource', () => {
  it('is <namespace>/<name> however the resource is built, a key given for another object not taken', () => {
    const segment = fc.string({ minLength: 0, maxLength: 12 });
    fc.assert(
      fc.property(
        segment,
        segment,
        fc.option(fc.string({ maxLength: 30 }), { nil: undefined }),
        (ns, name, given) => {
          const want = `${ns}/${name}`;
          const made = makeResource(fields(ns, name, given));
          assert.equal(made.key, want);
          assert.equal(restoreResource(fields(ns, name, given), 'v1').key, want);
          assert.equal(makeResourceFrom('src', fields(ns, name, given)).key, want);
          assert.equal(withProvenance(made, 'src').key, want);
          assert.equal(nameKey(ns, name, given), want);
        },
      ),
    );
  });

  it('follows a name changed in a copy of another resource', () => {
    const one = makeResource(fields('shop', 'a'));
    assert.equal(one.key, 'shop/a');
    assert.equal(restoreResource({ ...one, name: 'b' }, one.version).key, 'shop/b');
    assert.equal(makeResource({ ...one, namespace: 'shop2' }).key, 'shop2/a');
    // Names that run together differently: the same characters, another object.
    assert.equal(nameKey('a/b', 'c', 'a/b/c'), 'a/b/c');
    assert.equal(nameKey('a', 'b/c', 'a/b/c'), 'a/b/c');
    assert.equal(
      makeResource({ ...makeResource(fields('a/b', 'c')), namespace: 'a', name: 'b/c' }).key,
      'a/b/c',
    );
    assert.equal(nameKey('ab', 'c', 'a/bc'), 'ab/c');
  });
});
