import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ContentDigest, linesDigest, shortDigest } from '../../src/core/content-digest.js';
import { makeResource, restoreResource, type ConfigResource } from '../../src/core/resource.js';

// Served versions and source revisions are built from these digests, so their values are pinned:
// a change here would make every istiod see every object as changed after an upgrade.
describe('short digests', () => {
  test('a short digest is the base64url SHA-256 of the bytes, cut to the length asked for', () => {
    assert.equal(shortDigest('', 16), '47DEQpj8HBSa-_TI');
    assert.equal(shortDigest(new Uint8Array(0), 10), '47DEQpj8HB');
  });

  test('a lines digest ends every line with a newline and keeps the order given', () => {
    assert.equal(linesDigest(['a', 'b']), 'kRFp3arxRq_1OfWM');
    assert.equal(linesDigest(['a', 'b']), shortDigest('a\nb\n', 16));
    assert.notEqual(linesDigest(['b', 'a']), linesDigest(['a', 'b']));
  });
});

describe('the content digest of a set of objects', () => {
  const object = (name: string, seconds: number, nanos = 0): ConfigResource =>
    makeResource({
      kind: 'networking.istio.io/ServiceEntry',
      namespace: 'ns',
      name,
      labels: {},
      annotations: {},
      createTime: { seconds, nanos },
      body: new Uint8Array([name.length]),
      origin: {},
    });
  const digestOf = (objects: readonly ConfigResource[]): string => {
    const d = new ContentDigest();
    for (const r of objects) d.add(r);
    return d.version();
  };

  test('does not depend on the order objects were added or removed in', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 20 }),
        fc.nat(),
        (names, seed) => {
          const objects = names.map((n, i) => object(n, 1_700_000_000 + (i % 3)));
          const shuffled = [...objects].sort(
            (a, b) => ((a.name.length * 31 + seed) % 7) - ((b.name.length * 31 + seed) % 7),
          );
          assert.equal(digestOf(shuffled), digestOf(objects));
          const d = new ContentDigest();
          for (const r of objects) d.add(r);
          const extra = object('extra-object', 5);
          d.add(extra);
          d.remove(extra);
          assert.equal(d.version(), digestOf(objects));
        },
      ),
      { numRuns: 200 },
    );
  });

  test('changes with any creation time, also when two objects swap theirs', () => {
    const a = object('a', 100);
    const b = object('b', 200);
    const swapped = [object('a', 200), object('b', 100)];
    assert.notEqual(digestOf(swapped), digestOf([a, b]));
    assert.notEqual(digestOf([object('a', 100, 1), b]), digestOf([a, b]));
    assert.notEqual(digestOf([object('a', -100), b]), digestOf([a, b]));
    assert.notEqual(digestOf([object('a', 100 + 2 ** 32), b]), digestOf([a, b]));
  });

  test('gives 20k objects created at the same time 20k different digests', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i++) seen.add(digestOf([object(`se-${i}`, 1_700_000_000)]));
    assert.equal(seen.size, 20_000);
  });

  test('reads a content version as the name it stands for: its digest is that of its version and time', () => {
    // Two objects under one content version can only be the same object: the version hashes its name.
    const one = object('one', 7);
    const twin = restoreResource({ ...one, name: 'other' }, one.version);
    assert.equal(digestOf([twin]), digestOf([one]));
    // A version of any other shape is hashed with the name.
    const hand = restoreResource({ ...one }, 'v1');
    assert.notEqual(digestOf([restoreResource({ ...one, name: 'other' }, 'v1')]), digestOf([hand]));
  });

  test('without creation times, digests the same objects created at other times alike, and nothing else', () => {
    const byName = (objects: readonly ConfigResource[]): string => {
      const d = new ContentDigest(false);
      for (const r of objects) d.add(r);
      return d.version();
    };
    const built = [object('a', 100), object('b', 200)];
    const elsewhere = [object('b', 900), object('a', 5, 7)];
    assert.equal(byName(elsewhere), byName(built));
    assert.notEqual(
      digestOf(elsewhere),
      digestOf(built),
      'the digest of what clients receive tells them apart',
    );
    assert.notEqual(byName([object('a', 100), object('c', 200)]), byName(built));
    assert.notEqual(byName([object('a', 100)]), byName(built));
    // A version of any other shape: by name and version, whatever the time.
    const hand = restoreResource({ ...object('a', 1) }, 'v1');
    assert.equal(byName([restoreResource({ ...object('a', 2) }, 'v1')]), byName([hand]));
    assert.notEqual(byName([restoreResource({ ...object('a', 1) }, 'v2')]), byName([hand]));
    const d = new ContentDigest(false);
    d.add(hand);
    assert.equal(d.clone().version(), byName([hand]), 'a copy digests as its original');
  });
});
