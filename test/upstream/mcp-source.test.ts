import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceEvent, SourceStatusEvent } from '../../src/core/source-event.js';
import { McpResourceReader } from '../../src/upstream/mcp-resource-reader.js';
import { McpSinkSource } from '../../src/upstream/mcp/mcp-sink-source.js';
import { SubscriptionState } from '../../src/upstream/streaming/subscription-state.js';
import { McpSource } from '../../src/upstream/mcp/mcp-source.js';
import type { McpSourceOptions } from '../../src/upstream/mcp/mcp-source-options.js';
import { countCalls, type CallCount } from '../support/call-count.js';
import { FakeGalley } from '../support/fake-galley.js';
import type { FakeObject } from '../support/fake-objects.js';
import { GalleySinkPusher } from '../support/galley-sink-pusher.js';
import { SourceEventRecorder } from '../support/source-event-recorder.js';
import { within } from '../support/deadline.js';

const VS_COLLECTION = 'istio/networking/v1alpha3/virtualservices';
const SE_COLLECTION = 'istio/networking/v1alpha3/serviceentries';
const VS = 'networking.istio.io/VirtualService';
const SE = 'networking.istio.io/ServiceEntry';

function vs(name: string, host = name): FakeObject {
  return { namespace: 'shop', name, spec: { hosts: [host], http: [{ route: [{ destination: { host } }] }] } };
}

function se(name: string): FakeObject {
  return { namespace: 'payments', name, spec: { hosts: [`${name}.example`], resolution: 'DNS' } };
}

function galleySource(address: string, extra: Partial<McpSourceOptions> = {}): McpSource {
  return new McpSource({
    name: 'galley',
    namespace: 'default',
    address,
    kinds: ['VirtualService', 'ServiceEntry'],
    reconnect: { initialDelay: 50, maxDelay: 400 },
    ...extra,
  });
}

/** The objects of `kind` the last snapshot that carries it served, by `namespace/name`. */
function servedOf(events: readonly SourceEvent[], kind: string): Map<string, ConfigResource> {
  let out = new Map<string, ConfigResource>();
  for (const e of events) {
    if (e.type === 'snapshot' && (e.kinds?.has(kind) ?? true)) {
      out = new Map(
        [...e.resources].filter((r) => r.kind === kind).map((r) => [`${r.namespace}/${r.name}`, r]),
      );
    }
  }
  return out;
}

function names(events: readonly SourceEvent[], kind: string): string[] {
  let out: string[] = [];
  for (const e of events) {
    if (e.type === 'snapshot' && (e.kinds?.has(kind) ?? true)) {
      out = [...e.resources].filter((r) => r.kind === kind).map((r) => `${r.namespace}/${r.name}`);
    }
  }
  return out.sort();
}

describe('mcp source against a legacy Galley', () => {
  it('asks for each configured collection once, with the sink node and no initial versions, and ACKs by nonce', async () => {
    const galley = await FakeGalley.start({ collections: [VS_COLLECTION, SE_COLLECTION] });
    galley.set('VirtualService', [vs('reviews')]).set('ServiceEntry', [se('cards')]);
    const recorder = new SourceEventRecorder(
      galleySource(galley.address, { sinkNode: { id: 'meshmux', annotations: { team: 'mesh' } } }).events$,
    );
    try {
      await recorder.status('synced');
      assert.deepEqual(names(recorder.events, VS), ['shop/reviews']);
      assert.deepEqual(names(recorder.events, SE), ['payments/cards']);
      const initial = galley.requests.filter((r) => r.nonce === '');
      assert.deepEqual(initial.map((r) => r.collection).sort(), [SE_COLLECTION, VS_COLLECTION]);
      assert.ok(
        initial.every((r) => r.sinkNode?.id === 'meshmux' && r.sinkNode.annotations?.['team'] === 'mesh'),
      );
      assert.ok(initial.every((r) => !r.incremental && Object.keys(r.initialVersions).length === 0));
      await galley.waitFor(
        () => galley.requests.filter((r) => r.nonce !== '').length === 2,
        5_000,
        'two ACKs',
      );
      assert.deepEqual(
        galley.requests.filter((r) => r.nonce !== '').map((r) => [r.nonce, r.errorDetail]),
        [
          ['1', null],
          ['2', null],
        ],
      );
    } finally {
      recorder.close();
      await galley.stop();
    }
  });

  it('replaces a collection with each full state', async () => {
    const galley = await FakeGalley.start({ collections: [VS_COLLECTION, SE_COLLECTION] });
    galley.set('VirtualService', [vs('reviews'), vs('ratings')]);
    const recorder = new SourceEventRecorder(galleySource(galley.address).events$);
    try {
      await recorder.status('synced');
      const from = recorder.count;
      galley.set('VirtualService', [vs('ratings'), vs('details')]).push();
      await recorder.snapshot(from);
      assert.deepEqual(names(recorder.events, VS), ['shop/details', 'shop/ratings']);
    } finally {
      recorder.close();
      await galley.stop();
    }
  });

  it('reads only the objects a full state changed, and keeps the instances of the others', async () => {
    const galley = await FakeGalley.start({ collections: [VS_COLLECTION, SE_COLLECTION] });
    const many = Array.from({ length: 300 }, (_, i) => vs(`route-${String(i).padStart(3, '0')}`));
    galley.set('VirtualService', many);
    const recorder = new SourceEventRecorder(galleySource(galley.address).events$);
    let reads: CallCount | undefined;
    try {
      await recorder.status('synced');
      const first = servedOf(recorder.events, VS);
      reads = countCalls(McpResourceReader.prototype, 'read');
      // One object changed, one removed, one added, the rest sent again in their order.
      const next = [...many];
      next[10] = vs('route-010', 'elsewhere');
      next.splice(200, 1);
      next.push(vs('route-new'));
      const from = recorder.count;
      galley.set('VirtualService', next).push();
      await recorder.snapshot(from);
      assert.equal(reads?.calls, 2, 'the changed object and the new one');
      const now = servedOf(recorder.events, VS);
      assert.deepEqual([...now.keys()].sort(), next.map((o) => `shop/${o.name}`).sort());
      assert.notEqual(now.get('shop/route-010'), first.get('shop/route-010'));
      assert.ok(
        [...now].every(
          ([key, r]) => key === 'shop/route-010' || key === 'shop/route-new' || r === first.get(key),
        ),
        'every other object is the instance served before',
      );
      // The same objects in another order: found through the reader's memory, nothing changes.
      const acked = (): number =>
        galley.requests.filter(
          (r) => r.collection === VS_COLLECTION && r.nonce !== '' && r.errorDetail === null,
        ).length;
      await galley.waitFor(() => acked() === 2, 5_000, 'the ACK of the changed state');
      galley.set('VirtualService', [...next].reverse()).push();
      await galley.waitFor(() => acked() === 3, 5_000, 'the ACK of the reordered state');
      assert.deepEqual(servedOf(recorder.events, VS), now);
    } finally {
      reads?.restore();
      recorder.close();
      await galley.stop();
    }
  });

  it('judges a full state whole after one that was not applied whole', async () => {
    const galley = await FakeGalley.start({ collections: [VS_COLLECTION, SE_COLLECTION] });
    galley.set('VirtualService', [
      vs('reviews'),
      vs('ratings'),
      { ...vs('broken'), rawBody: Uint8Array.of(0xff) },
    ]);
    const recorder = new SourceEventRecorder(galleySource(galley.address).events$);
    try {
      await recorder.status('synced');
      assert.deepEqual(names(recorder.events, VS), ['shop/ratings', 'shop/reviews']);
      const from = recorder.count;
      galley.set('VirtualService', [vs('reviews'), vs('ratings', 'moved'), vs('broken')]).push();
      await recorder.snapshot(from);
      assert.deepEqual(names(recorder.events, VS), ['shop/broken', 'shop/ratings', 'shop/reviews']);
      const ratings = servedOf(recorder.events, VS).get('shop/ratings');
      assert.ok(ratings !== undefined && Buffer.from(ratings.body).includes('moved'));
    } finally {
      recorder.close();
      await galley.stop();
    }
  });

  it('applies an incremental answer to the state it holds, not to a copy of every object', async () => {
    const galley = await FakeGalley.start({ collections: [VS_COLLECTION, SE_COLLECTION] });
    const many = Array.from({ length: 200 }, (_, i) => vs(`route-${i}`));
    galley.set('VirtualService', many);
    const recorder = new SourceEventRecorder(galleySource(galley.address, { incremental: true }).events$);
    let whole: CallCount | undefined;
    try {
      await recorder.status('synced');
      const first = servedOf(recorder.events, VS);
      whole = countCalls(SubscriptionState.prototype, 'apply');
      const from = recorder.count;
      galley
        .set('VirtualService', [...many.slice(1, 150), vs('route-150', 'moved'), ...many.slice(151)])
        .push();
      await recorder.snapshot(from);
      assert.equal(whole?.calls, 0, 'no state built anew');
      const now = servedOf(recorder.events, VS);
      assert.equal(now.size, 199);
      assert.ok(!now.has('shop/route-0'));
      assert.notEqual(now.get('shop/route-150'), first.get('shop/route-150'));
      assert.equal(now.get('shop/route-151'), first.get('shop/route-151'));
    } finally {
      whole?.restore();
      recorder.close();
      await galley.stop();
    }
  });

  it('applies incremental updates and removals, and takes the first answer after a reconnect as the whole state', async () => {
    const galley = await FakeGalley.start({ collections: [VS_COLLECTION, SE_COLLECTION] });
    galley.set('VirtualService', [vs('reviews'), vs('ratings')]);
    const recorder = new SourceEventRecorder(galleySource(galley.address, { incremental: true }).events$);
    try {
      await recorder.status('synced');
      assert.ok(galley.requests.filter((r) => r.nonce === '').every((r) => r.incremental));
      const before = [...(recorder.lastSnapshot()?.resources ?? [])].find(
        (r) => r.name === 'reviews',
      )?.version;
      let from = recorder.count;
      galley.set('VirtualService', [vs('reviews', 'reviews-v2'), vs('details')]).push();
      await recorder.snapshot(from);
      assert.deepEqual(names(recorder.events, VS), ['shop/details', 'shop/reviews']);
      const after = [...(recorder.lastSnapshot()?.resources ?? [])].find(
        (r) => r.name === 'reviews',
      )?.version;
      assert.ok(
        before !== undefined && after !== undefined && before !== after,
        'the updated object has a new version',
      );
      // While meshmux is away the Galley loses `details`; its first answer on the new stream is full.
      from = recorder.count;
      galley.set('VirtualService', [vs('reviews', 'reviews-v2')]);
      galley.disconnectAll();
      await recorder.status('stale', from);
      await recorder.status('synced', from);
      assert.deepEqual(names(recorder.events, VS), ['shop/reviews']);
    } finally {
      recorder.close();
      await galley.stop();
    }
  });

  it('drops an undecodable object, keeps its previous version, applies the rest and NACKs naming it', async () => {
    const galley = await FakeGalley.start({ collections: [VS_COLLECTION, SE_COLLECTION] });
    galley.set('VirtualService', [vs('reviews'), vs('ratings')]);
    const recorder = new SourceEventRecorder(galleySource(galley.address).events$);
    try {
      await recorder.status('synced');
      const before = [...(recorder.lastSnapshot()?.resources ?? [])].find((r) => r.name === 'ratings');
      const from = recorder.count;
      galley
        .set('VirtualService', [vs('details'), { ...vs('ratings'), rawBody: Uint8Array.of(0x12, 0x30) }])
        .push();
      const snapshot = await recorder.snapshot(from);
      assert.deepEqual(names(recorder.events, VS), ['shop/details', 'shop/ratings']);
      assert.equal([...snapshot.resources].find((r) => r.name === 'ratings')?.version, before?.version);
      await galley.waitFor(() => galley.requests.some((r) => r.errorDetail !== null), 5_000, 'a NACK');
      const nack = galley.requests.find((r) => r.errorDetail !== null);
      assert.equal(nack?.collection, VS_COLLECTION);
      assert.equal(nack?.errorDetail?.code, 3);
      assert.match(nack?.errorDetail?.message ?? '', /shop\/ratings/);
    } finally {
      recorder.close();
      await galley.stop();
    }
  });

  it('asks only for configured collections: a Galley closes the whole stream on one it does not serve', async () => {
    const galley = await FakeGalley.start({ collections: [VS_COLLECTION] });
    galley.set('VirtualService', [vs('reviews')]);
    const configured = new SourceEventRecorder(
      galleySource(galley.address, { kinds: ['VirtualService'] }).events$,
    );
    const everything = new SourceEventRecorder(galleySource(galley.address, { kinds: undefined }).events$);
    try {
      await configured.status('synced');
      const failing = await everything.status('failing');
      assert.match(failing.error?.message ?? '', /INVALID_ARGUMENT: unsupported collection/);
      assert.deepEqual(names(configured.events, VS), ['shop/reviews']);
    } finally {
      configured.close();
      everything.close();
      await galley.stop();
    }
  });

  it('survives garbage bytes: nothing changes, the error is reported, later updates still apply', async () => {
    const galley = await FakeGalley.start({ collections: [VS_COLLECTION, SE_COLLECTION] });
    galley.set('VirtualService', [vs('reviews')]);
    const recorder = new SourceEventRecorder(galleySource(galley.address).events$);
    try {
      await recorder.status('synced');
      const from = recorder.count;
      galley.sendRaw(Uint8Array.of(0x12, 0x7f, 0x01));
      const status = (await recorder.next(
        (e) => e.type === 'status' && e.error !== undefined,
        from,
      )) as SourceStatusEvent;
      assert.equal(status.error?.code, 'DECODE');
      galley.set('VirtualService', [vs('reviews'), vs('later')]).push();
      await recorder.snapshot(from);
      assert.deepEqual(names(recorder.events, VS), ['shop/later', 'shop/reviews']);
    } finally {
      recorder.close();
      await galley.stop();
    }
  });
});

describe('mcp-sink source', () => {
  it('refuses a Galley’s trigger as unimplemented, asks for each collection, and serves what it pushes', async () => {
    let onPort: (port: number) => void = () => undefined;
    const listening = new Promise<number>((resolve) => (onPort = resolve));
    const sink = new McpSinkSource({
      name: 'pushed',
      namespace: 'default',
      listen: '127.0.0.1:0',
      kinds: ['VirtualService', 'ServiceEntry'],
      onListening: (p) => onPort(p),
    });
    const recorder = new SourceEventRecorder(sink.events$);
    const port = await within(listening, 10_000, 'the mcp-sink source to listen');
    const galley = new GalleySinkPusher(`127.0.0.1:${port}`, { collections: [VS_COLLECTION, SE_COLLECTION] });
    galley
      .set('VirtualService', [vs('reviews')])
      .set('ServiceEntry', [se('cards')])
      .connect();
    try {
      await recorder.status('synced');
      assert.ok(galley.triggerRefused, 'the trigger was NACKed with UNIMPLEMENTED');
      assert.deepEqual(names(recorder.events, VS), ['shop/reviews']);
      assert.deepEqual(names(recorder.events, SE), ['payments/cards']);
      assert.deepEqual(
        galley.requests
          .filter((r) => r.nonce === '' && r.collection !== '')
          .map((r) => r.collection)
          .sort(),
        [SE_COLLECTION, VS_COLLECTION],
      );
      let from = recorder.count;
      galley.set('VirtualService', [vs('reviews'), vs('ratings')]).push();
      await recorder.snapshot(from);
      assert.deepEqual(names(recorder.events, VS), ['shop/ratings', 'shop/reviews']);
      from = recorder.count;
      galley.disconnect();
      await recorder.status('stale', from);
      assert.ok(!recorder.events.slice(from).some((e) => e.type === 'snapshot'), 'the last state stays');
      galley.connect();
      await recorder.status('synced', from);
      assert.deepEqual(names(recorder.events, VS), ['shop/ratings', 'shop/reviews']);
    } finally {
      galley.close();
      recorder.close();
    }
  });
});
