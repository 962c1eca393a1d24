import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { McpResourceReader } from '../../src/upstream/mcp-resource-reader.js';
import { ReadCache } from '../../src/upstream/read-cache.js';
import { encodeMcpResource, kindNamed } from '../support/fake-objects.js';

const SE = kindNamed('ServiceEntry');
const VS = kindNamed('VirtualService');
const CREATED = { createTime: { seconds: 1_700_000_000, nanos: 0 } };

describe('ReadCache', () => {
  it('keeps entries by kind and name, each kind its own names', () => {
    const cache = new ReadCache<string>(100, (v) => v.length);
    cache.set('se', 'shop/a', 'se-a');
    cache.set('vs', 'shop/a', 'vs-a');
    assert.equal(cache.get('se', 'shop/a'), 'se-a');
    assert.equal(cache.get('vs', 'shop/a'), 'vs-a');
    assert.equal(cache.get('dr', 'shop/a'), undefined);
    assert.equal(cache.size, 2);
    assert.deepEqual(
      ['se', 'vs', 'dr'].map((k) => cache.holds(k)),
      [true, true, false],
    );
    cache.deleteIf('vs', 'shop/a', 'vs-a');
    assert.equal(cache.holds('vs'), false, 'a kind whose last entry went');
  });

  it('drops the oldest entries, of other kinds first, once the sizes pass the bound', () => {
    const cache = new ReadCache<string>(12, (v) => v.length);
    cache.set('se', 'a', 'aaaa');
    cache.set('se', 'b', 'bbbb');
    cache.set('vs', 'v1', 'vvvv');
    // Setting a name again makes it the newest of its kind.
    cache.set('se', 'a', 'AAAA');
    cache.set('se', 'c', 'cccc');
    assert.equal(cache.get('vs', 'v1'), undefined, 'the other kind went first');
    assert.deepEqual(
      ['a', 'b', 'c'].map((n) => cache.get('se', n)),
      ['AAAA', 'bbbb', 'cccc'],
    );
    cache.set('se', 'd', 'dddd');
    assert.equal(cache.get('se', 'b'), undefined, 'then the oldest of the kind');
    assert.deepEqual(
      ['a', 'c', 'd'].map((n) => cache.get('se', n)),
      ['AAAA', 'cccc', 'dddd'],
    );
    // A value larger than the bound is not kept, and takes the older one of its name with it.
    cache.set('se', 'a', 'x'.repeat(13));
    assert.equal(cache.get('se', 'a'), undefined);
    assert.equal(cache.size, 2);
    // Its kind's only entry so taken, the kind is not held any more.
    cache.set('dr', 'x', 'dr-x');
    cache.set('dr', 'x', 'y'.repeat(13));
    assert.equal(cache.holds('dr'), false);
  });

  it('forgets an entry only when it still holds the value named', () => {
    const cache = new ReadCache<string>(100, (v) => v.length);
    cache.set('se', 'a', 'old');
    cache.set('se', 'a', 'new');
    assert.equal(cache.deleteIf('se', 'a', 'old'), false);
    assert.equal(cache.get('se', 'a'), 'new');
    assert.equal(cache.deleteIf('se', 'a', 'new'), true);
    assert.equal(cache.size, 0);
    // The freed bytes count again: two entries of 60 fit a bound of 100 after one of 60 went.
    const bound = new ReadCache<string>(100, (v) => v.length);
    bound.set('se', 'a', 'a'.repeat(60));
    bound.deleteIf('se', 'a', 'a'.repeat(60));
    bound.set('se', 'b', 'b'.repeat(60));
    assert.equal(bound.get('se', 'b')?.length, 60);
  });
});

describe('McpResourceReader with its cache', () => {
  it('tells two kinds apart under one name, and knows a name sent without its namespace', () => {
    const r = new McpResourceReader({ defaultNamespace: 'default', origin: 'xds://upstream:15010' });
    const se = encodeMcpResource(
      SE,
      { namespace: 'shop', name: 'pay', spec: { hosts: ['pay.example.com'] } },
      CREATED,
    );
    const vs = encodeMcpResource(
      VS,
      { namespace: 'shop', name: 'pay', spec: { hosts: ['pay.example.com'] } },
      CREATED,
    );
    const first = r.read(SE, se, 'test');
    const other = r.read(VS, vs, 'test');
    assert.ok(first.ok && other.ok);
    assert.equal(r.read(SE, Buffer.from(se), 'test'), first);
    assert.equal(r.read(VS, Buffer.from(vs), 'test'), other);
    // `/pay` is served as `default/pay`, and found again under the name it was sent as.
    const bare = encodeMcpResource(
      SE,
      { namespace: '', name: 'pay', spec: { hosts: ['x.example.com'] } },
      CREATED,
    );
    const read = r.read(SE, bare, 'test');
    assert.ok(read.ok && read.name === 'default/pay');
    assert.equal(r.read(SE, Buffer.from(bare), 'test'), read);
    r.forget(read);
    assert.notEqual(r.read(SE, Buffer.from(bare), 'test'), read, 'forgotten under that name');
  });

  it('decodes again what its byte bound let go, and keeps the newest', () => {
    const envelopes = Array.from({ length: 20 }, (_, i) =>
      encodeMcpResource(
        SE,
        { namespace: 'shop', name: `svc-${i}`, spec: { hosts: [`svc-${i}.example.com`] } },
        CREATED,
      ),
    );
    // Room for about five objects (each counts its envelope and 256 bytes).
    const bound = 5 * ((envelopes[0]?.byteLength ?? 0) + 256) + 10;
    const r = new McpResourceReader({ defaultNamespace: 'default', origin: 'xds://u', cacheBytes: bound });
    const results = envelopes.map((e) => r.read(SE, e, 'test'));
    const again = envelopes.map((e) => r.read(SE, Buffer.from(e), 'test'));
    const kept = again.filter((x, i) => x === results[i]).length;
    // Each object read again pushes out one that is about to be read: none is found.
    assert.equal(kept, 0);
    const last = envelopes.slice(-5).map((e) => r.read(SE, Buffer.from(e), 'test'));
    assert.deepEqual(
      last.map((x, i) => x === again[15 + i]),
      [true, true, true, true, true],
      'the newest five are kept',
    );
  });
});
