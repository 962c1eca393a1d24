import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ByteBoundedMap } from '../../src/core/byte-bounded-map.js';

const lengthOf = (v: string): number => v.length;

describe('ByteBoundedMap', () => {
  it('lets the oldest entries go once the sizes pass the bound, a key set again being the newest', () => {
    const map = new ByteBoundedMap<string, string>(12, lengthOf);
    map.set('a', 'aaaa');
    map.set('b', 'bbbb');
    map.set('c', 'cccc');
    map.set('a', 'AAAA');
    map.set('d', 'dddd');
    assert.equal(map.get('b'), undefined, 'b was the oldest');
    assert.deepEqual(
      ['a', 'c', 'd'].map((k) => map.get(k)),
      ['AAAA', 'cccc', 'dddd'],
    );
    assert.equal(map.size, 3);
  });

  it('keeps no value larger than the bound, and counts what was deleted as free', () => {
    const map = new ByteBoundedMap<string, string>(10, lengthOf);
    map.set('a', 'aaaaaa');
    map.set('a', 'x'.repeat(11));
    assert.equal(map.get('a'), undefined, 'too large, and the older value of the key went with it');
    map.set('b', 'bbbbbb');
    map.delete('b');
    map.set('c', 'cccccc');
    map.delete('nothing');
    map.set('d', 'dddd');
    assert.deepEqual([map.get('c'), map.get('d')], ['cccccc', 'dddd'], 'both fit once b was deleted');
  });
});
