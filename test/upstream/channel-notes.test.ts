import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import { ChannelNotes, type GoodRead } from '../../src/upstream/streaming/channel-notes.js';
import { fakeResource } from '../support/resources.js';

/** A good read of `shop/<name>` carrying the given notes. */
function read(
  name: string,
  notes: { envelope?: number[]; body?: string[]; warnings?: string[] } = {},
): GoodRead {
  return {
    ok: true,
    name: `shop/${name}`,
    resource: fakeResource(name, { kind: 'networking.istio.io/ServiceEntry', namespace: 'shop' }),
    unknownEnvelopeFields: notes.envelope ?? [],
    unknownBodyFields: notes.body ?? [],
    warnings: (notes.warnings ?? []).map((m) => new MeshmuxError('METADATA', m)),
  };
}

const messages = (notes: ChannelNotes): string[] => notes.warnings.map((w) => w.message);

describe('ChannelNotes', () => {
  it('counts the objects held with pruned envelope fields and names every field number any of them carries', () => {
    const notes = new ChannelNotes('xds://upstream:15010 t');
    notes.note('shop/a', read('a', { envelope: [100] }));
    notes.note('shop/b', read('b', { envelope: [100, 7] }));
    notes.note('shop/c', read('c'));
    assert.deepEqual(messages(notes), [
      '2 objects carried fields istio.mcp.v1alpha1.Resource does not define (7, 100); the envelope is rebuilt without them',
    ]);
    notes.note('shop/b', read('b', { envelope: [100] }));
    assert.match(messages(notes)[0] ?? '', /^2 objects .* \(100\);/);
    notes.drop('shop/a');
    notes.note('shop/b', read('b'));
    assert.deepEqual(messages(notes), []);
    assert.ok(notes.empty);
  });

  it('hands out the same warnings while a change leaves them as they were', () => {
    const notes = new ChannelNotes('xds://upstream:15010 t');
    for (const n of ['a', 'b', 'c']) notes.note(`shop/${n}`, read(n, { envelope: [100] }));
    const before = notes.warnings;
    // Another version of an object with the same field, and a plain object coming and going.
    notes.note('shop/b', read('b', { envelope: [100] }));
    notes.note('shop/d', read('d'));
    notes.drop('shop/d');
    assert.equal(notes.warnings, before);
    notes.drop('shop/c');
    assert.notEqual(notes.warnings, before);
    assert.match(messages(notes)[0] ?? '', /^2 objects/);
  });

  it("lists the objects' own warnings and names at most twenty objects with unknown body fields, counting all", () => {
    const notes = new ChannelNotes('xds://upstream:15010 t');
    for (let i = 0; i < 25; i++) notes.note(`shop/s${i}`, read(`s${i}`, { body: ['#111'] }));
    notes.note('shop/Up', read('Up', { warnings: ['"Up" is upper case'] }));
    const [own, body] = messages(notes);
    assert.equal(own, '"Up" is upper case');
    assert.match(body ?? '', /^25 objects carry body fields their message does not define, kept as sent: /);
    assert.equal((body ?? '').split('; ').length, 20);
    notes.note('shop/Up', read('Up'));
    assert.equal(messages(notes).length, 1);
  });

  it("takes a kept object's notes from the state it was kept from, and copies apart", () => {
    const state = new ChannelNotes('xds://upstream:15010 t');
    state.note('shop/a', read('a', { envelope: [100], body: ['#111'] }));
    const copy = state.copy();
    copy.drop('shop/a');
    assert.equal(messages(state).length, 2, 'the copy changed alone');
    const next = new ChannelNotes('xds://upstream:15010 t');
    next.adopt('shop/a', state);
    assert.deepEqual(messages(next), messages(state));
  });
});
