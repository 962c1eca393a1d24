import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { KINDS } from '../src/schema/kinds.js';
import { anyTypeUrl, messageType } from '../src/schema/proto-root.js';
import {
  ADS_SERVICE,
  nodeMetadataStrings,
  type AdsServerStream,
  type AnyMessage,
  type DiscoveryRequest,
} from './support/ads-wire.js';
import {
  DEFAULT_NODE_ID,
  IstiodClient,
  MESH_CONFIG_TYPE_URL,
  type IstiodClientOptions,
} from './support/istiod-client.js';
import { within } from './support/deadline.js';
import { SE, VS } from './support/type-urls.js';

const VS_BODY = 'istio.networking.v1alpha3.VirtualService';
const MCP_RESOURCE = messageType('istio.mcp.v1alpha1.Resource');
const INITIAL_REQUESTS = 1 + KINDS.currentTypeUrls().length;
const WAIT_MS = 5_000;
/** Go's `time.Now().String()`, as adsc stamps initial requests. */
const GO_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,9})? \+0000 UTC m=\+\d+\.\d{9}$/;

/** Items that arrive over time, awaitable by index. */
class Arrivals<T> {
  private readonly items: T[] = [];
  private readonly waiting = new Map<number, ((item: T) => void)[]>();

  push(item: T): void {
    const index = this.items.push(item) - 1;
    for (const resolve of this.waiting.get(index) ?? []) resolve(item);
    this.waiting.delete(index);
  }

  /** The item at `index`, once it has arrived; rejects after `timeoutMs`. */
  at(index: number, timeoutMs = 10_000): Promise<T> {
    const item = this.items[index];
    if (item !== undefined) return Promise.resolve(item);
    const arrived = new Promise<T>((resolve) => {
      this.waiting.set(index, [...(this.waiting.get(index) ?? []), resolve]);
    });
    return within(arrived, timeoutMs, `item ${index} to arrive (${this.items.length} so far)`);
  }

  get length(): number {
    return this.items.length;
  }

  all(): readonly T[] {
    return this.items;
  }
}

/** One ADS stream as the fake server sees it. */
class FakeStream {
  readonly requests = new Arrivals<DiscoveryRequest>();
  private sent = 0;

  constructor(private readonly call: AdsServerStream) {
    call.on('data', (req: DiscoveryRequest) => this.requests.push(req));
    call.on('error', () => undefined);
  }

  /** Sends a response and returns its nonce. */
  respond(typeUrl: string, resources: readonly AnyMessage[], versionInfo = 'v1'): string {
    const nonce = `nonce-${++this.sent}`;
    this.call.write({ type_url: typeUrl, version_info: versionInfo, nonce, resources });
    return nonce;
  }

  /** The `n` initial requests, once all have arrived. */
  async initialRequests(n = INITIAL_REQUESTS): Promise<readonly DiscoveryRequest[]> {
    await this.requests.at(n - 1);
    return this.requests.all().slice(0, n);
  }

  /** Ends the stream with an error status. */
  fail(code: grpc.status, details: string): void {
    this.call.emit('error', { code, details });
  }
}

/** A real gRPC server on 127.0.0.1:0 that lets the test script every response. */
class FakeAdsServer {
  readonly streams = new Arrivals<FakeStream>();
  private readonly server = new grpc.Server();

  async listen(): Promise<string> {
    this.server.addService(ADS_SERVICE, {
      StreamAggregatedResources: (call: AdsServerStream) => this.streams.push(new FakeStream(call)),
    });
    const port = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err === null ? resolve(p) : reject(err),
      );
    });
    return `127.0.0.1:${port}`;
  }

  close(): void {
    this.server.forceShutdown();
  }
}

interface Fixture {
  readonly server: FakeAdsServer;
  readonly client: IstiodClient;
  /** The client's first stream. */
  readonly stream: FakeStream;
}

async function withClient(
  options: Omit<IstiodClientOptions, 'address'>,
  body: (fx: Fixture) => Promise<void>,
): Promise<void> {
  const server = new FakeAdsServer();
  const address = await server.listen();
  const client = new IstiodClient({ address, ...options }).start();
  try {
    await body({ server, client, stream: await server.streams.at(0) });
  } finally {
    client.close();
    server.close();
  }
}

interface ResourceSpec {
  readonly name: string;
  readonly version?: string;
  readonly hosts?: readonly string[];
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
  readonly createTime?: { seconds: number; nanos: number } | null;
  readonly bodyType?: string;
  readonly envelopeType?: string;
}

/** An MCP resource Any as the "api" generator builds it, with knobs to break it. */
function mcp(spec: ResourceSpec): AnyMessage {
  const bodyType = spec.bodyType ?? VS_BODY;
  const bodyMessage = messageType(VS_BODY);
  const body = bodyMessage
    .encode(bodyMessage.fromObject({ hosts: spec.hosts ?? [`${spec.name}.example.com`] }))
    .finish();
  const createTime = spec.createTime === undefined ? { seconds: 1_700_000_000, nanos: 0 } : spec.createTime;
  const resource = MCP_RESOURCE.fromObject({
    metadata: {
      name: spec.name,
      version: spec.version ?? '1',
      labels: spec.labels ?? {},
      annotations: spec.annotations ?? {},
      ...(createTime === null ? {} : { create_time: createTime }),
    },
    body: { type_url: anyTypeUrl(bodyType), value: body },
  });
  return {
    type_url: spec.envelopeType ?? anyTypeUrl('istio.mcp.v1alpha1.Resource'),
    value: MCP_RESOURCE.encode(resource).finish(),
  };
}

function meshConfigAny(rootNamespace: string): AnyMessage {
  const mesh = messageType('istio.mesh.v1alpha1.MeshConfig');
  return {
    type_url: anyTypeUrl('istio.mesh.v1alpha1.MeshConfig'),
    value: mesh.encode(mesh.fromObject({ root_namespace: rootNamespace })).finish(),
  };
}

test(
  'opens with a MeshConfig request then one per current type URL, each with a Go timestamp nonce, no version, no names, and the node on the first only',
  { timeout: 10_000 },
  () =>
    withClient({}, async ({ stream }) => {
      const requests = await stream.initialRequests();
      assert.deepEqual(
        requests.map((r) => r.type_url),
        [MESH_CONFIG_TYPE_URL, ...KINDS.currentTypeUrls()],
      );
      assert.ok(requests.some((r) => r.type_url === 'extensions.istio.io/v1alpha1/TrafficExtension'));
      for (const r of requests) {
        assert.match(r.response_nonce, GO_TIME);
        assert.equal(r.version_info, '');
        assert.deepEqual(r.resource_names, []);
        assert.equal(r.error_detail, null);
      }
      const [first, ...rest] = requests;
      assert.equal(first?.node?.id, DEFAULT_NODE_ID);
      assert.deepEqual(nodeMetadataStrings(first?.node ?? null), {
        GENERATOR: 'api',
        ISTIO_VERSION: '65536.65536.65536',
      });
      assert.ok(rest.every((r) => r.node === null));
    }),
);

test(
  'requests the 1.9–1.23 type URL spellings when release is legacy and announces its revision in the node metadata',
  { timeout: 10_000 },
  () =>
    withClient({ release: 'legacy', revision: 'canary' }, async ({ stream }) => {
      const requests = await stream.initialRequests();
      assert.deepEqual(
        requests.map((r) => r.type_url),
        [MESH_CONFIG_TYPE_URL, ...KINDS.legacyTypeUrls()],
      );
      assert.ok(requests.some((r) => r.type_url === 'networking.istio.io/v1alpha3/VirtualService'));
      assert.equal(nodeMetadataStrings(requests[0]?.node ?? null)['ISTIO_REVISION'], 'canary');
    }),
);

test(
  'ACKs a config response with its nonce and version_info, the full node and no resource names',
  { timeout: 10_000 },
  () =>
    withClient({}, async ({ client, stream }) => {
      await stream.initialRequests();
      const nonce = stream.respond(VS, [mcp({ name: 'default/reviews' })], '2026-08-22T15:00:18Z/7');
      const ack = await stream.requests.at(INITIAL_REQUESTS);
      assert.equal(ack.type_url, VS);
      assert.equal(ack.response_nonce, nonce);
      assert.equal(ack.version_info, '2026-08-22T15:00:18Z/7');
      assert.deepEqual(ack.resource_names, []);
      assert.equal(ack.error_detail, null);
      assert.equal(ack.node?.id, DEFAULT_NODE_ID);
      assert.equal(nodeMetadataStrings(ack.node)['GENERATOR'], 'api');
      assert.deepEqual(client.acks, [
        { stream: 1, typeUrl: VS, versionInfo: '2026-08-22T15:00:18Z/7', nonce },
      ]);
      const stored = client.configs(VS).get('default/reviews');
      assert.equal(stored?.bodyType, VS_BODY);
      assert.deepEqual(stored.body, { hosts: ['default/reviews.example.com'] });
      assert.deepEqual(stored.createTime, { seconds: 1_700_000_000, nanos: 0 });
      assert.ok(client.bytesReceived > 0);
    }),
);

test('deletes the objects that a later response for the same type omits', { timeout: 10_000 }, () =>
  withClient({}, async ({ client, stream }) => {
    await stream.initialRequests();
    stream.respond(VS, [mcp({ name: 'default/a' }), mcp({ name: 'prod/b' })]);
    stream.respond(SE, [mcp({ name: 'default/a', bodyType: 'istio.networking.v1alpha3.ServiceEntry' })]);
    await client.waitFor((c) => c.responses.get(SE) === 1, WAIT_MS);
    assert.deepEqual([...client.configs(VS).keys()], ['default/a', 'prod/b']);
    const before = client.updates;

    stream.respond(VS, [mcp({ name: 'prod/b' })], 'v2');
    await client.waitFor((c) => c.responses.get(VS) === 2, WAIT_MS);
    assert.deepEqual([...client.configs(VS).keys()], ['prod/b']);
    assert.equal(client.updates, before + 1);

    stream.respond(VS, [], 'v3');
    await client.waitFor((c) => c.responses.get(VS) === 3, WAIT_MS);
    assert.equal(client.configs(VS).size, 0);
    assert.equal(client.configs(SE).size, 1, 'other types are untouched');
  }),
);

test(
  'ignores an update that keeps a non-empty metadata.version and applies one with a new or empty version',
  { timeout: 10_000 },
  () =>
    withClient({}, async ({ client, stream }) => {
      await stream.initialRequests();
      stream.respond(VS, [mcp({ name: 'default/a', version: '1', hosts: ['old.example.com'] })]);
      await client.waitFor((c) => c.responses.get(VS) === 1, WAIT_MS);
      const afterCreate = client.updates;

      stream.respond(VS, [mcp({ name: 'default/a', version: '1', hosts: ['new.example.com'] })], 'v2');
      await client.waitFor((c) => c.responses.get(VS) === 2, WAIT_MS);
      assert.equal(client.updates, afterCreate);
      assert.deepEqual(client.configs(VS).get('default/a')?.body, { hosts: ['old.example.com'] });

      stream.respond(VS, [mcp({ name: 'default/a', version: '', hosts: ['new.example.com'] })], 'v3');
      await client.waitFor((c) => c.responses.get(VS) === 3, WAIT_MS);
      assert.equal(client.updates, afterCreate + 1);
      assert.deepEqual(client.configs(VS).get('default/a')?.body, { hosts: ['new.example.com'] });

      stream.respond(VS, [mcp({ name: 'default/a', version: '2', hosts: ['newer.example.com'] })], 'v4');
      await client.waitFor((c) => c.responses.get(VS) === 4, WAIT_MS);
      assert.equal(client.updates, afterCreate + 2);
      assert.equal(client.configs(VS).get('default/a')?.version, '2');
    }),
);

test(
  'never ACKs a MeshConfig response with resources nor counts it for sync, but ACKs an empty one',
  { timeout: 10_000 },
  () =>
    withClient({ release: [VS] }, async ({ client, stream }) => {
      await stream.initialRequests(2);
      stream.respond(MESH_CONFIG_TYPE_URL, [meshConfigAny('istio-config')]);
      await client.waitFor((c) => c.meshConfig !== undefined, WAIT_MS);
      assert.deepEqual(client.meshConfig, { root_namespace: 'istio-config' });
      assert.equal(client.synced(), false);

      // Requests on a stream arrive in the order sent, so the next one shows what came of the MeshConfig.
      stream.respond(VS, []);
      assert.equal((await stream.requests.at(2)).type_url, VS);
      assert.equal(client.synced(), true);

      const nonce = stream.respond(MESH_CONFIG_TYPE_URL, []);
      const ack = await stream.requests.at(3);
      assert.equal(ack.type_url, MESH_CONFIG_TYPE_URL);
      assert.equal(ack.response_nonce, nonce);
      assert.deepEqual(
        client.acks.map((a) => a.typeUrl),
        [VS, MESH_CONFIG_TYPE_URL],
      );
      assert.deepEqual(client.problems, []);
    }),
);

test(
  'flags and ACKs a response for a type URL it never requested, and stores nothing for it',
  { timeout: 10_000 },
  () =>
    withClient({}, async ({ client, stream }) => {
      const alias = 'networking.istio.io/v1alpha3/VirtualService';
      await stream.initialRequests();
      const nonce = stream.respond(alias, [mcp({ name: 'default/a' })]);
      const ack = await stream.requests.at(INITIAL_REQUESTS);
      assert.equal(ack.type_url, alias);
      assert.equal(ack.response_nonce, nonce);
      assert.deepEqual(
        client.problems.map((p) => [p.reason, p.typeUrl]),
        [['unrequested-type', alias]],
      );
      assert.equal(client.store.has(alias), false);
      assert.equal(client.synced(), false);
    }),
);

test('becomes synced only once every requested config type has been answered', { timeout: 10_000 }, () =>
  withClient({}, async ({ client, stream }) => {
    await stream.initialRequests();
    const [last, ...others] = [...KINDS.currentTypeUrls()].reverse();
    for (const typeUrl of others) stream.respond(typeUrl, []);
    await client.waitFor((c) => c.received.length === others.length, WAIT_MS);
    assert.equal(client.synced(), false);
    assert.deepEqual(client.unsyncedTypeUrls(), [last]);

    stream.respond(last ?? '', []);
    await client.waitForSync(WAIT_MS);
    assert.equal(client.synced(), true);
  }),
);

test(
  'waitForSync rejects naming the unanswered types when the server never answers them',
  { timeout: 10_000 },
  () =>
    withClient({ release: [VS, SE] }, async ({ client, stream }) => {
      await stream.initialRequests(3);
      stream.respond(VS, []);
      await assert.rejects(client.waitForSync(50), (err: Error) => {
        assert.match(err.message, /unanswered: networking\.istio\.io\/v1\/ServiceEntry$/);
        return true;
      });
    }),
);

test(
  'drops malformed resources as problems and keeps the valid ones of the same response',
  { timeout: 10_000 },
  () =>
    withClient({}, async ({ client, stream }) => {
      await stream.initialRequests();
      stream.respond(VS, [
        mcp({ name: 'default/good' }),
        mcp({ name: 'default/bare', envelopeType: anyTypeUrl(VS_BODY) }),
        mcp({ name: 'a/b/c' }),
        mcp({ name: 'no-namespace' }),
        mcp({ name: 'default/unknown-body', bodyType: 'istio.networking.v1alpha3.NoSuchThing' }),
        mcp({ name: 'default/wrong-body', bodyType: 'istio.networking.v1alpha3.Gateway' }),
        mcp({ name: 'default/no-create-time', createTime: null }),
        mcp({ name: 'default/internal', annotations: { 'internal.istio.io/parents': 'x' } }),
        mcp({ name: 'default/dry-run', annotations: { 'istio.io/dry-run': 'true' } }),
        mcp({ name: 'default/good', version: '2' }),
      ]);
      const ack = await stream.requests.at(INITIAL_REQUESTS);
      assert.equal(ack.type_url, VS, 'a response with bad resources is still ACKed');
      assert.equal(ack.error_detail, null);
      assert.deepEqual(
        client.problems.map((p) => [p.reason, p.resourceName]),
        [
          ['envelope', undefined],
          ['invalid-name', 'a/b/c'],
          ['invalid-name', 'no-namespace'],
          ['body', 'default/unknown-body'],
          ['body', 'default/wrong-body'],
          ['missing-create-time', 'default/no-create-time'],
          ['rejected-annotation', 'default/internal'],
          ['rejected-annotation', 'default/dry-run'],
          ['duplicate-name', 'default/good'],
        ],
      );
      assert.deepEqual([...client.configs(VS).keys()], ['default/good', 'default/no-create-time']);
      assert.equal(client.configs(VS).get('default/good')?.version, '2', 'the later duplicate is applied');
      assert.equal(client.configs(VS).get('default/no-create-time')?.createTime, undefined);
    }),
);

test(
  'drops objects without create_time when told to behave like istiod 1.13 and older',
  { timeout: 10_000 },
  () =>
    withClient({ release: [VS], requireCreateTime: true }, async ({ client, stream }) => {
      await stream.initialRequests(2);
      stream.respond(VS, [mcp({ name: 'default/a', createTime: null }), mcp({ name: 'default/b' })]);
      await client.waitForSync(WAIT_MS);
      assert.deepEqual([...client.configs(VS).keys()], ['default/b']);
    }),
);

test(
  'treats objects labelled for another revision as absent and keeps unlabelled ones',
  { timeout: 10_000 },
  () =>
    withClient({ release: [VS], revision: 'canary' }, async ({ client, stream }) => {
      await stream.initialRequests(2);
      stream.respond(VS, [
        mcp({ name: 'default/mine', labels: { 'istio.io/rev': 'canary' } }),
        mcp({ name: 'default/theirs', labels: { 'istio.io/rev': 'stable' } }),
        mcp({ name: 'default/anyones' }),
      ]);
      await client.waitForSync(WAIT_MS);
      assert.deepEqual([...client.configs(VS).keys()].sort(), ['default/anyones', 'default/mine']);

      stream.respond(VS, [
        mcp({ name: 'default/mine', version: '2', labels: { 'istio.io/rev': 'stable' } }),
        mcp({ name: 'default/anyones' }),
      ]);
      await client.waitFor((c) => c.responses.get(VS) === 2, WAIT_MS);
      assert.deepEqual([...client.configs(VS).keys()], ['default/anyones']);
    }),
);

test(
  'reconnects after the stream fails, resends the initial requests with fresh timestamp nonces and keeps its store until the type is answered again',
  { timeout: 10_000 },
  () =>
    withClient(
      { release: [VS, SE], backoff: { initialMs: 5, maxMs: 20 } },
      async ({ server, client, stream }) => {
        const firstRequests = await stream.initialRequests(3);
        stream.respond(VS, [mcp({ name: 'default/a' })]);
        stream.respond(SE, [mcp({ name: 'default/s', bodyType: 'istio.networking.v1alpha3.ServiceEntry' })]);
        await client.waitForSync(WAIT_MS);

        stream.fail(grpc.status.UNAVAILABLE, 'upstream restarting');
        const second = await server.streams.at(1);
        const secondRequests = await second.initialRequests(3);
        assert.deepEqual(
          secondRequests.map((r) => r.type_url),
          [MESH_CONFIG_TYPE_URL, VS, SE],
        );
        assert.equal(secondRequests[0]?.node?.id, DEFAULT_NODE_ID);
        assert.ok(secondRequests.slice(1).every((r) => r.node === null));
        for (const [i, r] of secondRequests.entries()) {
          assert.match(r.response_nonce, GO_TIME);
          assert.notEqual(r.response_nonce, firstRequests[i]?.response_nonce);
          assert.equal(r.version_info, '');
        }
        assert.deepEqual(client.streamEnds, [
          { stream: 1, code: grpc.status.UNAVAILABLE, details: 'upstream restarting' },
        ]);
        assert.equal(client.synced(), true, 'sync is never lost');
        assert.equal(client.configs(VS).size, 1, 'the store survives the disconnect');

        second.respond(VS, []);
        await client.waitFor((c) => c.responses.get(VS) === 2, WAIT_MS);
        assert.equal(client.configs(VS).size, 0);
        assert.equal(client.configs(SE).size, 1, 'types not yet answered keep their state');
        assert.equal(client.acks.at(-1)?.stream, 2);
      },
    ),
);
