/**
 * What one type's delta subscription puts in each response: objects a client subscribes are sent,
 * also when it subscribes them again while the server thinks it holds them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigResource } from '../../src/core/resource.js';
import type { TypeSubscription } from '../../src/downstream/ads-protocol.js';
import { FULL_VIEW } from '../../src/downstream/client-view.js';
import { DELTA_PROTOCOL } from '../../src/downstream/delta-protocol.js';
import type { DeltaDiscoveryRequest } from '../../src/downstream/discovery-request.js';
import { ResourceEncoder } from '../../src/downstream/resource-encoder.js';
import { ResponseCache, responseBytes, type BuiltResponse } from '../../src/downstream/response-cache.js';
import type { KindSnapshot } from '../../src/merge/config-snapshot.js';
import { KindTable } from '../../src/merge/kind-table.js';
import { KINDS } from '../../src/schema/kinds.js';
import { messageType } from '../../src/schema/proto-root.js';
import { fakeResource } from '../support/resources.js';

const KIND = 'networking.istio.io/VirtualService';
const TYPE_URL = 'networking.istio.io/v1/VirtualService';
const DELTA_RESPONSE = messageType('envoy.service.discovery.v3.DeltaDiscoveryResponse');

/** Kind generations: the views' contents are kept by generation, so each table takes new ones. */
let generation = 0;

/** The kind holding VirtualServices `shop/<name>` for each name, of body `<name><edit>`. */
function kindOf(names: readonly string[], edit = ''): KindSnapshot {
  const table = new KindTable(KIND, undefined, 'serve-all', () => ++generation);
  const after = new Map<string, ConfigResource>();
  for (const name of names)
    after.set(`shop/${name}`, fakeResource(name, { namespace: 'shop', body: `${name}${edit}` }));
  table.apply({ name: 'upstream', priority: 0, order: 0 }, new Map(), after);
  const snapshot = table.snapshot();
  assert.ok(snapshot !== undefined);
  return snapshot;
}

/** A request of the type that (un)subscribes the names given. */
function request(subscribe: readonly string[], unsubscribe: readonly string[] = []): DeltaDiscoveryRequest {
  return { typeUrl: TYPE_URL, responseNonce: '', subscribe, unsubscribe, initialVersions: new Map() };
}

/** What a response carries: the names sent and the names removed. */
function carried(response: BuiltResponse): { sent: string[]; removed: string[] } {
  const decoded = DELTA_RESPONSE.toObject(DELTA_RESPONSE.decode(responseBytes(response)), {
    arrays: true,
  }) as { resources: Array<{ name: string }>; removed_resources: string[] };
  return { sent: decoded.resources.map((r) => r.name), removed: decoded.removed_resources };
}

/** Builds the next response and hands it over as sent, or returns undefined when none is owed. */
function next(
  subscription: TypeSubscription<DeltaDiscoveryRequest>,
  kind: KindSnapshot,
): { sent: string[]; removed: string[] } | undefined {
  const response = subscription.resources(FULL_VIEW, kind, true);
  if (response === undefined) return undefined;
  subscription.sent(response);
  return carried(response);
}

describe('a delta subscription', () => {
  const all = ['cards', 'ledger', 'orders'];
  const kind = kindOf(all);
  const subscribe = (first: DeltaDiscoveryRequest): TypeSubscription<DeltaDiscoveryRequest> =>
    DELTA_PROTOCOL.subscribe(TYPE_URL, first, new ResponseCache(new ResourceEncoder(KINDS)));

  it('sends a name subscribed again although the client holds it, once', () => {
    const subscription = subscribe(request(['shop/cards']));
    assert.deepEqual(next(subscription, kind), { sent: ['shop/cards'], removed: [] });
    assert.equal(next(subscription, kind), undefined, 'nothing is owed once it was sent');

    assert.equal(subscription.update(request(['shop/cards'])), true, 'a response is owed');
    assert.equal(subscription.owed, true);
    assert.deepEqual(next(subscription, kind), { sent: ['shop/cards'], removed: [] });
    assert.equal(next(subscription, kind), undefined, 'the name is owed again only until it was sent');
  });

  it('sends only the names subscribed again, not the others it holds', () => {
    const subscription = subscribe(request(['shop/cards', 'shop/ledger', 'shop/orders']));
    assert.deepEqual(next(subscription, kind)?.sent, ['shop/cards', 'shop/ledger', 'shop/orders']);
    subscription.update(request(['shop/orders', 'shop/cards']));
    assert.deepEqual(next(subscription, kind), { sent: ['shop/cards', 'shop/orders'], removed: [] });
  });

  it('sends the whole type to a wildcard subscribed again with `*`', () => {
    for (const first of [request([]), request(['*'])]) {
      const subscription = subscribe(first);
      assert.deepEqual(next(subscription, kind)?.sent, ['shop/cards', 'shop/ledger', 'shop/orders']);
      assert.equal(subscription.update(request(['*'])), true, 'a response is owed');
      assert.deepEqual(next(subscription, kind), {
        sent: ['shop/cards', 'shop/ledger', 'shop/orders'],
        removed: [],
      });
      assert.equal(next(subscription, kind), undefined);
    }
  });

  it('sends a wildcard client a name it then subscribes, and answers a missing one as removed', () => {
    const subscription = subscribe(request([]));
    assert.deepEqual(next(subscription, kind)?.sent, ['shop/cards', 'shop/ledger', 'shop/orders']);
    subscription.update(request(['shop/cards', 'shop/ghost']));
    assert.deepEqual(next(subscription, kind), { sent: ['shop/cards'], removed: ['shop/ghost'] });
  });

  it('sends a name subscribed again when the kind was rebuilt meanwhile with equal objects', () => {
    const subscription = subscribe(request(['shop/cards', 'shop/orders']));
    next(subscription, kind);
    subscription.update(request(['shop/cards']));
    // Other instances of every object, with the same bytes: the client holds them already.
    assert.deepEqual(next(subscription, kindOf(all)), { sent: ['shop/cards'], removed: [] });
  });

  it('sends an object that changed and was subscribed again once, with the other changes', () => {
    const subscription = subscribe(request(['shop/cards', 'shop/orders']));
    next(subscription, kind);
    subscription.update(request(['shop/cards']));
    assert.deepEqual(next(subscription, kindOf(all, '-v2')), {
      sent: ['shop/cards', 'shop/orders'],
      removed: [],
    });
  });

  it('sends nothing for a name subscribed again and unsubscribed before the next response', () => {
    const subscription = subscribe(request(['shop/cards', 'shop/orders']));
    next(subscription, kind);
    subscription.update(request(['shop/cards']));
    subscription.update(request([], ['shop/cards']));
    assert.deepEqual(next(subscription, kind)?.sent ?? [], []);
  });

  it('sends nothing for `*` subscribed again and unsubscribed before the next response', () => {
    const subscription = subscribe(request(['*', 'shop/cards']));
    next(subscription, kind);
    subscription.update(request(['*']));
    subscription.update(request([], ['*']));
    assert.deepEqual(next(subscription, kind)?.sent ?? [], []);
  });

  it('does not send a client that listed what it holds a name it subscribes with the version it has', () => {
    const subscription = DELTA_PROTOCOL.subscribe(
      TYPE_URL,
      {
        ...request(['shop/cards', 'shop/orders']),
        initialVersions: new Map(
          kind.resources.map((r) => [r.key, r.key === 'shop/orders' ? 'old' : r.version]),
        ),
      },
      new ResponseCache(new ResourceEncoder(KINDS)),
    );
    assert.deepEqual(next(subscription, kind), { sent: ['shop/orders'], removed: [] });
  });
});
