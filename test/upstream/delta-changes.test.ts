/**
 * An `xds` source over delta ADS applies each response after the first as a change of the state it
 * holds: a few objects changed among many cost those objects, and what a response says is applied
 * in the order it says it. Against a scripted upstream on 127.0.0.1.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigResource } from '../../src/core/resource.js';
import { SubscriptionState } from '../../src/upstream/streaming/subscription-state.js';
import { countCalls, type CallCount } from '../support/call-count.js';
import { fakeServiceEntry, kindNamed, type FakeObject } from '../support/fake-objects.js';
import { mcpAny } from '../support/faulty-responses.js';
import { foldSourceEvents } from '../support/folded-source-state.js';
import {
  deltaResponse,
  ScriptedDeltaUpstream,
  subscribedDeltaSource,
} from '../support/scripted-delta-upstream.js';
import type { SourceEventRecorder } from '../support/source-event-recorder.js';

const SE = 'networking.istio.io/ServiceEntry';
const SE_V1 = 'networking.istio.io/v1/ServiceEntry';
const SE_KIND = kindNamed('ServiceEntry');
/**
 * A delta response; a resource given as a name alone is one the upstream does not have. The
 * objects named in `higress` carry Higress's envelope field 100.
 */
function response(
  resources: ReadonlyArray<FakeObject | string>,
  nonce: string,
  removed: readonly string[] = [],
  higress: readonly string[] = [],
): Uint8Array {
  const entries = resources.map((r) =>
    typeof r === 'string'
      ? { name: r }
      : {
          name: `${r.namespace}/${r.name}`,
          any: mcpAny(SE_KIND, r, { extra100: higress.includes(r.name) }),
        },
  );
  return deltaResponse(SE_V1, entries, nonce, removed);
}

async function started(): Promise<{ upstream: ScriptedDeltaUpstream; recorder: SourceEventRecorder }> {
  const upstream = await ScriptedDeltaUpstream.start();
  return { upstream, recorder: await subscribedDeltaSource(upstream, 'central') };
}

const served = (recorder: SourceEventRecorder): Map<string, ConfigResource> =>
  foldSourceEvents(recorder.events).get(SE) ?? new Map<string, ConfigResource>();

describe('a delta xds source applying changes', () => {
  it('applies a change of a few objects to the state it holds, not to a copy of every object', async () => {
    const { upstream, recorder } = await started();
    const objects = Array.from({ length: 300 }, (_, i) =>
      fakeServiceEntry(`svc-${i}`, `svc-${i}.example.com`),
    );
    let whole: CallCount | undefined;
    try {
      upstream.send(response(objects, 'first'));
      await recorder.status('synced');
      const first = served(recorder);
      assert.equal(first.size, 300);
      whole = countCalls(SubscriptionState.prototype, 'apply');
      const from = recorder.count;
      upstream.send(
        response(
          [fakeServiceEntry('svc-7', 'moved.example.com'), fakeServiceEntry('svc-new', 'new.example.com')],
          'change',
          ['payments/svc-9'],
        ),
      );
      await recorder.snapshot(from);
      assert.equal(whole?.calls, 0, 'no state built anew');
      const now = served(recorder);
      assert.equal(now.size, 300);
      assert.ok(!now.has('payments/svc-9') && now.has('payments/svc-new'));
      assert.notEqual(now.get('payments/svc-7'), first.get('payments/svc-7'));
      assert.ok(
        [...now].every(
          ([key, r]) => ['payments/svc-7', 'payments/svc-new'].includes(key) || r === first.get(key),
        ),
        'every other object is the instance served before',
      );
      await upstream.waitFor(() => upstream.requests.some((r) => r.nonce === 'change'), 5_000, 'the ACK');
      assert.equal(upstream.requests.find((r) => r.nonce === 'change')?.errorDetail, null);
    } finally {
      whole?.restore();
      recorder.close();
      upstream.stop();
    }
  });

  it('goes on applying changes to the state it holds after one it had to apply whole', async () => {
    const { upstream, recorder } = await started();
    let whole: CallCount | undefined;
    try {
      upstream.send(
        response([fakeServiceEntry('a', 'a.example.com'), fakeServiceEntry('b', 'b.example.com')], 'first'),
      );
      await recorder.status('synced');
      whole = countCalls(SubscriptionState.prototype, 'apply');
      let from = recorder.count;
      // A name sent and then reported missing: what stands depends on the order, applied whole.
      upstream.send(response([fakeServiceEntry('c', 'c.example.com'), 'payments/c'], 'ordered'));
      await upstream.waitFor(() => upstream.requests.some((r) => r.nonce === 'ordered'), 5_000, 'the ACK');
      assert.equal(whole?.calls, 1);
      from = recorder.count;
      upstream.send(response([fakeServiceEntry('a', 'a2.example.com')], 'plain'));
      await recorder.snapshot(from);
      assert.equal(whole?.calls, 1, 'the next change applied to the state as it stands');
      assert.deepEqual([...served(recorder).keys()].sort(), ['payments/a', 'payments/b']);
    } finally {
      whole?.restore();
      recorder.close();
      upstream.stop();
    }
  });

  it('keeps the warning about pruned envelope fields counting the objects held, through changes applied in place or whole', async () => {
    const { upstream, recorder } = await started();
    let whole: CallCount | undefined;
    const pruned = (): string | undefined =>
      [...recorder.events]
        .reverse()
        .find((e) => e.type === 'snapshot')
        ?.warnings.map((w) => /^(\d+) objects carried fields .* \((.*)\)/.exec(w.message))
        .find((m) => m !== null)
        ?.slice(1, 3)
        .join(' ');
    try {
      const objects = ['a', 'b', 'c', 'd', 'e'].map((n) => fakeServiceEntry(n, `${n}.example.com`));
      upstream.send(response(objects, 'first', [], ['a', 'b', 'c']));
      await recorder.status('synced');
      assert.equal(pruned(), '3 100');
      whole = countCalls(SubscriptionState.prototype, 'apply');
      let from = recorder.count;
      // `a` comes back without the field, `d` with it, `b` goes, `f` comes with it.
      upstream.send(
        response(
          ['a', 'd', 'f'].map((n) => fakeServiceEntry(n, `${n}2.example.com`)),
          'change',
          ['payments/b'],
          ['d', 'f'],
        ),
      );
      await recorder.snapshot(from);
      assert.equal(whole.calls, 0, 'applied in place');
      assert.equal(pruned(), '3 100', 'c, d and f');
      // Applied whole (a name sent, then reported missing): the count is still of the objects held.
      from = recorder.count;
      upstream.send(
        response(
          [fakeServiceEntry('g', 'g.example.com'), fakeServiceEntry('h', 'h.example.com'), 'payments/h'],
          'ordered',
          [],
          ['g', 'h'],
        ),
      );
      await recorder.snapshot(from);
      assert.equal(whole.calls, 1);
      assert.equal(pruned(), '4 100', 'c, d, f and g');
      from = recorder.count;
      upstream.send(response([], 'emptied', ['payments/c', 'payments/d', 'payments/f', 'payments/g']));
      await recorder.snapshot(from);
      assert.equal(whole.calls, 1);
      assert.equal(pruned(), undefined, 'no object carries the field any more');
    } finally {
      whole?.restore();
      recorder.close();
      upstream.stop();
    }
  });

  it('applies what a response says in its order: removed first, then each resource as listed', async () => {
    const { upstream, recorder } = await started();
    try {
      upstream.send(
        response([fakeServiceEntry('a', 'a.example.com'), fakeServiceEntry('b', 'b.example.com')], 'first'),
      );
      await recorder.status('synced');
      const from = recorder.count;
      // `b` removed, then sent again: held, as sent. `c` sent, then named as missing: gone.
      upstream.send(
        response(
          [fakeServiceEntry('b', 'b2.example.com'), fakeServiceEntry('c', 'c.example.com'), 'payments/c'],
          'change',
          ['payments/b'],
        ),
      );
      await recorder.snapshot(from);
      const now = served(recorder);
      assert.deepEqual([...now.keys()].sort(), ['payments/a', 'payments/b']);
      assert.ok(Buffer.from(now.get('payments/b')?.body ?? []).includes('b2.example.com'));
    } finally {
      recorder.close();
      upstream.stop();
    }
  });
});
