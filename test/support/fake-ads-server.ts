/**
 * A fake MCP-over-xDS server built from our protos, behaving like a peer of spec §2 and §6 as far
 * as meshmux can tell:
 *
 * - `istiod`: the api generator. Answers every type URL; objects only under the spelling it serves
 *   (v1 for ≥1.24, the legacy one for ≤1.23), an empty list for any other; `version_info` =
 *   `<RFC3339>/<push>`, `metadata.version` = a resourceVersion that changes with content; full
 *   state of every watched type on every push; NACKs and ACKs get no answer; optionally refuses
 *   streams without an mTLS identity in its root namespace.
 * - `nacos`: only `networking.istio.io/v1alpha3/ServiceEntry` holds objects, MeshConfig is never
 *   answered, any other type gets an empty list; create_time in whole seconds; also serves delta,
 *   where ServiceEntries travel bare (no envelope, no name) and removals name the first host.
 * - `higress`: like istiod ≥1.24 but never sets `metadata.version` and appends field 100 (JSON)
 *   to every `istio.mcp.v1alpha1.Resource`.
 *
 * It records every request it received, so tests can check ACKs, NACKs and nodes.
 */
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { KINDS, MESH_CONFIG_KIND } from '../../src/schema/kinds.js';
import { anyTypeUrl, messageType } from '../../src/schema/proto-root.js';
import { encodeAny, encodeBody, encodeMcpResource, kindNamed, type FakeObject } from './fake-objects.js';
import { FakeStore } from './fake-store.js';
import { rawBidiMethod } from './raw-grpc-method.js';
import { SE_LEGACY } from './type-urls.js';
import { Waitable } from './waitable.js';

const DISCOVERY_REQUEST = messageType('envoy.service.discovery.v3.DiscoveryRequest');
const DELTA_REQUEST = messageType('envoy.service.discovery.v3.DeltaDiscoveryRequest');
const MCP_RESOURCE_TYPE_URL = anyTypeUrl('istio.mcp.v1alpha1.Resource');
const MESH_CONFIG_TYPE_URL = `${MESH_CONFIG_KIND.group}/${MESH_CONFIG_KIND.currentVersion}/${MESH_CONFIG_KIND.kind}`;

/** Which peer a {@link FakeAdsServer} behaves like. */
export type AdsPeer = 'istiod' | 'nacos' | 'higress';

/** Which spelling of a kind's type URL a fake istiod answers with its objects. */
export type Spelling = 'current' | 'legacy' | 'both';

export interface FakeAdsServerOptions {
  readonly peer: AdsPeer;
  /**
   * istiod: the spelling it serves. Default `current` (istiod ≥1.24); `both` answers either with
   * the same objects, as a meshmux upstream does.
   */
  readonly serves?: Spelling;
  /** Server TLS; default plaintext. */
  readonly credentials?: grpc.ServerCredentials;
  /**
   * istiod with ENABLE_XDS_API_GENERATOR_AUTH: streams without a client certificate end with
   * UNAUTHENTICATED, and with one outside this namespace (SPIFFE URI SAN) with PERMISSION_DENIED.
   */
  readonly rootNamespace?: string;
  /** Type URLs this server never answers (to test sync budgets); changeable later through `mute`. */
  readonly mute?: ReadonlySet<string>;
}

/** One response a server sent. */
export interface SentResponse {
  readonly stream: number;
  readonly typeUrl: string;
  readonly versionInfo: string;
  readonly nonce: string;
  readonly resources: number;
}

/** One request as the server decoded it. */
export interface RecordedRequest {
  readonly stream: number;
  readonly delta: boolean;
  readonly typeUrl: string;
  readonly nonce: string;
  readonly versionInfo: string;
  readonly resourceNames: readonly string[];
  readonly node: { id?: string; metadata?: { fields?: Record<string, { stringValue?: string }> } } | null;
  readonly errorDetail: { code?: number; message?: string } | null;
}

interface SotwStream {
  readonly id: number;
  readonly call: grpc.ServerDuplexStream<Buffer, Uint8Array>;
  readonly watched: Map<string, { nonce: string }>;
}

interface DeltaStream {
  readonly id: number;
  readonly call: grpc.ServerDuplexStream<Buffer, Uint8Array>;
  readonly watched: Map<string, { nonce: string; sentHosts: Set<string> }>;
}

/** A fake MCP-over-xDS server (SotW and, for Nacos, delta ADS). */
export class FakeAdsServer extends Waitable {
  readonly store = new FakeStore();
  /** Every request received, in order. */
  readonly requests: RecordedRequest[] = [];
  /** Every SotW response sent, in order. */
  readonly sent: SentResponse[] = [];
  /** Times (performance.now()) at which streams were opened. */
  readonly streamOpenedAt: number[] = [];
  /** Type URLs never answered from now on. */
  mute: ReadonlySet<string>;
  private server: grpc.Server | undefined;
  private readonly sotw = new Set<SotwStream>();
  private readonly delta = new Set<DeltaStream>();
  private streamCount = 0;
  private pushCount = 0;
  private port = 0;

  /** The spelling answered with objects (see {@link FakeAdsServerOptions.serves}); for the next responses. */
  serves: Spelling;

  private constructor(private readonly options: FakeAdsServerOptions) {
    super();
    this.serves = options.serves ?? 'current';
    this.mute = options.mute ?? new Set();
  }

  /** Starts listening on 127.0.0.1 (port 0 picks one). */
  static async start(options: FakeAdsServerOptions, port = 0): Promise<FakeAdsServer> {
    const fake = new FakeAdsServer(options);
    await fake.listen(port);
    return fake;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Streams currently open. */
  get openStreams(): number {
    return this.sotw.size + this.delta.size;
  }

  /** Streams opened so far. */
  get streams(): number {
    return this.streamCount;
  }

  /** Replaces the objects of a kind (takes effect with the next response or `push()`). */
  set(kindName: string, objects: readonly FakeObject[]): this {
    this.store.set(kindName, objects);
    return this;
  }

  /** Sends the full state of every watched type on every stream, as istiod does on any config change. */
  push(): void {
    this.pushCount++;
    for (const s of this.sotw) for (const typeUrl of s.watched.keys()) this.respond(s, typeUrl);
    for (const s of this.delta) for (const typeUrl of s.watched.keys()) this.respondDelta(s, typeUrl);
  }

  /** Sends the full state of one type URL on every SotW stream that watches it. */
  pushType(typeUrl: string): void {
    this.pushCount++;
    for (const s of this.sotw) if (s.watched.has(typeUrl)) this.respond(s, typeUrl);
  }

  /** Writes raw bytes as one message on every SotW stream. */
  sendRaw(bytes: Uint8Array): void {
    for (const s of this.sotw) s.call.write(bytes);
  }

  /** Ends every open stream with UNAVAILABLE, keeping the server up (a mid-stream disconnect). */
  disconnectAll(): void {
    for (const s of [...this.sotw, ...this.delta]) {
      s.call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'fake upstream dropped the stream' });
    }
    this.sotw.clear();
    this.delta.clear();
    this.notify();
  }

  /** Stops the server, killing every stream. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.sotw.clear();
    this.delta.clear();
    server?.forceShutdown();
    await Promise.resolve();
    this.notify();
  }

  /** Stops and starts again on the same port; `empty` forgets every object (a restart that lost its state). */
  async restart(options: { empty?: boolean } = {}): Promise<void> {
    await this.stop();
    if (options.empty === true) this.store.clear();
    await this.listen(this.port);
  }

  /** The requests of one type URL that carried the given nonce. */
  requestsFor(typeUrl: string): RecordedRequest[] {
    return this.requests.filter((r) => r.typeUrl === typeUrl);
  }

  private async listen(port: number): Promise<void> {
    const server = new grpc.Server({ 'grpc.keepalive_permit_without_calls': 1 });
    server.addService(
      {
        StreamAggregatedResources: rawBidiMethod(
          '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources',
        ),
        DeltaAggregatedResources: rawBidiMethod(
          '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources',
        ),
      },
      {
        StreamAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Uint8Array>) => this.onSotw(call),
        DeltaAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Uint8Array>) => this.onDelta(call),
      },
    );
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(
        `127.0.0.1:${port}`,
        this.options.credentials ?? grpc.ServerCredentials.createInsecure(),
        (err, p) => (err ? reject(err) : resolve(p)),
      ),
    );
    this.server = server;
  }

  /** istiod's api-generator authorization, when configured. */
  private refuse(call: grpc.ServerDuplexStream<Buffer, Uint8Array>): boolean {
    const root = this.options.rootNamespace;
    if (root === undefined) return false;
    const cert = call.getAuthContext().sslPeerCertificate;
    const san = cert?.subjectaltname ?? '';
    if (cert === undefined || san === '') {
      call.emit('error', {
        code: grpc.status.UNAUTHENTICATED,
        details: 'authentication failure: no verified identity',
      });
      return true;
    }
    if (!san.includes(`spiffe://cluster.local/ns/${root}/`)) {
      call.emit('error', {
        code: grpc.status.PERMISSION_DENIED,
        details: `identity ${san} is not in the root namespace ${root}`,
      });
      return true;
    }
    return false;
  }

  private onSotw(call: grpc.ServerDuplexStream<Buffer, Uint8Array>): void {
    const stream: SotwStream = { id: ++this.streamCount, call, watched: new Map() };
    this.streamOpenedAt.push(performance.now());
    this.sotw.add(stream);
    let first = true;
    const gone = (): void => {
      this.sotw.delete(stream);
      this.notify();
    };
    call.on('error', gone);
    call.on('cancelled', gone);
    call.on('end', () => {
      gone();
      call.end();
    });
    call.on('data', (bytes: Buffer) => {
      const req = DISCOVERY_REQUEST.toObject(DISCOVERY_REQUEST.decode(bytes), {
        defaults: true,
        arrays: true,
      }) as {
        type_url: string;
        response_nonce: string;
        version_info: string;
        resource_names: string[];
        node: RecordedRequest['node'];
        error_detail: RecordedRequest['errorDetail'];
      };
      this.requests.push({
        stream: stream.id,
        delta: false,
        typeUrl: req.type_url,
        nonce: req.response_nonce,
        versionInfo: req.version_info,
        resourceNames: req.resource_names,
        node: req.node,
        errorDetail: req.error_detail,
      });
      if (first) {
        first = false;
        if (this.refuse(call)) {
          this.sotw.delete(stream);
          this.notify();
          return;
        }
      }
      // A stream this server ended answers nothing more (grpc-js would hold back its status).
      if (!this.sotw.has(stream)) return;
      const watch = stream.watched.get(req.type_url);
      // Nacos skips MeshConfig "for the istio bug"; NACKs get no answer from either.
      if (this.options.peer === 'nacos' && req.type_url === MESH_CONFIG_TYPE_URL) {
        this.notify();
        return;
      }
      if (req.error_detail !== null) {
        this.notify();
        return;
      }
      if (req.response_nonce === '' || watch === undefined) {
        stream.watched.set(req.type_url, { nonce: '' });
        this.respond(stream, req.type_url);
      }
      // Otherwise an ACK (or a stale nonce): no answer.
      this.notify();
    });
  }

  private onDelta(call: grpc.ServerDuplexStream<Buffer, Uint8Array>): void {
    if (this.options.peer !== 'nacos') {
      call.emit('error', { code: grpc.status.UNIMPLEMENTED, details: 'delta is not served here' });
      return;
    }
    const stream: DeltaStream = { id: ++this.streamCount, call, watched: new Map() };
    this.streamOpenedAt.push(performance.now());
    this.delta.add(stream);
    const gone = (): void => {
      this.delta.delete(stream);
      this.notify();
    };
    call.on('error', gone);
    call.on('cancelled', gone);
    call.on('end', () => {
      gone();
      call.end();
    });
    call.on('data', (bytes: Buffer) => {
      const req = DELTA_REQUEST.toObject(DELTA_REQUEST.decode(bytes), { defaults: true, arrays: true }) as {
        type_url: string;
        response_nonce: string;
        resource_names_subscribe: string[];
        node: RecordedRequest['node'];
        error_detail: RecordedRequest['errorDetail'];
      };
      this.requests.push({
        stream: stream.id,
        delta: true,
        typeUrl: req.type_url,
        nonce: req.response_nonce,
        versionInfo: '',
        resourceNames: req.resource_names_subscribe,
        node: req.node,
        errorDetail: req.error_detail,
      });
      if (!this.delta.has(stream)) return;
      if (req.type_url !== MESH_CONFIG_TYPE_URL && req.response_nonce === '') {
        stream.watched.set(req.type_url, { nonce: '', sentHosts: new Set() });
        this.respondDelta(stream, req.type_url);
      }
      this.notify();
    });
  }

  /** The encoded resources of a type URL as this peer would answer it; undefined: no answer at all. */
  private resourcesFor(typeUrl: string): Uint8Array[] | undefined {
    if (this.mute.has(typeUrl)) return undefined;
    if (typeUrl === MESH_CONFIG_TYPE_URL) {
      return [encodeAny(anyTypeUrl(MESH_CONFIG_KIND.bodyType), new Uint8Array())];
    }
    const resolved = KINDS.resolveTypeUrl(typeUrl);
    if (resolved === undefined) return [];
    const { kind, version } = resolved;
    const peer = this.options.peer;
    const served =
      peer === 'nacos'
        ? typeUrl === SE_LEGACY
        : this.serves === 'both' ||
          version === (this.serves === 'legacy' ? kind.legacyVersion : kind.currentVersion);
    if (!served) return [];
    return this.store.objects(kind).map((s) =>
      encodeAny(
        MCP_RESOURCE_TYPE_URL,
        encodeMcpResource(kind, s.object, {
          ...(peer === 'higress' ? {} : { version: s.resourceVersion }),
          createTime: s.createTime,
          extra100: peer === 'higress',
        }),
      ),
    );
  }

  private respond(stream: SotwStream, typeUrl: string): void {
    const resources = this.resourcesFor(typeUrl);
    if (resources === undefined) return;
    const version = `${new Date().toISOString()}/${this.pushCount}`;
    const nonce = `${version}-${randomUUID()}`;
    const w = protobuf.Writer.create();
    w.uint32((1 << 3) | 2).string(version);
    for (const r of resources) w.uint32((2 << 3) | 2).bytes(r);
    w.uint32((4 << 3) | 2).string(typeUrl);
    w.uint32((5 << 3) | 2).string(nonce);
    const watch = stream.watched.get(typeUrl);
    if (watch !== undefined) watch.nonce = nonce;
    this.sent.push({ stream: stream.id, typeUrl, versionInfo: version, nonce, resources: resources.length });
    stream.call.write(w.finish());
  }

  /** Nacos's delta answer: bare ServiceEntries without names; removals name the first host. */
  private respondDelta(stream: DeltaStream, typeUrl: string): void {
    const watch = stream.watched.get(typeUrl);
    if (watch === undefined) return;
    const version = `${new Date().toISOString()}/${this.pushCount}`;
    const nonce = randomUUID();
    const w = protobuf.Writer.create();
    w.uint32((1 << 3) | 2).string(version);
    const hosts = new Set<string>();
    if (typeUrl === SE_LEGACY) {
      const kind = kindNamed('ServiceEntry');
      for (const s of this.store.objects(kind)) {
        const host = (s.object.spec['hosts'] as string[] | undefined)?.[0] ?? '';
        hosts.add(host);
        const resource = protobuf.Writer.create()
          .uint32((1 << 3) | 2)
          .string(version)
          .uint32((2 << 3) | 2)
          .bytes(encodeAny(anyTypeUrl(kind.bodyType), encodeBody(kind, s.object.spec)))
          .finish();
        w.uint32((2 << 3) | 2).bytes(resource);
      }
    }
    w.uint32((4 << 3) | 2).string(typeUrl);
    for (const gone of watch.sentHosts) if (!hosts.has(gone)) w.uint32((6 << 3) | 2).string(gone);
    w.uint32((5 << 3) | 2).string(nonce);
    watch.nonce = nonce;
    watch.sentHosts = hosts;
    stream.call.write(w.finish());
  }
}
