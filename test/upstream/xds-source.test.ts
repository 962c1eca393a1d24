import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import type { SourceEvent, SourceSnapshotEvent, SourceStatusEvent } from '../../src/core/source-event.js';
import { CONFIG_KINDS, KINDS } from '../../src/schema/kinds.js';
import { XdsSource } from '../../src/upstream/xds/xds-source.js';
import type { XdsSourceOptions } from '../../src/upstream/xds/xds-source-options.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { tempDir } from '../support/meshmux-harness.js';
import { SourceEventRecorder } from '../support/source-event-recorder.js';
import { makeUpstreamPki, tlsHandshakes, type UpstreamPki } from '../support/test-pki.js';
import { until } from '../support/deadline.js';
import { fakeServiceEntry, fakeVirtualService } from '../support/fake-objects.js';
import { foldSourceEvents, servedKeys } from '../support/folded-source-state.js';

const VS_V1 = 'networking.istio.io/v1/VirtualService';
const VS_V1ALPHA3 = 'networking.istio.io/v1alpha3/VirtualService';
const SE_V1ALPHA3 = 'networking.istio.io/v1alpha3/ServiceEntry';
const VS = 'networking.istio.io/VirtualService';
const SE = 'networking.istio.io/ServiceEntry';

const se = fakeServiceEntry;

function source(address: string, extra: Partial<XdsSourceOptions> = {}): XdsSource {
  return new XdsSource({
    name: 'upstream',
    namespace: 'default',
    address,
    reconnect: { initialDelay: 50, maxDelay: 400 },
    ...extra,
  });
}

const isStatus =
  (state: SourceStatusEvent['state']) =>
  (e: SourceEvent): boolean =>
    e.type === 'status' && e.state === state;

describe('xds source against an istiod api generator', () => {
  let fake: FakeAdsServer;
  let recorder: SourceEventRecorder;

  before(async () => {
    fake = await FakeAdsServer.start({ peer: 'istiod' });
    fake
      .set('VirtualService', [fakeVirtualService('reviews'), fakeVirtualService('ratings')])
      .set('ServiceEntry', [se('cards', 'api.cards.example')]);
    recorder = new SourceEventRecorder(source(fake.address).events$);
  });
  after(async () => {
    recorder.close();
    await fake.stop();
  });

  it('subscribes both spellings of every config kind, with the node on the first request only', async () => {
    await recorder.status('synced');
    const initial = fake.requests.filter((r) => r.stream === 1 && r.nonce === '');
    const expected = CONFIG_KINDS.flatMap((k) => [
      ...new Set([`${k.group}/${k.currentVersion}/${k.kind}`, `${k.group}/${k.legacyVersion}/${k.kind}`]),
    ]);
    assert.deepEqual(
      initial.map((r) => r.typeUrl),
      expected,
    );
    assert.equal(expected.length, 26);
    assert.equal(initial[0]?.node?.metadata?.fields?.['GENERATOR']?.stringValue, 'api');
    assert.match(initial[0]?.node?.id ?? '', /^sidecar~[\d.]+~.+\..+~.+\.svc\.cluster\.local$/);
    assert.ok(initial.slice(1).every((r) => r.node === null));
    assert.ok(initial.every((r) => r.versionInfo === '' && r.resourceNames.length === 0));
    assert.ok(
      !fake.requests.some((r) => r.typeUrl === 'core/v1alpha1/MeshConfig'),
      'MeshConfig is not asked for',
    );
  });

  it('reports synced once, with one snapshot covering every kind, served from the spelling that holds objects', () => {
    const snapshots = recorder.events.filter((e): e is SourceSnapshotEvent => e.type === 'snapshot');
    assert.equal(snapshots.length, 1);
    assert.equal(snapshots[0]?.kinds?.size, 15);
    assert.deepEqual(servedKeys(recorder.events, VS), ['shop/ratings', 'shop/reviews']);
    assert.deepEqual(servedKeys(recorder.events, SE), ['payments/cards']);
    assert.deepEqual(
      recorder.events.filter((e) => e.type === 'status').map((e) => e.state),
      ['connecting', 'synced'],
    );
  });

  it('ACKs every response with its version and nonce', async () => {
    await fake.waitFor(
      () =>
        fake.sent.every((s) =>
          fake.requests.some((r) => r.nonce === s.nonce && r.versionInfo === s.versionInfo),
        ),
      5_000,
      'an ACK of every response',
    );
    const nacks = fake.requests.filter((r) => r.errorDetail !== null);
    assert.deepEqual(nacks, []);
  });

  it('keeps serving the v1 objects through pushes where the v1alpha3 spelling answers empty, and applies changes', async () => {
    const from = recorder.count;
    fake.set('VirtualService', [
      fakeVirtualService('reviews'),
      fakeVirtualService('ratings'),
      fakeVirtualService('details'),
    ]);
    fake.push();
    await recorder.next(
      (e) => e.type === 'snapshot' && [...e.resources].some((r) => r.name === 'details'),
      from,
    );
    fake.push();
    fake.push();
    await fake.waitFor(
      () => fake.sent.every((s) => fake.requests.some((r) => r.nonce === s.nonce)),
      5_000,
      'ACKs',
    );
    assert.deepEqual(servedKeys(recorder.events, VS), ['shop/details', 'shop/ratings', 'shop/reviews']);
    assert.deepEqual(servedKeys(recorder.events, SE), ['payments/cards']);
    const changed = recorder.events
      .slice(from)
      .filter((e): e is SourceSnapshotEvent => e.type === 'snapshot');
    assert.equal(changed.length, 1, 'pushes without changes emit nothing');
    assert.deepEqual([...(changed[0]?.kinds ?? [])], [VS], 'a response replaces its kind only');
  });

  it('deletes an object once the spelling that served it no longer lists it', async () => {
    const from = recorder.count;
    fake.set('VirtualService', [fakeVirtualService('reviews'), fakeVirtualService('ratings')]);
    fake.push();
    await recorder.next(
      (e) => e.type === 'snapshot' && ![...e.resources].some((r) => r.name === 'details'),
      from,
    );
    assert.deepEqual(servedKeys(recorder.events, VS), ['shop/ratings', 'shop/reviews']);
  });

  it('drops an object whose body does not decode, keeps its previous version, applies the rest and NACKs naming it', async () => {
    const before = foldSourceEvents(recorder.events).get(VS)?.get('shop/ratings');
    const lastAccepted = fake.sent.filter((s) => s.typeUrl === VS_V1).at(-1)?.versionInfo;
    const from = recorder.count;
    fake.set('VirtualService', [
      fakeVirtualService('reviews', 'reviews-v2'),
      { ...fakeVirtualService('ratings'), rawBody: Uint8Array.of(0x0a, 0x09, 0x61) },
      { ...fakeVirtualService('broken'), rawBody: Uint8Array.of(0xff, 0xff) },
    ]);
    fake.push();
    const snapshot = (await recorder.next(
      (e) => e.type === 'snapshot' && e.errors.length > 0,
      from,
    )) as SourceSnapshotEvent;
    const served = foldSourceEvents(recorder.events).get(VS);
    assert.deepEqual([...(served?.keys() ?? [])].sort(), ['shop/ratings', 'shop/reviews']);
    assert.equal(served?.get('shop/ratings')?.version, before?.version, 'the previous good version stays');
    assert.notEqual(served?.get('shop/reviews')?.version, undefined);
    assert.equal(snapshot.errors.length, 2);
    assert.match(snapshot.errors.map((e) => e.message).join('\n'), /shop\/ratings.*does not decode/);
    await fake.waitFor(
      () => fake.requests.some((r) => r.typeUrl === VS_V1 && r.errorDetail !== null),
      5_000,
      'a NACK',
    );
    const nack = fake.requests.find((r) => r.typeUrl === VS_V1 && r.errorDetail !== null);
    assert.equal(nack?.errorDetail?.code, 3);
    assert.match(nack?.errorDetail?.message ?? '', /dropped 2 of 3 objects.*shop\/ratings.*shop\/broken/);
    assert.equal(nack?.versionInfo, lastAccepted, 'a NACK carries the last version accepted whole');
    const restore = recorder.count;
    fake.set('VirtualService', [fakeVirtualService('reviews'), fakeVirtualService('ratings')]);
    fake.push();
    await recorder.next((e) => e.type === 'snapshot' && e.errors.length === 0, restore);
  });

  it('ignores undecodable bytes without losing anything, reports them, and NACKs what it can salvage', async () => {
    const before = foldSourceEvents(recorder.events);
    const from = recorder.count;
    fake.sendRaw(Uint8Array.of(0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01));
    const status = (await recorder.next(
      (e) => e.type === 'status' && e.error !== undefined,
      from,
    )) as SourceStatusEvent;
    assert.equal(status.state, 'synced');
    assert.equal(status.error?.code, 'DECODE');
    const salvageable = protobuf.Writer.create()
      .uint32((4 << 3) | 2)
      .string(VS_V1)
      .uint32((5 << 3) | 2)
      .string('garbage-nonce')
      .uint32((2 << 3) | 2)
      .uint32(50)
      .finish();
    fake.sendRaw(salvageable);
    await fake.waitFor(
      () => fake.requests.some((r) => r.nonce === 'garbage-nonce'),
      5_000,
      'a NACK of the garbage',
    );
    const nack = fake.requests.find((r) => r.nonce === 'garbage-nonce');
    assert.equal(nack?.errorDetail?.code, 3);
    assert.ok(!recorder.events.slice(from).some((e) => e.type === 'snapshot'), 'nothing was replaced');
    assert.deepEqual(foldSourceEvents(recorder.events), before);
    const next = recorder.count;
    fake
      .set('VirtualService', [
        fakeVirtualService('reviews'),
        fakeVirtualService('ratings'),
        fakeVirtualService('after-garbage'),
      ])
      .push();
    await recorder.next(
      (e) => e.type === 'snapshot' && [...e.resources].some((r) => r.name === 'after-garbage'),
      next,
    );
  });
});

describe('xds source across upstream outages', () => {
  it('keeps everything while the upstream is down, and a restart with the same content yields identical resources', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod' });
    fake
      .set('VirtualService', [fakeVirtualService('reviews')])
      .set('ServiceEntry', [se('cards', 'api.cards.example')]);
    const recorder = new SourceEventRecorder(source(fake.address).events$);
    try {
      await recorder.status('synced');
      const before = foldSourceEvents(recorder.events);
      const from = recorder.count;
      await fake.stop();
      const stale = await recorder.status('stale', from);
      assert.equal(stale.error?.code, 'UNAVAILABLE');
      await fake.restart();
      await recorder.status('synced', from);
      const during = recorder.events.slice(from);
      const snapshots = during.filter((e): e is SourceSnapshotEvent => e.type === 'snapshot');
      assert.equal(snapshots.length, 1, 'one atomic resync');
      assert.ok(
        during.findIndex((e) => e.type === 'snapshot') > during.findIndex(isStatus('stale')),
        'nothing is served between the disconnect and the resync',
      );
      const after = foldSourceEvents(recorder.events);
      for (const [kind, objects] of before) {
        for (const [name, r] of objects) {
          assert.equal(after.get(kind)?.get(name)?.version, r.version, `${name} keeps its version`);
          assert.deepEqual(after.get(kind)?.get(name)?.createTime, r.createTime);
        }
      }
    } finally {
      recorder.close();
      await fake.stop();
    }
  });

  it('serves nothing from a stream that drops before answering every type URL', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod' });
    fake.set('VirtualService', [fakeVirtualService('reviews')]);
    const recorder = new SourceEventRecorder(source(fake.address).events$);
    try {
      await recorder.status('synced');
      const from = recorder.count;
      // The upstream now lost the VirtualService, but drops the stream before answering every type.
      fake.set('VirtualService', []);
      fake.mute = new Set([SE_V1ALPHA3]);
      const streams = fake.streams;
      fake.disconnectAll();
      await fake.waitFor(
        () => fake.streams > streams && fake.sent.some((s) => s.stream > streams),
        5_000,
        'a partial answer',
      );
      fake.disconnectAll();
      await recorder.status('stale', from);
      fake.mute = new Set();
      fake.set('VirtualService', [fakeVirtualService('reviews')]);
      await recorder.status('synced', from);
      const snapshots = recorder.events
        .slice(from)
        .filter((e): e is SourceSnapshotEvent => e.type === 'snapshot');
      assert.ok(
        snapshots.every((s) => [...s.resources].some((r) => r.name === 'reviews')),
        'never served without it',
      );
    } finally {
      recorder.close();
      await fake.stop();
    }
  });

  it('serves an upstream that restarted empty as empty only after it answered, never on the disconnect', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod' });
    fake.set('VirtualService', [fakeVirtualService('reviews')]);
    const recorder = new SourceEventRecorder(source(fake.address).events$);
    try {
      await recorder.status('synced');
      const from = recorder.count;
      await fake.stop();
      await recorder.status('stale', from);
      assert.ok(!recorder.events.slice(from).some((e) => e.type === 'snapshot'));
      await fake.restart({ empty: true });
      const snapshot = await recorder.snapshot(from);
      assert.equal(snapshot.resources.length, 0, 'the upstream answered empty: that is its state');
      assert.equal(snapshot.kinds?.size, 15);
    } finally {
      recorder.close();
      await fake.stop();
    }
  });

  it('serves what answered once the sync budget runs out, naming the type URLs that never did', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod', mute: new Set([VS_V1]) });
    fake
      .set('VirtualService', [fakeVirtualService('reviews')])
      .set('ServiceEntry', [se('cards', 'api.cards.example')]);
    // When exactly the budget runs out is checked on virtual time (runtime/source-timing.test.ts);
    // here a real upstream shows what is served then.
    const recorder = new SourceEventRecorder(source(fake.address, { syncTimeout: 400 }).events$);
    try {
      const snapshot = await recorder.snapshot();
      assert.match(
        snapshot.warnings.map((w) => w.message).join('\n'),
        /no answer within 400 ms for: networking\.istio\.io\/v1\/VirtualService/,
      );
      assert.deepEqual(servedKeys(recorder.events, SE), ['payments/cards']);
      await recorder.status('synced');
    } finally {
      recorder.close();
      await fake.stop();
    }
  });
});

describe('xds source authentication', () => {
  let dir: { dir: string; dispose: () => Promise<void> };
  let pki: UpstreamPki;
  before(async () => {
    dir = await tempDir();
    pki = await makeUpstreamPki(dir.dir);
  });
  after(() => dir.dispose());

  async function tlsUpstream(): Promise<FakeAdsServer> {
    // istiod asks for a client certificate but lets the handshake finish without one (Go's
    // VerifyClientCertIfGiven): the api generator, not TLS, refuses the stream.
    const provider = new grpc.experimental.FileWatcherCertificateProvider({
      certificateFile: pki.serverCert,
      privateKeyFile: pki.serverKey,
      caCertificateFile: pki.ca,
      refreshIntervalMs: 60_000,
    });
    const credentials = grpc.experimental.createCertificateProviderServerCredentials(
      provider,
      provider,
      false,
    );
    const fake = await FakeAdsServer.start({ peer: 'istiod', credentials, rootNamespace: 'istio-system' });
    // The provider reads its files in the background: a client that dials before it has them
    // fails the handshake (UNAVAILABLE), which is not what these tests are about.
    await until(() => tlsHandshakes(fake.address, pki.ca), 10_000, 'the upstream to serve TLS', {
      intervalMs: 20,
    });
    return fake.set('VirtualService', [fakeVirtualService('reviews')]);
  }

  it('syncs over mTLS with a client certificate in the root namespace', async () => {
    const fake = await tlsUpstream();
    const recorder = new SourceEventRecorder(
      source(fake.address, {
        tls: { ca: pki.ca, cert: pki.rootClientCert, key: pki.rootClientKey, serverName: 'localhost' },
      }).events$,
    );
    try {
      await recorder.status('synced');
      assert.deepEqual(servedKeys(recorder.events, VS), ['shop/reviews']);
    } finally {
      recorder.close();
      await fake.stop();
    }
  });

  for (const [what, tls, code] of [
    [
      'without a client certificate',
      (p: UpstreamPki) => ({ ca: p.ca, serverName: 'localhost' }),
      'UNAUTHENTICATED',
    ],
    [
      'with an identity outside the root namespace',
      (p: UpstreamPki) => ({
        ca: p.ca,
        cert: p.otherClientCert,
        key: p.otherClientKey,
        serverName: 'localhost',
      }),
      'PERMISSION_DENIED',
    ],
  ] as const) {
    it(`reports an upstream refusing a client ${what} as failing with a clear error, retried with growing delays`, async () => {
      const fake = await tlsUpstream();
      const recorder = new SourceEventRecorder(
        source(fake.address, { tls: tls(pki), reconnect: { initialDelay: 40, maxDelay: 5_000 } }).events$,
      );
      try {
        const failing = (await recorder.next(
          (e) => e.type === 'status' && e.state === 'failing',
        )) as SourceStatusEvent;
        assert.equal(failing.error?.code, 'PERMISSION_DENIED');
        assert.match(failing.error?.message ?? '', new RegExp(`${code}.*set tls\\.cert and tls\\.key`));
        await fake.waitFor(() => fake.streams >= 6, 10_000, 'six attempts');
        const at = fake.streamOpenedAt;
        const gaps = at.slice(1, 6).map((t, i) => t - (at[i] ?? t));
        // 40 ms ×1.5 per attempt, ±50 %: at least half of 40+60+90+135+202 ms in all, and growing.
        assert.ok(
          gaps.reduce((a, b) => a + b, 0) >= 263,
          `not retried hot: ${gaps.map(Math.round).join(', ')}`,
        );
        assert.ok((gaps[4] ?? 0) > (gaps[0] ?? 0), `the delay grows: ${gaps.map(Math.round).join(', ')}`);
        assert.ok(!recorder.events.some((e) => e.type === 'snapshot'));
      } finally {
        recorder.close();
        await fake.stop();
      }
    });
  }

  it('reports a plaintext client refused by an authenticating istiod, and says how to fix it', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod', rootNamespace: 'istio-system' });
    const recorder = new SourceEventRecorder(source(fake.address).events$);
    try {
      const failing = await recorder.status('failing');
      assert.match(failing.error?.message ?? '', /UNAUTHENTICATED.*mTLS.*root namespace/);
    } finally {
      recorder.close();
      await fake.stop();
    }
  });
});

describe('xds source against other peers', () => {
  it('reads Nacos: only the v1alpha3 ServiceEntry holds objects, MeshConfig is never asked for', async () => {
    const fake = await FakeAdsServer.start({ peer: 'nacos' });
    fake.set('ServiceEntry', [se('foo.DEFAULT-GROUP.public', 'foo.DEFAULT-GROUP.publicnacos', 'public')]);
    const recorder = new SourceEventRecorder(source(fake.address).events$);
    try {
      await recorder.status('synced');
      assert.deepEqual(servedKeys(recorder.events, SE), ['public/foo.DEFAULT-GROUP.public']);
      await fake.waitFor(
        () => fake.requests.some((r) => r.typeUrl === SE_V1ALPHA3 && r.nonce !== ''),
        5_000,
        'an ACK',
      );
    } finally {
      recorder.close();
      await fake.stop();
    }
  });

  it('reads Nacos over delta ADS: bare ServiceEntries named after their host, removals by host', async () => {
    const fake = await FakeAdsServer.start({ peer: 'nacos' });
    fake.set('ServiceEntry', [
      se('a', 'a.DEFAULT-GROUP.public.nacos'),
      se('b', 'b.DEFAULT-GROUP.public.nacos'),
    ]);
    const recorder = new SourceEventRecorder(
      source(fake.address, { delta: true, kinds: ['ServiceEntry'], namespace: 'nacos' }).events$,
    );
    try {
      await recorder.status('synced');
      assert.deepEqual(servedKeys(recorder.events, SE), [
        'nacos/a.DEFAULT-GROUP.public.nacos',
        'nacos/b.DEFAULT-GROUP.public.nacos',
      ]);
      const deltaRequests = fake.requests.filter((r) => r.delta && r.nonce === '');
      assert.deepEqual(
        deltaRequests.map((r) => r.typeUrl),
        ['networking.istio.io/v1/ServiceEntry', SE_V1ALPHA3],
      );
      assert.ok(
        deltaRequests.every((r) => r.resourceNames.length === 0),
        'wildcard without `*`',
      );
      const from = recorder.count;
      fake.set('ServiceEntry', [se('b', 'b.DEFAULT-GROUP.public.nacos')]).push();
      await recorder.next((e) => e.type === 'snapshot', from);
      assert.deepEqual(servedKeys(recorder.events, SE), ['nacos/b.DEFAULT-GROUP.public.nacos']);
      await fake.waitFor(
        () => fake.requests.filter((r) => r.delta && r.nonce !== '').length >= 4,
        5_000,
        'ACKs',
      );
      assert.ok(fake.requests.every((r) => r.errorDetail === null));
    } finally {
      recorder.close();
      await fake.stop();
    }
  });

  it('absorbs Higress: objects without metadata.version get the same content versions as from istiod, field 100 is reported', async () => {
    const higress = await FakeAdsServer.start({ peer: 'higress' });
    const istiod = await FakeAdsServer.start({ peer: 'istiod' });
    higress.set('VirtualService', [fakeVirtualService('reviews')]);
    istiod.set('VirtualService', [fakeVirtualService('reviews')]);
    const fromHigress = new SourceEventRecorder(
      source(higress.address, { kinds: ['VirtualService'] }).events$,
    );
    const fromIstiod = new SourceEventRecorder(source(istiod.address, { kinds: ['VirtualService'] }).events$);
    try {
      const h = await fromHigress.snapshot();
      const i = await fromIstiod.snapshot();
      const hv = h.resources.at(0);
      assert.ok(hv !== undefined && hv.version.length > 0);
      assert.equal(hv.origin.upstreamVersion, undefined);
      assert.equal(hv.version, i.resources.at(0)?.version, 'content versions do not depend on the peer');
      assert.match(h.warnings.map((w) => w.message).join('\n'), /1 objects carried fields .* \(100\)/);
      assert.deepEqual(h.errors, []);
    } finally {
      fromHigress.close();
      fromIstiod.close();
      await higress.stop();
      await istiod.stop();
    }
  });

  it('serves an istiod ≤1.23 from the legacy spelling, and asks only for what apiVersions names', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod', serves: 'legacy' });
    fake.set('VirtualService', [fakeVirtualService('reviews')]);
    const auto = new SourceEventRecorder(source(fake.address, { kinds: ['VirtualService'] }).events$);
    const pinned = new SourceEventRecorder(
      source(fake.address, {
        kinds: ['VirtualService', 'Sidecar'],
        apiVersions: { VirtualService: 'v1alpha3', default: 'current' },
      }).events$,
    );
    try {
      await auto.status('synced');
      await pinned.status('synced');
      assert.deepEqual(servedKeys(auto.events, VS), ['shop/reviews']);
      assert.deepEqual(servedKeys(pinned.events, VS), ['shop/reviews']);
      const pinnedStream = Math.max(...fake.requests.map((r) => r.stream));
      assert.deepEqual(
        fake.requests.filter((r) => r.stream === pinnedStream && r.nonce === '').map((r) => r.typeUrl),
        ['networking.istio.io/v1/Sidecar', VS_V1ALPHA3],
      );
    } finally {
      auto.close();
      pinned.close();
      await fake.stop();
    }
  });

  it('sends the configured node id, metadata and revision', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod' });
    const recorder = new SourceEventRecorder(
      source(fake.address, {
        kinds: ['Sidecar'],
        node: { id: 'meshmux~1', metadata: { CLUSTER_ID: 'east' }, revision: 'canary' },
      }).events$,
    );
    try {
      await recorder.status('synced');
      const fields = fake.requests[0]?.node?.metadata?.fields ?? {};
      assert.equal(fake.requests[0]?.node?.id, 'meshmux~1');
      assert.deepEqual(Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, v.stringValue])), {
        GENERATOR: 'api',
        ISTIO_VERSION: '65536.65536.65536',
        CLUSTER_ID: 'east',
        ISTIO_REVISION: 'canary',
      });
    } finally {
      recorder.close();
      await fake.stop();
    }
  });

  it('refuses unknown kinds and versions at construction', () => {
    assert.throws(() => source('127.0.0.1:1', { kinds: ['Deployment'] }), /unknown kind "Deployment"/);
    assert.throws(
      () => source('127.0.0.1:1', { apiVersions: { EnvoyFilter: 'v1' } }),
      /EnvoyFilter has no version "v1"/,
    );
    assert.equal(KINDS.kinds.length, 15);
  });
});

describe('xds source limits', () => {
  it('accepts a response larger than gRPC’s 4 MiB default, as istiod does', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod' });
    const padding = 'x'.repeat(2_000);
    fake.set(
      'VirtualService',
      Array.from({ length: 2_500 }, (_, i) => fakeVirtualService(`vs-${i}`, `h${i}.${padding}`)),
    );
    const recorder = new SourceEventRecorder(source(fake.address, { kinds: ['VirtualService'] }).events$);
    try {
      const snapshot = await recorder.snapshot();
      assert.equal(snapshot.resources.length, 2_500);
      assert.ok((fake.sent.find((s) => s.typeUrl === VS_V1)?.resources ?? 0) === 2_500);
    } finally {
      recorder.close();
      await fake.stop();
    }
  });

  it('turns a source stale when its upstream sends a response over maxReceiveSize, naming the limit, and keeps what it served', async () => {
    const fake = await FakeAdsServer.start({ peer: 'istiod' });
    fake.set('VirtualService', [fakeVirtualService('small')]);
    const recorder = new SourceEventRecorder(
      source(fake.address, {
        kinds: ['VirtualService'],
        maxReceiveSize: 64 * 1024,
        reconnect: { initialDelay: 50, maxDelay: 400 },
      }).events$,
    );
    try {
      await recorder.status('synced');
      const from = recorder.count;
      const padding = 'x'.repeat(2_000);
      fake
        .set(
          'VirtualService',
          Array.from({ length: 100 }, (_, i) => fakeVirtualService(`vs-${i}`, `h${i}.${padding}`)),
        )
        .push();
      const stale = (await recorder.next(
        (e) => e.type === 'status' && e.state === 'stale' && e.error !== undefined,
        from,
      )) as SourceStatusEvent;
      assert.match(stale.error?.message ?? '', /RESOURCE_EXHAUSTED.*over maxReceiveSize \(65536 bytes\)/);
      assert.ok(
        !recorder.events.slice(from).some((e) => e.type === 'snapshot'),
        'nothing of the refused response was applied',
      );
      assert.deepEqual(servedKeys(recorder.events, VS), ['shop/small']);
    } finally {
      recorder.close();
      await fake.stop();
    }
  });
});
