/**
 * Provenance on its own: the annotations naming an object's source and source version, objects
 * that keep their identity while unchanged, creation times meshmux stamped that stay while the
 * source holds the object (also when another replica's record gives them), and upstream times
 * that pass as given.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  makeResource,
  withProvenance,
  type ConfigResource,
  type Timestamp,
} from '../../src/core/resource.js';
import { Provenance, SOURCE_ANNOTATION, SOURCE_VERSION_ANNOTATION } from '../../src/merge/provenance.js';
import { stampedObject } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const KEY = 'shop/a';

/** `shop/a` as an upstream sent it, with its own creation time and, optionally, version. */
function upstream(seconds: number, nanos = 0, upstreamVersion?: string, body = 'a'): ConfigResource {
  return makeResource({
    kind: VS,
    namespace: 'shop',
    name: 'a',
    labels: {},
    annotations: {},
    createTime: { seconds, nanos },
    body: new TextEncoder().encode(body),
    origin: upstreamVersion === undefined ? {} : { upstreamVersion },
  });
}

/** A provenance and the objects served under it by key, kept as a ledger keeps its committed state. */
class Serving {
  readonly provenance = new Provenance('mesh');
  readonly served = new Map<string, ConfigResource>();

  annotate(r: ConfigResource): ConfigResource {
    const key = `${r.namespace}/${r.name}`;
    const out = this.provenance.annotate(r, key, this.served.get(key));
    this.served.set(key, out);
    return out;
  }

  adopt(time: Timestamp): ConfigResource | undefined {
    const out = this.provenance.adopt(VS, KEY, time, this.served.get(KEY));
    if (out !== undefined) this.served.set(KEY, out);
    return out;
  }

  withServedTime(r: ConfigResource): ConfigResource {
    return this.provenance.withServedTime(r, this.served.get(`${r.namespace}/${r.name}`));
  }

  /** The object is no longer served (the source dropped it). */
  forget(key: string): void {
    this.served.delete(key);
  }

  /** Nothing is served any more (the source expired). */
  clear(): void {
    this.served.clear();
  }
}

describe('Provenance', () => {
  it('names the source, and as source version the upstream’s version or else the content’s', () => {
    const p = new Serving();
    const plain = p.annotate(upstream(1));
    assert.equal(plain.annotations[SOURCE_ANNOTATION], 'mesh');
    assert.equal(plain.annotations[SOURCE_VERSION_ANNOTATION], upstream(1).version);
    const versioned = new Serving().annotate(upstream(1, 0, 'v42'));
    assert.equal(versioned.annotations[SOURCE_VERSION_ANNOTATION], 'v42');
  });

  it('versions an annotated object as anyone reading it does, without hashing it again', () => {
    const p = new Serving();
    const withOwn = makeResource({ ...upstream(1), annotations: { [SOURCE_VERSION_ANNOTATION]: 'mine' } });
    for (const r of [upstream(1), upstream(1, 0, 'v42'), withOwn]) {
      const out = p.annotate(r);
      // A meshmux one tier down, or a restart reading the record, derives the version from the fields.
      assert.equal(out.version, makeResource(out).version, JSON.stringify(out.annotations));
      assert.notEqual(out.version, r.version);
    }
  });

  it('passes an object that already names a source through unchanged', () => {
    const p = new Serving();
    const relayed = makeResource({ ...upstream(1), annotations: { [SOURCE_ANNOTATION]: 'far-away' } });
    assert.equal(p.annotate(relayed), relayed);
  });

  it('serves an object its reader annotated ahead as it would have annotated it, keeping the one served', () => {
    for (const r of [
      upstream(1),
      upstream(1, 0, 'v42'),
      makeResource({ ...upstream(1), annotations: { [SOURCE_VERSION_ANNOTATION]: 'mine' } }),
    ]) {
      const p = new Serving();
      const annotated = p.annotate(r);
      const ahead = withProvenance(r, 'mesh');
      assert.deepEqual(ahead, annotated, JSON.stringify(r.annotations));
      assert.equal(p.annotate(ahead), annotated, 'the object served is kept for an equal one');
      const fresh = new Serving();
      assert.equal(fresh.annotate(ahead), ahead, 'nothing served yet: the object is served as read');
      const changed = withProvenance(upstream(1, 0, undefined, 'changed'), 'mesh');
      assert.equal(fresh.annotate(changed), changed);
      assert.notEqual(changed.version, ahead.version);
    }
  });

  it('returns the same served object for the same instance and for an equal new one, and a new one for any change', () => {
    const p = new Serving();
    const first = p.annotate(upstream(1));
    assert.equal(p.annotate(upstream(1)), first, 'an equal object re-made keeps its identity');
    const otherNanos = p.annotate(upstream(1, 5));
    assert.notEqual(otherNanos, first, 'an upstream time differing in nanoseconds');
    assert.equal(otherNanos.createTime.nanos, 5);
    const otherSeconds = p.annotate(upstream(2, 5));
    assert.equal(otherSeconds.createTime.seconds, 2);
    const otherVersion = p.annotate(upstream(2, 5, 'v2'));
    assert.equal(otherVersion.annotations[SOURCE_VERSION_ANNOTATION], 'v2');
    const otherBody = p.annotate(upstream(2, 5, 'v2', 'changed'));
    assert.notEqual(otherBody.version, otherVersion.version);
    assert.equal(
      p.annotate(upstream(2, 5, 'v2', 'changed')),
      otherBody,
      'kept under its upstream version too',
    );
    // The upstream stops versioning the object: the content's version is its source version again.
    const unversioned = upstream(2, 5, undefined, 'changed');
    const back = p.annotate(unversioned);
    assert.notEqual(back, otherBody);
    assert.equal(back.annotations[SOURCE_VERSION_ANNOTATION], unversioned.version);
    assert.equal(p.annotate(upstream(2, 5, undefined, 'changed')), back);
    assert.notEqual(p.annotate(upstream(2, 5, undefined, 'other')).version, back.version, 'a new body');
  });

  it('keeps a stamped creation time while the object is held, and stamps anew after forget or clear', () => {
    const p = new Serving();
    assert.equal(p.annotate(stampedObject('a', 100)).createTime.seconds, 100);
    assert.equal(p.annotate(stampedObject('a', 200, true, 'changed')).createTime.seconds, 100);
    p.forget(KEY);
    assert.equal(p.annotate(stampedObject('a', 300)).createTime.seconds, 300);
    p.clear();
    assert.equal(p.annotate(stampedObject('a', 400)).createTime.seconds, 400);
  });

  it('adopts another replica’s time for a stamped object it holds, and only then', () => {
    const p = new Serving();
    assert.equal(p.adopt({ seconds: 50, nanos: 0 }), undefined, 'not held yet');
    p.provenance.clearShared();
    const input = stampedObject('a', 100);
    p.annotate(input);
    assert.equal(p.adopt({ seconds: 100, nanos: 0 }), undefined, 'the same time');
    const adopted = p.adopt({ seconds: 100, nanos: 7 });
    assert.equal(adopted?.createTime.nanos, 7);
    assert.equal(p.annotate(input), adopted, 'the same input is served under the adopted time');
    const fromUpstream = new Serving();
    fromUpstream.annotate(upstream(9));
    assert.equal(fromUpstream.adopt({ seconds: 1, nanos: 0 }), undefined, "an upstream's time");
  });

  it('gives an object read after the record arrived the recorded time, until the next record replaces it', () => {
    const p = new Serving();
    p.adopt({ seconds: 60, nanos: 0 });
    assert.equal(p.annotate(stampedObject('a', 100)).createTime.seconds, 60);
    p.forget(KEY);
    p.provenance.clearShared();
    assert.equal(p.annotate(stampedObject('a', 100)).createTime.seconds, 100);
  });

  it('hands back the object served for one that wrote a source version of its own, while it is the same', () => {
    const p = new Provenance('mesh');
    const own = (body: string, seconds = 1): ConfigResource =>
      makeResource({
        ...upstream(seconds, 0, undefined, body),
        annotations: { [SOURCE_VERSION_ANNOTATION]: 'mine' },
      });
    const first = p.annotate(own('a'), KEY, undefined);
    // Its own annotation gives way to the source's; its version was hashed with it, so the
    // annotated version is hashed whole too.
    assert.equal(first.annotations[SOURCE_VERSION_ANNOTATION], own('a').version);
    assert.equal(first.version, makeResource(first).version);
    assert.equal(p.annotate(own('a'), KEY, first), first, 'the same content again');
    const changed = p.annotate(own('b'), KEY, first);
    assert.notEqual(changed, first, 'another body');
    assert.notEqual(changed.version, first.version);
    const later = p.annotate(own('a', 2), KEY, first);
    assert.notEqual(later, first, 'another upstream time, the same content');
    assert.equal(later.version, first.version);
    assert.equal(later.createTime.seconds, 2);
  });

  it('takes back, and keeps the time of, only an object it annotated itself', () => {
    const p = new Provenance('mesh');
    const input = stampedObject('a', 100);
    const foreign = new Provenance('far').annotate(input, KEY, undefined);
    const out = p.annotate(input, KEY, foreign);
    assert.notEqual(out, foreign);
    assert.equal(out.annotations[SOURCE_ANNOTATION], 'mesh');
    const later = stampedObject('a', 200);
    assert.equal(p.annotate(later, KEY, foreign).createTime.seconds, 200, "another source's time");
    assert.equal(p.withServedTime(later, foreign), later);
    assert.equal(p.adopt(VS, KEY, { seconds: 5, nanos: 0 }, foreign), undefined);
    assert.equal(p.annotate(later, KEY, out).createTime.seconds, 100, 'its own time');
  });

  it('records an object under the time it is served with, and leaves other objects as they are', () => {
    const p = new Serving();
    p.annotate(stampedObject('a', 100));
    const reread = stampedObject('a', 200);
    assert.equal(p.withServedTime(reread).createTime.seconds, 100);
    const same = stampedObject('a', 100);
    assert.equal(p.withServedTime(same), same);
    const sameSecondsOtherNanos = makeResource({
      ...stampedObject('a', 100),
      createTime: { seconds: 100, nanos: 3 },
    });
    assert.equal(p.withServedTime(sameSecondsOtherNanos).createTime.nanos, 0);
    const given = upstream(5);
    assert.equal(p.withServedTime(given), given);
    assert.equal(p.withServedTime(stampedObject('never-held', 7)).createTime.seconds, 7);
  });
});
