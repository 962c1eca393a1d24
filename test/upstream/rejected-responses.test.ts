import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SourceEvent, SourceSnapshotEvent } from '../../src/core/source-event.js';
import { LARGE_BODY_BYTES } from '../../src/schema/body-parts.js';
import { McpSource } from '../../src/upstream/mcp/mcp-source.js';
import { XdsSource } from '../../src/upstream/xds/xds-source.js';
import type { XdsSourceOptions } from '../../src/upstream/xds/xds-source-options.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { FakeGalley } from '../support/fake-galley.js';
import { encodeBody, encodeMcpResource, kindNamed, type FakeObject } from '../support/fake-objects.js';
import {
  bareBodyAny,
  discoveryResponse,
  everyConfigTypeUrl,
  galleyResources,
  mcpAny,
  tornAny,
} from '../support/faulty-responses.js';
import {
  deltaResponse,
  ScriptedDeltaUpstream,
  subscribedDeltaSource,
} from '../support/scripted-delta-upstream.js';
import { SourceEventRecorder, syncedXdsSource } from '../support/source-event-recorder.js';
import { fakeDestinationRule, fakeServiceEntry, fakeVirtualService } from '../support/fake-objects.js';
import { foldSourceEvents, servedKeys } from '../support/folded-source-state.js';

const VS_V1 = 'networking.istio.io/v1/VirtualService';
const DR_V1 = 'networking.istio.io/v1/DestinationRule';
const VS = 'networking.istio.io/VirtualService';
const DR = 'networking.istio.io/DestinationRule';
const VS_KIND = kindNamed('VirtualService');
const DR_KIND = kindNamed('DestinationRule');

function snapshotsOf(events: readonly SourceEvent[], kind: string): SourceSnapshotEvent[] {
  return events.filter(
    (e): e is SourceSnapshotEvent => e.type === 'snapshot' && (e.kinds?.has(kind) ?? true),
  );
}

describe('an xds source refusing responses whose objects cannot all be named', () => {
  let fake: FakeAdsServer;
  let recorder: SourceEventRecorder;
  let markers = 0;

  before(async () => {
    fake = await FakeAdsServer.start({ peer: 'istiod' });
    fake
      .set('VirtualService', [fakeVirtualService('reviews'), fakeVirtualService('ratings')])
      .set('DestinationRule', [fakeDestinationRule('reviews')]);
    recorder = await syncedXdsSource(fake.address, ['VirtualService', 'DestinationRule']);
  });
  after(async () => {
    recorder.close();
    await fake.stop();
  });

  /** Sends a response and returns the request that answered its nonce. */
  async function answerTo(bytes: Uint8Array, nonce: string): Promise<(typeof fake.requests)[number]> {
    fake.sendRaw(bytes);
    await fake.waitFor(() => fake.requests.some((r) => r.nonce === nonce), 5_000, `the answer to ${nonce}`);
    const answer = fake.requests.find((r) => r.nonce === nonce);
    assert.ok(answer);
    return answer;
  }

  /** A change to DestinationRules that must arrive: once it has, everything sent before it was applied. */
  async function marker(): Promise<void> {
    const name = `marker-${++markers}`;
    const from = recorder.count;
    fake.set('DestinationRule', [fakeDestinationRule('reviews'), fakeDestinationRule(name)]);
    fake.push();
    await recorder.next((e) => e.type === 'snapshot' && [...e.resources].some((r) => r.name === name), from);
  }

  it('NACKs a response of bare bodies instead of MCP Resources and keeps every object it held', async () => {
    const from = recorder.count;
    const answer = await answerTo(
      discoveryResponse(VS_V1, [bareBodyAny(VS_KIND, fakeVirtualService('reviews'))], 'bare-bodies'),
      'bare-bodies',
    );
    assert.equal(answer.errorDetail?.code, 3);
    assert.match(
      answer.errorDetail?.message ?? '',
      /rejected the whole response and kept the previous state: 1 of 1 objects cannot be named.*resources\[0\] is a type\.googleapis\.com\/istio\.networking\.v1alpha3\.VirtualService, not an MCP Resource/,
    );
    await marker();
    assert.deepEqual(snapshotsOf(recorder.events.slice(from), VS), [], 'VirtualService untouched');
    assert.deepEqual(servedKeys(recorder.events, VS), ['shop/ratings', 'shop/reviews']);
  });

  it('NACKs a VirtualService response carrying DestinationRules (swapped type URLs) and keeps both kinds', async () => {
    const from = recorder.count;
    const answer = await answerTo(
      discoveryResponse(
        VS_V1,
        [mcpAny(DR_KIND, fakeDestinationRule('reviews')), mcpAny(DR_KIND, fakeDestinationRule('other'))],
        'swapped',
      ),
      'swapped',
    );
    assert.match(
      answer.errorDetail?.message ?? '',
      /2 of 2 objects cannot be named.*shop\/reviews: the body is istio\.networking\.v1alpha3\.DestinationRule, VirtualService needs/,
    );
    const swappedBack = await answerTo(
      discoveryResponse(DR_V1, [mcpAny(VS_KIND, fakeVirtualService('reviews'))], 'swapped-back'),
      'swapped-back',
    );
    assert.equal(swappedBack.errorDetail?.code, 3);
    await marker();
    assert.deepEqual(snapshotsOf(recorder.events.slice(from), VS), []);
    assert.deepEqual(servedKeys(recorder.events, VS), ['shop/ratings', 'shop/reviews']);
    assert.ok(servedKeys(recorder.events, DR).includes('shop/reviews'));
  });

  it('applies none of a response when one envelope among good ones does not decode', async () => {
    const from = recorder.count;
    const answer = await answerTo(
      discoveryResponse(
        VS_V1,
        [
          mcpAny(VS_KIND, fakeVirtualService('reviews')),
          { typeUrl: 'type.googleapis.com/istio.mcp.v1alpha1.Resource', value: Uint8Array.of(0x0a, 0xff) },
        ],
        'torn',
      ),
      'torn',
    );
    assert.match(answer.errorDetail?.message ?? '', /1 of 2 objects cannot be named/);
    assert.match(
      answer.errorDetail?.message ?? '',
      /resources\[1\]: an envelope of 2 bytes does not decode as an MCP Resource: /,
    );
    await marker();
    assert.deepEqual(snapshotsOf(recorder.events.slice(from), VS), [], 'ratings is not deleted');
    assert.deepEqual(servedKeys(recorder.events, VS), ['shop/ratings', 'shop/reviews']);
  });

  it('applies none of a response with an entry that is no Any among changed objects, NACKing it', async () => {
    const from = recorder.count;
    const answer = await answerTo(
      discoveryResponse(
        VS_V1,
        [
          mcpAny(VS_KIND, fakeVirtualService('reviews', 'reviews-v2')),
          tornAny(),
          mcpAny(VS_KIND, fakeVirtualService('ratings', 'ratings-v2')),
        ],
        'torn-any',
      ),
      'torn-any',
    );
    assert.equal(answer.errorDetail?.code, 3);
    assert.match(answer.errorDetail?.message ?? '', /wire type 0/);
    await marker();
    assert.deepEqual(snapshotsOf(recorder.events.slice(from), VS), [], 'neither change is applied');
    assert.deepEqual(servedKeys(recorder.events, VS), ['shop/ratings', 'shop/reviews']);
  });

  it('NACKs a response for a type URL it never subscribed', async () => {
    const answer = await answerTo(
      discoveryResponse('networking.istio.io/v1/Gateway', [], 'unasked'),
      'unasked',
    );
    assert.equal(answer.errorDetail?.code, 3);
    assert.match(answer.errorDetail?.message ?? '', /did not subscribe/);
  });

  it('NACKs an object named `NOT A VALID NAME!!` by name, never serves it, and applies the rest of its response', async () => {
    const before = foldSourceEvents(recorder.events).get(VS)?.get('shop/ratings');
    const from = recorder.count;
    fake.set('VirtualService', [
      fakeVirtualService('reviews'),
      fakeVirtualService('ratings'),
      fakeVirtualService('details'),
      fakeVirtualService('NOT A VALID NAME!!', 'x'),
    ]);
    fake.push();
    const snapshot = (await recorder.next(
      (e) => e.type === 'snapshot' && [...e.resources].some((r) => r.name === 'details'),
      from,
    )) as SourceSnapshotEvent;
    assert.deepEqual(servedKeys(recorder.events, VS), ['shop/details', 'shop/ratings', 'shop/reviews']);
    assert.equal(
      foldSourceEvents(recorder.events).get(VS)?.get('shop/ratings'),
      before,
      'unchanged objects stay as they were',
    );
    assert.match(
      snapshot.errors.map((e) => e.describe()).join('\n'),
      /field metadata\.name: VirtualService shop\/NOT A VALID NAME!!: .*is not a DNS-1123 subdomain/,
    );
    await fake.waitFor(
      () =>
        fake.requests.some(
          (r) => r.typeUrl === VS_V1 && /NOT A VALID NAME!!/.test(r.errorDetail?.message ?? ''),
        ),
      5_000,
      'a NACK naming the object',
    );
  });

  /**
   * Sends `objects`, where `name`'s new version is refused, and checks that the source keeps the
   * version of `name` it had, applies the rest (`details` among them) and names the reason.
   */
  async function keepsRefused(name: string, objects: readonly FakeObject[], reason: RegExp): Promise<void> {
    const good = foldSourceEvents(recorder.events).get(VS)?.get(`shop/${name}`);
    assert.ok(good !== undefined, `${name} is served to begin with`);
    const from = recorder.count;
    fake.set('VirtualService', [...objects]);
    fake.push();
    const snapshot = (await recorder.next(
      (e) => e.type === 'snapshot' && [...e.resources].some((r) => r.name === 'details'),
      from,
    )) as SourceSnapshotEvent;
    assert.equal(foldSourceEvents(recorder.events).get(VS)?.get(`shop/${name}`), good);
    assert.match(snapshot.errors.map((e) => e.message).join('\n'), reason);
  }

  it('keeps the previous version of an object whose body fails the checks a file object fails', async () => {
    const reviews = fakeVirtualService('reviews');
    await keepsRefused(
      'reviews',
      [
        { ...reviews, spec: { ...reviews.spec, http: [{ timeout: { seconds: 1, nanos: -5 } }] } },
        fakeVirtualService('ratings'),
        fakeVirtualService('details'),
      ],
      /shop\/reviews: spec: .*Duration/,
    );
  });

  it('keeps the previous version of an object whose body holds a string that is not UTF-8, as istiod would not read it', async () => {
    await keepsRefused(
      'reviews',
      [
        // hosts: ["\xff\xfe"]
        { ...fakeVirtualService('reviews'), rawBody: Uint8Array.from([0x0a, 0x02, 0xff, 0xfe]) },
        fakeVirtualService('ratings'),
        fakeVirtualService('details'),
      ],
      /shop\/reviews: the body does not decode as .*VirtualService: a string field at byte 2 is not valid UTF-8/,
    );
  });

  /** `name` with `count` routes: a body of well over the size read a route at a time. */
  function largeVirtualService(name: string, count: number): FakeObject & { spec: { http: object[] } } {
    const http = Array.from({ length: count }, (_, r) => ({
      name: `route-${r}`,
      match: [{ uri: { prefix: `/${name}/path-${r}` } }],
      route: [{ destination: { host: `${name}-${r % 5}.shop.svc.cluster.local` } }],
    }));
    return { namespace: 'shop', name, spec: { hosts: [name], http } };
  }

  it('reads a large VirtualService a route at a time: served whole, then one bad route refused by its index or its byte', async () => {
    const large = largeVirtualService('ratings', 2000);
    const body = encodeBody(VS_KIND, large.spec);
    assert.ok(body.length > LARGE_BODY_BYTES, `${body.length} bytes`);
    const from = recorder.count;
    fake.set('VirtualService', [fakeVirtualService('reviews'), large, fakeVirtualService('details')]);
    fake.push();
    await recorder.next(
      (e) =>
        e.type === 'snapshot' &&
        [...e.resources].some((r) => r.name === 'ratings' && r.body.length === body.length),
      from,
    );
    const served = foldSourceEvents(recorder.events).get(VS)?.get('shop/ratings')?.body;
    assert.ok(served !== undefined && Buffer.from(served).equals(body), 'served byte for byte');

    const twoAlternatives = structuredClone(large);
    (twoAlternatives.spec.http[1500] as { match: unknown }).match = [{ uri: { exact: '/a', prefix: '/b' } }];
    await keepsRefused(
      'ratings',
      [fakeVirtualService('reviews'), twoAlternatives, fakeVirtualService('details')],
      /shop\/ratings: spec\.http\[1500\]\.match\[0\]\.uri: only one of exact, prefix may be set/,
    );
    const notUtf8 = encodeBody(VS_KIND, large.spec);
    const at = Buffer.from(notUtf8).indexOf('route-1700');
    notUtf8.set([0xff, 0xfe], at);
    await keepsRefused(
      'ratings',
      [fakeVirtualService('reviews'), { ...large, rawBody: notUtf8 }, fakeVirtualService('details')],
      new RegExp(
        `shop/ratings: the body does not decode as .*VirtualService: a string field at byte ${at} is not valid UTF-8`,
      ),
    );
  });

  it('keeps the previous version of an object whose body only its schema checks refuse (two alternatives set)', async () => {
    const ratings = fakeVirtualService('ratings');
    const match = [{ uri: { exact: '/a', prefix: '/b' } }];
    await keepsRefused(
      'ratings',
      [
        fakeVirtualService('reviews'),
        {
          ...ratings,
          spec: { ...ratings.spec, http: [{ match, route: [{ destination: { host: 'ratings' } }] }] },
        },
        fakeVirtualService('details'),
      ],
      /shop\/ratings: spec\.http\[0\]\.match\[0\]\.uri: only one of exact, prefix may be set/,
    );
  });
});

describe('an xds source reading ServiceEntries, whose plain bodies it does not decode', () => {
  const SE = 'networking.istio.io/ServiceEntry';
  let fake: FakeAdsServer;
  let recorder: SourceEventRecorder;

  before(async () => {
    fake = await FakeAdsServer.start({ peer: 'istiod' });
    fake.set('ServiceEntry', [
      fakeServiceEntry('cart', 'cart.example'),
      fakeServiceEntry('pay', 'pay.example'),
    ]);
    recorder = await syncedXdsSource(fake.address, ['ServiceEntry']);
  });
  after(async () => {
    recorder.close();
    await fake.stop();
  });

  it('refuses one whose host is not UTF-8 and warns of one with an unknown field, serving the rest byte for byte', async () => {
    const kind = kindNamed('ServiceEntry');
    const good = fakeServiceEntry('cart', 'cart-v2.example');
    const bad = encodeBody(kind, fakeServiceEntry('pay', 'pay-v2.example').spec);
    const at = Buffer.from(bad).indexOf('pay-v2');
    bad.set([0xc3, 0x28], at);
    const extra = Uint8Array.from([
      ...encodeBody(kind, fakeServiceEntry('ship', 'ship.example').spec),
      0xf8,
      0x06,
      0x01,
    ]);
    const from = recorder.count;
    fake.set('ServiceEntry', [
      good,
      { ...fakeServiceEntry('pay', 'x'), rawBody: bad },
      { ...fakeServiceEntry('ship', 'x'), rawBody: extra },
    ]);
    fake.push();
    const snapshot = (await recorder.next(
      (e) => e.type === 'snapshot' && [...e.resources].some((r) => r.name === 'ship'),
      from,
    )) as SourceSnapshotEvent;
    const served = foldSourceEvents(recorder.events).get(SE);
    assert.ok(Buffer.from(served?.get('payments/cart')?.body ?? []).equals(encodeBody(kind, good.spec)));
    assert.ok(Buffer.from(served?.get('payments/ship')?.body ?? []).equals(extra));
    assert.ok(
      Buffer.from(served?.get('payments/pay')?.body ?? []).equals(
        encodeBody(kind, fakeServiceEntry('pay', 'pay.example').spec),
      ),
      'the last good version of pay',
    );
    assert.match(
      snapshot.errors.map((e) => e.message).join('\n'),
      new RegExp(
        `payments/pay: the body does not decode as .*ServiceEntry: a string field at byte ${at} is not valid UTF-8`,
      ),
    );
    assert.match(snapshot.warnings.map((w) => w.message).join('\n'), /#111/);
  });
});

/** The events of an xds source of `fake`'s VirtualServices and DestinationRules. */
function recordedSource(
  fake: FakeAdsServer,
  name: string,
  options: Partial<Pick<XdsSourceOptions, 'syncTimeout' | 'apiVersions'>>,
): SourceEventRecorder {
  return new SourceEventRecorder(
    new XdsSource({
      name,
      namespace: 'default',
      address: fake.address,
      kinds: ['VirtualService', 'DestinationRule'],
      ...options,
    }).events$,
  );
}

describe('an xds upstream that accepts the stream and never answers', () => {
  it('is failing with an error naming its type URLs and address, emits no snapshot, and is synced once it answers', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod', mute: everyConfigTypeUrl() });
    fake.set('VirtualService', [fakeVirtualService('reviews')]);
    const recorder = recordedSource(fake, 'mute', { syncTimeout: 300 });
    try {
      const failing = await recorder.status('failing');
      assert.equal(failing.error?.code, 'UNAVAILABLE');
      assert.match(
        failing.error?.message ?? '',
        new RegExp(
          `xds://${fake.address} did not answer .*networking\\.istio\\.io/v1/DestinationRule.*networking\\.istio\\.io/v1/VirtualService.* within 300 ms`,
        ),
      );
      assert.deepEqual(
        recorder.events.filter((e) => e.type === 'snapshot'),
        [],
        'nothing is served empty',
      );
      fake.mute = new Set();
      fake.push();
      await recorder.status('synced');
      assert.deepEqual(servedKeys(recorder.events, VS), ['shop/reviews']);
      assert.deepEqual(servedKeys(recorder.events, DR), []);
    } finally {
      recorder.close();
      await fake.stop();
    }
  });
});

describe('an xds upstream whose first state has an entry that is no Any', () => {
  it('applies none of it, stays unsynced, and takes the next state whole', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod', mute: new Set([VS_V1]) });
    fake.set('DestinationRule', [fakeDestinationRule('reviews')]);
    const recorder = recordedSource(fake, 'torn', { apiVersions: 'current' });
    try {
      await fake.waitFor(() => fake.requestsFor(VS_V1).length > 0, 5_000, 'a VirtualService request');
      fake.sendRaw(
        discoveryResponse(
          VS_V1,
          [
            mcpAny(VS_KIND, fakeVirtualService('reviews')),
            tornAny(),
            mcpAny(VS_KIND, fakeVirtualService('ratings')),
          ],
          'torn-first',
        ),
      );
      await fake.waitFor(
        () => fake.requests.some((r) => r.nonce === 'torn-first'),
        5_000,
        'the answer to the torn state',
      );
      assert.equal(fake.requests.find((r) => r.nonce === 'torn-first')?.errorDetail?.code, 3);
      assert.deepEqual(snapshotsOf(recorder.events, VS), [], 'no VirtualService is served');
      assert.ok(!recorder.events.some((e) => e.type === 'status' && e.state === 'synced'));
      fake.sendRaw(
        discoveryResponse(
          VS_V1,
          [mcpAny(VS_KIND, fakeVirtualService('reviews')), mcpAny(VS_KIND, fakeVirtualService('ratings'))],
          'whole',
        ),
      );
      await recorder.status('synced');
      assert.deepEqual(servedKeys(recorder.events, VS), ['shop/ratings', 'shop/reviews']);
    } finally {
      recorder.close();
      await fake.stop();
    }
  });
});

/** A legacy MCP source of the Galley's VirtualServices, its events recorded. */
function galleySource(galley: FakeGalley, incremental = false): SourceEventRecorder {
  return new SourceEventRecorder(
    new McpSource({
      name: 'galley',
      namespace: 'default',
      address: galley.address,
      kinds: ['VirtualService'],
      incremental,
      reconnect: { initialDelay: 50, maxDelay: 400 },
    }).events$,
  );
}

describe('a legacy MCP source refusing what it cannot name', () => {
  it('NACKs a Resources message whose objects are of another kind and keeps the collection', async () => {
    const collection = 'istio/networking/v1alpha3/virtualservices';
    const galley = await FakeGalley.start({ collections: [collection] });
    galley.set('VirtualService', [fakeVirtualService('reviews'), fakeVirtualService('ratings')]);
    const recorder = galleySource(galley);
    try {
      await recorder.status('synced');
      const from = recorder.count;
      galley.sendRaw(
        galleyResources(collection, [encodeMcpResource(DR_KIND, fakeDestinationRule('reviews'))], 'swapped'),
      );
      await galley.waitFor(() => galley.requests.some((r) => r.nonce === 'swapped'), 5_000, 'the NACK');
      const nack = galley.requests.find((r) => r.nonce === 'swapped');
      assert.equal(nack?.errorDetail?.code, 3);
      assert.match(nack?.errorDetail?.message ?? '', /rejected the whole response/);
      galley.sendRaw(
        galleyResources(
          collection,
          [encodeMcpResource(VS_KIND, fakeVirtualService('reviews')), Uint8Array.of(0x08, 0x01)],
          'garbled',
        ),
      );
      await galley.waitFor(() => galley.requests.some((r) => r.nonce === 'garbled'), 5_000, 'the NACK');
      assert.match(
        galley.requests.find((r) => r.nonce === 'garbled')?.errorDetail?.message ?? '',
        /1 of 2 objects cannot be named as objects of this type: resources\[1\]: an envelope of 2 bytes does not decode/,
      );
      galley.set('VirtualService', [
        fakeVirtualService('reviews'),
        fakeVirtualService('ratings'),
        fakeVirtualService('details'),
      ]);
      galley.push();
      await recorder.next(
        (e) => e.type === 'snapshot' && [...e.resources].some((r) => r.name === 'details'),
        from,
      );
      const between = recorder.events.slice(from).filter((e) => e.type === 'snapshot');
      assert.equal(between.length, 1, 'the swapped response changed nothing');
      assert.deepEqual(servedKeys(recorder.events, VS), ['shop/details', 'shop/ratings', 'shop/reviews']);
    } finally {
      recorder.close();
      await galley.stop();
    }
  });
});

describe('a legacy MCP source asking for incremental answers', () => {
  it('never takes an incremental answer after a refused first state as the collection, and reads it whole on a new stream', async () => {
    const collection = 'istio/networking/v1alpha3/virtualservices';
    const galley = await FakeGalley.start({ collections: [collection], scripted: true });
    const recorder = galleySource(galley, true);
    const asked = (): number => galley.requests.filter((r) => r.nonce === '').length;
    const vs = (name: string, host = name): Uint8Array =>
      encodeMcpResource(VS_KIND, fakeVirtualService(name, host));
    const names = ['reviews', 'ratings', 'details'];
    try {
      await galley.waitFor(() => asked() === 1, 5_000, 'the first subscription');
      galley.sendRaw(
        galleyResources(
          collection,
          names.map((n) => vs(n)),
          'first',
        ),
      );
      await recorder.status('synced');
      galley.disconnectAll();
      await galley.waitFor(() => asked() === 2, 5_000, 'a second stream');
      const from = recorder.count;
      // Its first answer, the whole collection, holds a DestinationRule: refused whole. The next,
      // marked incremental, changes one object of what the source takes as delivered.
      const torn = [...names.map((n) => vs(n)), encodeMcpResource(DR_KIND, fakeDestinationRule('x'))];
      galley.sendRaw(galleyResources(collection, torn, 'torn-first', true));
      galley.sendRaw(galleyResources(collection, [vs('reviews', 'changed')], 'a-change', true));
      await galley.waitFor(
        () => asked() === 3 || galley.requests.some((r) => r.nonce === 'a-change'),
        5_000,
        'a third stream, or an answer to the change',
      );
      assert.equal(galley.requests.find((r) => r.nonce === 'torn-first')?.errorDetail?.code, 3);
      assert.deepEqual(snapshotsOf(recorder.events.slice(from), VS), [], 'nothing served changed');
      assert.deepEqual(servedKeys(recorder.events, VS), ['shop/details', 'shop/ratings', 'shop/reviews']);
      await galley.waitFor(() => asked() === 3, 5_000, 'a third stream');
      // Reported as the stream's end: the source is stale until the new stream answers.
      await recorder.next(
        (e) =>
          e.type === 'status' &&
          e.state === 'stale' &&
          /out of step with the MCP source/.test(e.error?.message ?? ''),
        from,
      );
      const reopened = recorder.count;
      galley.sendRaw(
        galleyResources(collection, [vs('reviews', 'changed'), vs('ratings'), vs('details')], 'whole', true),
      );
      await recorder.next((e) => e.type === 'snapshot', reopened);
      assert.deepEqual(servedKeys(recorder.events, VS), ['shop/details', 'shop/ratings', 'shop/reviews']);
    } finally {
      recorder.close();
      await galley.stop();
    }
  });
});

describe('a delta xds source refusing what it cannot name', () => {
  const SE_V1 = 'networking.istio.io/v1/ServiceEntry';
  const SE = 'networking.istio.io/ServiceEntry';
  const SE_KIND = kindNamed('ServiceEntry');
  const se = (name: string): FakeObject => ({
    namespace: 'payments',
    name,
    spec: { hosts: [`${name}.example.com`], resolution: 'DNS' },
  });

  it('NACKs a delta response with a resource in the wrong Any, applying none of it, and takes the complete state of a new stream', async () => {
    const upstream = await ScriptedDeltaUpstream.start();
    const recorder = await subscribedDeltaSource(upstream, 'delta');
    try {
      upstream.send(
        deltaResponse(
          SE_V1,
          [
            { name: 'payments/cards', any: mcpAny(SE_KIND, se('cards')) },
            { name: 'payments/loans', any: mcpAny(SE_KIND, se('loans')) },
          ],
          'first',
        ),
      );
      await recorder.status('synced');
      assert.deepEqual(servedKeys(recorder.events, SE), ['payments/cards', 'payments/loans']);

      const from = recorder.count;
      upstream.send(
        deltaResponse(
          SE_V1,
          [{ name: 'payments/x', any: bareBodyAny(VS_KIND, fakeVirtualService('x')) }],
          'wrong-any',
          ['payments/cards'],
        ),
      );
      // A change that came after the refused one, on the stream that is ending: never taken.
      upstream.send(deltaResponse(SE_V1, [], 'after', ['payments/loans']));
      await upstream.waitFor(() => upstream.requests.some((r) => r.nonce === 'wrong-any'), 5_000, 'the NACK');
      const nack = upstream.requests.find((r) => r.nonce === 'wrong-any');
      assert.equal(nack?.errorDetail?.code, 3);
      assert.match(nack?.errorDetail?.message ?? '', /rejected the whole response/);
      // The changes it carried are lost to the stream: a new one begins with the complete state.
      await upstream.waitFor(() => upstream.subscriptions(SE_V1) === 2, 5_000, 'a new stream');
      const stale = await recorder.status('stale', from);
      assert.match(
        stale.error?.message ?? '',
        /out of step with the upstream.*new stream is opened for the complete state/,
      );
      assert.ok(!upstream.requests.some((r) => r.nonce === 'after'), 'nothing after the refusal is read');
      assert.deepEqual(
        snapshotsOf(recorder.events.slice(from), SE),
        [],
        'the refused response changed nothing',
      );

      const reopened = recorder.count;
      upstream.send(
        deltaResponse(SE_V1, [{ name: 'payments/loans', any: mcpAny(SE_KIND, se('loans')) }], 'complete'),
      );
      await recorder.next((e) => e.type === 'snapshot', reopened);
      assert.deepEqual(servedKeys(recorder.events, SE), ['payments/loans'], 'the complete state, whole');
    } finally {
      recorder.close();
      upstream.stop();
    }
  });

  it('never takes a change after a refused first state as the whole state', async () => {
    const upstream = await ScriptedDeltaUpstream.start();
    const recorder = await subscribedDeltaSource(upstream, 'delta-first');
    try {
      const state = ['cards', 'loans', 'fx'].map((n) => ({
        name: `payments/${n}`,
        any: mcpAny(SE_KIND, se(n)),
      }));
      upstream.send(
        deltaResponse(
          SE_V1,
          [...state, { name: 'payments/x', any: bareBodyAny(VS_KIND, fakeVirtualService('x')) }],
          'torn-first',
        ),
      );
      upstream.send(deltaResponse(SE_V1, [state[0] as (typeof state)[number]], 'a-change'));
      await upstream.waitFor(() => upstream.subscriptions(SE_V1) === 2, 5_000, 'a new stream');
      assert.deepEqual(snapshotsOf(recorder.events, SE), [], 'no part of the state is served as all of it');
      assert.ok(!upstream.requests.some((r) => r.nonce === 'a-change'));
      upstream.send(deltaResponse(SE_V1, state, 'complete'));
      await recorder.status('synced');
      assert.deepEqual(servedKeys(recorder.events, SE), ['payments/cards', 'payments/fx', 'payments/loans']);
    } finally {
      recorder.close();
      upstream.stop();
    }
  });
});
