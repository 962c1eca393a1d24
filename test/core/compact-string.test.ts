import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { compactString } from '../../src/core/compact-string.js';

describe('compactString', () => {
  it('always gives back the same text, whatever the text and however it was built', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'binary' }), { maxLength: 6 }), (parts) => {
        const built = parts.reduce((s, p) => `${s}|${p}`, '');
        assert.equal(compactString(built), parts.map((p) => `|${p}`).join(''));
      }),
      { numRuns: 500 },
    );
  });

  it('keeps text that is not in NFC as given: two spellings of é stay two keys', () => {
    const decomposed = `ns/${'e\u0301'}`;
    const composed = `ns/${'\u00e9'}`;
    assert.equal(compactString(decomposed), decomposed);
    assert.equal(compactString(composed), composed);
    assert.notEqual(compactString(decomposed), compactString(composed));
  });
});
