import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { makeResource, type ConfigResource } from '../../../src/core/resource.js';
import { revisionOf, sequenceRevision } from '../../../src/upstream/runtime/source-revision.js';
import { fakeResource } from '../../support/resources.js';

/** `r` under a version of the caller's choosing, as hand-built objects may carry. */
function versioned(r: ConfigResource, version: string): ConfigResource {
  return { ...r, version };
}

describe('the revision of a set of objects', () => {
  const a = fakeResource('a');
  const b = fakeResource('b');
  const c = fakeResource('c', { namespace: 'shop' });

  it('is the same in any order, and 16 base64url characters', () => {
    const revision = revisionOf([a, b, c]);
    assert.equal(revisionOf([c, a, b]), revision);
    assert.equal(revisionOf([b, c, a]), revision);
    assert.match(revision, /^[A-Za-z0-9_-]{16}$/);
  });

  it('moves with any object added, removed or changed', () => {
    const seen = new Set([
      revisionOf([]),
      revisionOf([a]),
      revisionOf([a, b]),
      revisionOf([a, b, c]),
      revisionOf([a, fakeResource('b', { body: 'other' }), c]),
      revisionOf([a, fakeResource('b', { labels: { zone: 'east' } }), c]),
      revisionOf([a, b, fakeResource('c', { namespace: 'other' })]),
    ]);
    assert.equal(seen.size, 7);
  });

  it('tells objects apart by name where their versions are not content versions', () => {
    // Hand-built objects with one version for all: the line of each names it.
    const x = versioned(a, 'v1');
    const y = versioned(b, 'v1');
    assert.notEqual(revisionOf([x]), revisionOf([y]));
    assert.notEqual(revisionOf([x, y]), revisionOf([x]));
    assert.equal(revisionOf([y, x]), revisionOf([x, y]));
  });

  it('counts an object present twice apart from once', () => {
    assert.notEqual(revisionOf([a, a]), revisionOf([a]));
  });

  it('is the same for objects built again with the same content', () => {
    const again = makeResource({
      kind: a.kind,
      namespace: a.namespace,
      name: a.name,
      labels: {},
      annotations: {},
      createTime: { seconds: 5, nanos: 0 },
      body: new Uint8Array(a.body),
      origin: { file: 'elsewhere.yaml' },
    });
    assert.equal(again.version, a.version);
    assert.equal(revisionOf([again, b]), revisionOf([a, b]));
  });

  it('in sequence, moves with the order of the objects too', () => {
    assert.notEqual(sequenceRevision([a, b]), sequenceRevision([b, a]));
    assert.equal(sequenceRevision([a, b]), sequenceRevision([a, b]));
    assert.notEqual(sequenceRevision([a, b]), sequenceRevision([a, fakeResource('b', { body: 'other' })]));
  });
});
