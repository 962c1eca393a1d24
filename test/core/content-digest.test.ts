import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { linesDigest, shortDigest } from '../../src/core/content-digest.js';

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
