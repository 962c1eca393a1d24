/**
 * Delta ADS served by meshmux (`DeltaAggregatedResources`), through real gRPC streams: the whole
 * state first, then only what changed, by name; explicit subscriptions, and names subscribed
 * again; a reconnecting client that lists what it holds; NACKs.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { messageType } from '../../src/schema/proto-root.js';
import { stringStruct, type NodeMessage } from '../support/ads-wire.js';
import { DEFAULT_NODE_METADATA } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { within } from '../support/deadline.js';
import { DELTA_STREAM_PATH, RawDeltaStream, type DeltaResponse } from '../support/raw-delta-stream.js';
import { SE, SE_LEGACY, VS } from '../support/type-urls.js';
import { MCP_RESOURCE_TYPE_URL } from '../../src/wire/type-urls.js';

const NODE: NodeMessage = { id: 'meshmux~regional-east', metadata: stringStruct(DEFAULT_NODE_METADATA) };
const WAIT_MS = 15_000;
const DELTA_REQUEST = messageType('envoy.service.discovery.v3.DeltaDiscoveryRequest');

/** ServiceEntries `shop/<name>` with one host each. */
function serviceEntries(hosts: Readonly<Record<string, string>>): string {
  return Object.entries(hosts)
    .map(
      ([name, host]) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: shop}
spec: {hosts: [${host}], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}
`,
    )
    .join('---\n');
}

const names = (r: DeltaResponse): string[] => r.resources.map((x) => x.name).sort();

describe('delta ADS served to another tier', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
  const file = (): string => path.join(dir, 'shop.yaml');
  const streams: RawDeltaStream[] = [];
  const open = (): RawDeltaStream => {
    const stream = new RawDeltaStream(meshmux.xds);
    streams.push(stream);
    return stream;
  };
  let hosts: Record<string, string>;
  /** Rewrites the watched file and resolves once `stream` received the response that follows. */
  const change = async (stream: RawDeltaStream, next: Record<string, string>): Promise<DeltaResponse> => {
    hosts = next;
    const from = stream.received.length;
    await writeFile(file(), serviceEntries(hosts));
    return stream.responseAfter(from, () => true, WAIT_MS, 'the delta response after a file change');
  };

  before(async () => {
    ({ dir, dispose } = await tempDir());
    hosts = { cards: 'cards.example.com', orders: 'orders.example.com', ledger: 'ledger.example.com' };
    await writeFile(file(), serviceEntries(hosts));
    meshmux = await startFromYaml(`sources: [{name: shop, type: file, path: ./shop.yaml}]\n`, dir);
  });
  after(async () => {
    for (const s of streams) s.close();
    await meshmux.stop();
    await dispose();
  });

  it('sends a wildcard subscription the whole state, then only the object that changed or the name removed', async () => {
    const stream = open();
    stream.send({ node: NODE, type_url: SE });
    const first = await stream.next(WAIT_MS);
    assert.equal(first.type_url, SE);
    assert.deepEqual(names(first), ['shop/cards', 'shop/ledger', 'shop/orders']);
    assert.deepEqual(first.removed_resources, []);
    for (const r of first.resources) {
      assert.equal(r.resource?.type_url, MCP_RESOURCE_TYPE_URL);
      assert.notEqual(r.version, '');
    }
    assert.notEqual(first.system_version_info, '');
    stream.ack(first);

    const changed = await change(stream, { ...hosts, orders: 'orders-v2.example.com' });
    assert.deepEqual(names(changed), ['shop/orders'], 'only the changed object is sent');
    assert.deepEqual(changed.removed_resources, []);
    const before = first.resources.find((r) => r.name === 'shop/orders');
    assert.notEqual(changed.resources[0]?.version, before?.version);
    assert.notEqual(changed.system_version_info, first.system_version_info);
    stream.ack(changed);

    const { ledger: _gone, ...rest } = hosts;
    const removed = await change(stream, rest);
    assert.deepEqual(names(removed), []);
    assert.deepEqual(removed.removed_resources, ['shop/ledger']);
    stream.ack(removed);
  });

  it('answers with the type URL each request asked for', async () => {
    const stream = open();
    stream.send({ node: NODE, type_url: SE_LEGACY });
    const legacy = await stream.next(WAIT_MS);
    assert.equal(legacy.type_url, SE_LEGACY);
    assert.deepEqual(
      names(legacy),
      Object.keys(hosts)
        .map((n) => `shop/${n}`)
        .sort(),
    );
    stream.send({ type_url: VS });
    const vs = await stream.next(WAIT_MS);
    assert.equal(vs.type_url, VS);
    assert.deepEqual(vs.resources, [], 'an empty kind is answered once, empty');
  });

  it('serves explicit names only, answers a missing name as removed, and stops at an unsubscribe', async () => {
    const stream = open();
    stream.send({ node: NODE, type_url: SE, resource_names_subscribe: ['shop/cards', 'shop/nowhere'] });
    const first = await stream.next(WAIT_MS);
    assert.deepEqual(names(first), ['shop/cards']);
    assert.deepEqual(
      first.removed_resources,
      ['shop/nowhere'],
      'a name that does not exist is answered as removed',
    );
    stream.ack(first);

    // A change to an object it did not subscribe sends nothing: a later change to one it did
    // subscribe is the marker that anything the first caused would have arrived.
    const from = stream.received.length;
    await writeFile(file(), serviceEntries((hosts = { ...hosts, orders: 'orders-v3.example.com' })));
    const marker = await change(stream, { ...hosts, cards: 'cards-v2.example.com' });
    assert.deepEqual(names(marker), ['shop/cards']);
    assert.equal(stream.received.length, from + 1, 'the unsubscribed change sent nothing');
    stream.ack(marker);

    const at = stream.received.length;
    stream.send({
      type_url: SE,
      resource_names_subscribe: ['shop/orders'],
      resource_names_unsubscribe: ['shop/cards'],
    });
    const resubscribed = await stream.responseAfter(at, () => true, WAIT_MS, 'the answer to a new name');
    assert.deepEqual(names(resubscribed), ['shop/orders'], 'a new name is sent at once');
    assert.deepEqual(resubscribed.removed_resources, [], 'an unsubscribed name is not answered as removed');
  });

  it('sends an object again to a client that unsubscribed it and subscribes it again', async () => {
    const stream = open();
    stream.send({ node: NODE, type_url: SE, resource_names_subscribe: ['shop/cards'] });
    const first = await stream.next(WAIT_MS);
    assert.deepEqual(names(first), ['shop/cards']);
    stream.ack(first);

    // The client dropped shop/cards at the unsubscribe: the new subscription must bring it back.
    const at = stream.received.length;
    stream.send({ type_url: SE, resource_names_unsubscribe: ['shop/cards'] });
    stream.send({ type_url: SE, resource_names_subscribe: ['shop/cards'] });
    const again = await stream.responseAfter(at, () => true, WAIT_MS, 'the answer to the new subscription');
    assert.deepEqual(names(again), ['shop/cards']);
    assert.deepEqual(again.removed_resources, []);
  });

  it('sends the whole type again to a client that unsubscribed the wildcard and subscribes it again', async () => {
    const stream = open();
    stream.send({ node: NODE, type_url: SE });
    const first = await stream.next(WAIT_MS);
    const all = names(first);
    assert.ok(all.length >= 2);
    stream.ack(first);

    const at = stream.received.length;
    stream.send({ type_url: SE, resource_names_unsubscribe: ['*'] });
    stream.send({ type_url: SE, resource_names_subscribe: ['*'] });
    const again = await stream.responseAfter(at, () => true, WAIT_MS, 'the answer to the new wildcard');
    assert.deepEqual(names(again), all);
    assert.deepEqual(again.removed_resources, []);
  });

  it('sends an object again to a client that subscribes it again while holding it', async () => {
    const stream = open();
    stream.send({ node: NODE, type_url: SE, resource_names_subscribe: ['shop/cards'] });
    const first = await stream.next(WAIT_MS);
    assert.deepEqual(names(first), ['shop/cards']);
    stream.ack(first);

    // A client that lost an object asks for it by subscribing its name again, with no unsubscribe.
    const at = stream.received.length;
    stream.send({ type_url: SE, resource_names_subscribe: ['shop/cards'] });
    const again = await stream.responseAfter(
      at,
      () => true,
      WAIT_MS,
      'the answer to the name subscribed again',
    );
    assert.deepEqual(names(again), ['shop/cards']);
    assert.deepEqual(again.removed_resources, []);
    assert.equal(again.resources[0]?.version, first.resources[0]?.version, 'the object is unchanged');
  });

  it('sends the whole type again to a wildcard client that subscribes `*` again', async () => {
    const stream = open();
    stream.send({ node: NODE, type_url: SE });
    const first = await stream.next(WAIT_MS);
    stream.ack(first);

    const at = stream.received.length;
    stream.send({ type_url: SE, resource_names_subscribe: ['*'] });
    const again = await stream.responseAfter(at, () => true, WAIT_MS, 'the answer to `*` subscribed again');
    assert.deepEqual(names(again), names(first));
    assert.deepEqual(again.removed_resources, []);
  });

  it('sends a wildcard client the names it subscribes, and answers a missing one as removed', async () => {
    const stream = open();
    stream.send({ node: NODE, type_url: SE });
    const first = await stream.next(WAIT_MS);
    assert.ok(names(first).includes('shop/cards'));
    stream.ack(first);

    const at = stream.received.length;
    stream.send({ type_url: SE, resource_names_subscribe: ['shop/cards', 'shop/ghost'] });
    const named = await stream.responseAfter(at, () => true, WAIT_MS, 'the answer to the names subscribed');
    assert.deepEqual(names(named), ['shop/cards']);
    assert.deepEqual(named.removed_resources, ['shop/ghost']);
  });

  it('sends a client that lists what it holds only what differs', async () => {
    const probe = open();
    probe.send({ node: NODE, type_url: SE });
    const state = await probe.next(WAIT_MS);
    const versions = Object.fromEntries(state.resources.map((r) => [r.name, r.version]));
    const names0 = Object.keys(versions).sort();
    assert.ok(names0.length >= 2);
    const [stale, kept] = names0 as [string, string];

    const stream = open();
    stream.send({
      node: NODE,
      type_url: SE,
      initial_resource_versions: {
        ...versions,
        [stale]: 'an-older-version',
        'shop/deleted-while-away': 'v1',
      },
    });
    const first = await stream.next(WAIT_MS);
    assert.deepEqual(names(first), [stale], `only ${stale} differs; ${kept} is current`);
    assert.deepEqual(first.removed_resources, ['shop/deleted-while-away']);
  });

  it('does not send a NACKed response again, and still sends the next change', async () => {
    const stream = open();
    stream.send({ node: NODE, type_url: SE });
    const first = await stream.next(WAIT_MS);
    stream.ack(first);
    const changed = await change(stream, { ...hosts, cards: 'cards-v3.example.com' });
    stream.send({
      type_url: SE,
      response_nonce: changed.nonce,
      error_detail: { code: 3, message: 'rejected by the test' },
    });
    const next = await change(stream, { ...hosts, orders: 'orders-v4.example.com' });
    assert.deepEqual(names(next), ['shop/orders']);
    assert.equal(
      stream.received.filter((r) => r.nonce === changed.nonce || names(r).includes('shop/cards')).length,
      2,
      'the first state and the NACKed change only: nothing was re-sent',
    );
    const syncz = (await (await fetch(`${meshmux.admin}/debug/syncz`)).json()) as Array<{
      protocol: string;
      types: Array<{ typeUrl: string; nacks: number }>;
    }>;
    const delta = syncz.filter((s) => s.protocol === 'delta');
    assert.ok(delta.length > 0, 'delta streams are reported as such');
    assert.ok(delta.some((s) => s.types.some((t) => t.typeUrl === SE && t.nacks === 1)));
  });

  it('ignores an undecodable delta request and still answers the next one on the stream', async () => {
    const raw = new grpc.Client(meshmux.xds, grpc.credentials.createInsecure());
    const call = raw.makeBidiStreamRequest(
      DELTA_STREAM_PATH,
      (b: Buffer) => b,
      (b: Buffer) => b,
    );
    try {
      const answered = new Promise<Buffer>((resolve) => call.once('data', resolve));
      call.on('error', () => undefined);
      // Field 2 (type_url) claims 100 bytes and carries 1.
      call.write(Buffer.from([0x12, 0x64, 0x61]));
      call.write(
        Buffer.from(DELTA_REQUEST.encode(DELTA_REQUEST.fromObject({ node: NODE, type_url: SE })).finish()),
      );
      const bytes = await within(answered, WAIT_MS, 'an answer after an undecodable request');
      assert.ok(bytes.byteLength > 0);
    } finally {
      call.cancel();
      raw.close();
    }
  });
});
