/**
 * In-process upstream config servers built from our protos, each behaving like a peer of spec §2,
 * §4 and §6 as far as meshmux can tell:
 *
 * - {@link FakeAdsServer} `istiod`: the api generator. Answers every type URL; objects only under
 *   the spelling it serves (v1 for ≥1.24, the legacy one for ≤1.23), an empty list for any other;
 *   `version_info` = `<RFC3339>/<push>`, `metadata.version` = a resourceVersion that changes with
 *   content; full state of every watched type on every push; NACKs and ACKs get no answer;
 *   optionally refuses streams without an mTLS identity in its root namespace.
 * - `nacos`: only `networking.istio.io/v1alpha3/ServiceEntry` holds objects, MeshConfig is never
 *   answered, any other type gets an empty list; create_time in whole seconds; also serves delta,
 *   where ServiceEntries travel bare (no envelope, no name) and removals name the first host.
 * - `higress`: like istiod ≥1.24 but never sets `metadata.version` and appends field 100 (JSON)
 *   to every `istio.mcp.v1alpha1.Resource`.
 * - {@link FakeGalley}: a Galley-era `ResourceSource` (full state or incremental, nonces "1", "2",
 *   ..., an unknown collection closes the whole stream), and {@link GalleySinkPusher}, the same
 *   source dialing a `ResourceSink` after the empty-collection trigger.
 *
 * Every server records what it received, so tests can check ACKs, NACKs and nodes.
 */
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { KINDS, MESH_CONFIG_KIND, type KindDescriptor } from '../../src/schema/kinds.js';
import { anyTypeUrl, messageType } from '../../src/schema/proto-root.js';
import { rawBidiMethod, rawBytes, toBuffer } from './raw-grpc-method.js';

/** One object an upstream holds. `spec` is protobufjs `fromObject` input of the body (snake_case). */
export interface FakeObject {
  readonly namespace: string;
  readonly name: string;
  readonly spec: Record<string, unknown>;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  /** Default: when the object was first set, in whole seconds. `null`: sent without create_time. */
  readonly createTime?: { seconds: number; nanos: number } | null;
  /** Raw body bytes to send instead of encoding `spec` (to send garbage). */
  readonly rawBody?: Uint8Array;
}

const DISCOVERY_REQUEST = messageType('envoy.service.discovery.v3.DiscoveryRequest');
const DELTA_REQUEST = messageType('envoy.service.discovery.v3.DeltaDiscoveryRequest');
const REQUEST_RESOURCES = messageType('istio.mcp.v1alpha1.RequestResources');
const RESOURCES = messageType('istio.mcp.v1alpha1.Resources');

const MCP_RESOURCE_TYPE_URL = anyTypeUrl('istio.mcp.v1alpha1.Resource');
const MESH_CONFIG_TYPE_URL = `${MESH_CONFIG_KIND.group}/${MESH_CONFIG_KIND.currentVersion}/${MESH_CONFIG_KIND.kind}`;
const NACOS_SE_TYPE_URL = 'networking.istio.io/v1alpha3/ServiceEntry';

/** A registry kind by name (`VirtualService`) or key. */
export function kindNamed(name: string): KindDescriptor {
  const kind = KINDS.get(name) ?? KINDS.kinds.find((k) => k.kind === name);
  if (kind === undefined) throw new Error(`no kind ${name}`);
  return kind;
}

/** The encoded body message of a spec. */
export function encodeBody(kind: KindDescriptor, spec: Record<string, unknown>): Uint8Array {
  const type = messageType(kind.bodyType);
  return type.encode(type.fromObject(spec)).finish();
}

/** Field 100 of `istio.mcp.v1alpha1.Resource` as Higress appends it (its `config.Extra` as JSON). */
function higressExtra(): Uint8Array {
  return protobuf.Writer.create()
    .uint32((100 << 3) | 2)
    .string('{"source":"higress"}')
    .finish();
}

/** Encodes one `istio.mcp.v1alpha1.Resource`. */
export function encodeMcpResource(
  kind: KindDescriptor,
  object: FakeObject,
  options: {
    version?: string;
    createTime?: { seconds: number; nanos: number } | null;
    extra100?: boolean;
  } = {},
): Uint8Array {
  const w = protobuf.Writer.create();
  const meta = protobuf.Writer.create();
  meta.uint32((1 << 3) | 2).string(`${object.namespace}/${object.name}`);
  const ts = options.createTime;
  if (ts !== null && ts !== undefined) {
    const t = protobuf.Writer.create();
    if (ts.seconds !== 0) t.uint32(1 << 3).int64(ts.seconds);
    if (ts.nanos !== 0) t.uint32(2 << 3).int32(ts.nanos);
    meta.uint32((2 << 3) | 2).bytes(t.finish());
  }
  if (options.version !== undefined && options.version !== '')
    meta.uint32((3 << 3) | 2).string(options.version);
  for (const [field, map] of [
    [4, object.labels ?? {}],
    [5, object.annotations ?? {}],
  ] as const) {
    for (const [k, v] of Object.entries(map)) {
      const entry = protobuf.Writer.create()
        .uint32((1 << 3) | 2)
        .string(k)
        .uint32((2 << 3) | 2)
        .string(v)
        .finish();
      meta.uint32((field << 3) | 2).bytes(entry);
    }
  }
  w.uint32((1 << 3) | 2).bytes(meta.finish());
  const body = object.rawBody ?? encodeBody(kind, object.spec);
  w.uint32((2 << 3) | 2).bytes(encodeAny(anyTypeUrl(kind.bodyType), body));
  const bytes = w.finish();
  return options.extra100 === true ? Buffer.concat([bytes, higressExtra()]) : bytes;
}

function encodeAny(typeUrl: string, value: Uint8Array): Uint8Array {
  return protobuf.Writer.create()
    .uint32((1 << 3) | 2)
    .string(typeUrl)
    .uint32((2 << 3) | 2)
    .bytes(value)
    .finish();
}

/** Waits on a condition over an object that calls `notify()` when it changes. */
class Waitable {
  private waiters: Array<{
    check: () => boolean;
    resolve: () => void;
    reject: (e: Error) => void;
    timer: NodeJS.Timeout;
  }> = [];

  /** Resolves once `check()` is true; rejects after `timeoutMs`. */
  waitFor(check: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = {
        check,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
        }, timeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  protected notify(): void {
    for (const w of [...this.waiters]) {
      if (w.check()) {
        clearTimeout(w.timer);
        this.waiters = this.waiters.filter((x) => x !== w);
        w.resolve();
      }
    }
  }
}

/** Per object: the content it was last set with, its resourceVersion and its creation time. */
interface StoredObject {
  readonly object: FakeObject;
  readonly json: string;
  readonly resourceVersion: string;
  readonly createTime: { seconds: number; nanos: number } | null;
}

/** The objects of an upstream, per kind, with Kubernetes-like resourceVersions. */
class FakeStore {
  private readonly byKind = new Map<string, Map<string, StoredObject>>();
  private resourceVersion = 1000;
  private readonly created = new Map<string, { seconds: number; nanos: number }>();

  /** Replaces the objects of a kind; unchanged objects keep their resourceVersion. */
  set(kindName: string, objects: readonly FakeObject[]): void {
    const kind = kindNamed(kindName);
    const before = this.byKind.get(kind.key) ?? new Map<string, StoredObject>();
    const after = new Map<string, StoredObject>();
    for (const object of objects) {
      const key = `${object.namespace}/${object.name}`;
      const json = JSON.stringify([object.spec, object.labels, object.annotations, object.rawBody?.length]);
      const prev = before.get(key);
      let created = this.created.get(`${kind.key}|${key}`);
      if (created === undefined) {
        created = { seconds: 1_700_000_000 + this.created.size, nanos: 0 };
        this.created.set(`${kind.key}|${key}`, created);
      }
      after.set(key, {
        object,
        json,
        resourceVersion: prev?.json === json ? prev.resourceVersion : String(++this.resourceVersion),
        createTime: object.createTime === undefined ? created : object.createTime,
      });
    }
    this.byKind.set(kind.key, after);
  }

  objects(kind: KindDescriptor): StoredObject[] {
    return [...(this.byKind.get(kind.key)?.values() ?? [])];
  }

  clear(): void {
    this.byKind.clear();
  }
}

/** Which peer a {@link FakeAdsServer} behaves like. */
export type AdsPeer = 'istiod' | 'nacos' | 'higress';

export interface FakeAdsServerOptions {
  readonly peer: AdsPeer;
  /** istiod: the spelling it serves. Default `current` (istiod ≥1.24). */
  readonly serves?: 'current' | 'legacy';
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

  private constructor(private readonly options: FakeAdsServerOptions) {
    super();
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
        ? typeUrl === NACOS_SE_TYPE_URL
        : version === (this.options.serves === 'legacy' ? kind.legacyVersion : kind.currentVersion);
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
    if (typeUrl === NACOS_SE_TYPE_URL) {
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

/** One `RequestResources` as a Galley received it. */
export interface RecordedMcpRequest {
  readonly stream: number;
  readonly collection: string;
  readonly nonce: string;
  readonly incremental: boolean;
  readonly sinkNode: { id?: string; annotations?: Record<string, string> } | null;
  readonly initialVersions: Record<string, string>;
  readonly errorDetail: { code?: number; message?: string } | null;
}

interface Watch {
  incremental: boolean;
  pending: { nonce: string; versions: Map<string, string> } | undefined;
  acked: Map<string, string>;
  dirty: boolean;
}

/**
 * The source side of Galley-era MCP for one stream, whichever end dialed (spec §4.6): answers a
 * new watch at once, holds one outstanding `Resources` per collection, treats other nonces as
 * stale, sends incremental answers only when asked and allowed, and ends the stream on an
 * unknown collection.
 */
class GalleySession {
  private nonce = 0;
  private readonly watches = new Map<string, Watch>();

  constructor(
    readonly id: number,
    private readonly galley: GalleyState,
    private readonly send: (bytes: Uint8Array) => void,
    private readonly fail: (code: grpc.status, details: string) => void,
  ) {}

  onRequest(req: RecordedMcpRequest): void {
    if (!this.galley.collections.has(req.collection)) {
      this.fail(grpc.status.INVALID_ARGUMENT, `unsupported collection ${req.collection}`);
      return;
    }
    const watch = this.watches.get(req.collection);
    if (req.nonce === '' || watch === undefined) {
      this.watches.set(req.collection, {
        incremental: req.incremental && this.galley.allowIncremental,
        pending: undefined,
        acked: new Map(),
        dirty: false,
      });
      this.respond(req.collection);
      return;
    }
    if (watch.pending === undefined || watch.pending.nonce !== req.nonce) return; // stale
    if (req.errorDetail === null) watch.acked = watch.pending.versions;
    watch.pending = undefined;
    if (watch.dirty) this.respond(req.collection);
  }

  push(): void {
    for (const [collection, watch] of this.watches) {
      if (watch.pending !== undefined) watch.dirty = true;
      else this.respond(collection);
    }
  }

  private respond(collection: string): void {
    const watch = this.watches.get(collection);
    const kind = KINDS.fromCollection(collection);
    if (watch === undefined || kind === undefined) return;
    watch.dirty = false;
    const objects = this.galley.store.objects(kind);
    const versions = new Map(
      objects.map((s) => [`${s.object.namespace}/${s.object.name}`, s.resourceVersion]),
    );
    const nonce = String(++this.nonce);
    const w = protobuf.Writer.create();
    w.uint32((1 << 3) | 2).string(String(this.galley.snapshotVersion));
    w.uint32((2 << 3) | 2).string(collection);
    for (const s of objects) {
      const name = `${s.object.namespace}/${s.object.name}`;
      if (watch.incremental && watch.acked.get(name) === s.resourceVersion) continue;
      w.uint32((3 << 3) | 2).bytes(
        encodeMcpResource(kind, s.object, { version: s.resourceVersion, createTime: s.createTime }),
      );
    }
    if (watch.incremental) {
      for (const name of watch.acked.keys()) if (!versions.has(name)) w.uint32((4 << 3) | 2).string(name);
    }
    w.uint32((5 << 3) | 2).string(nonce);
    if (watch.incremental) w.uint32(6 << 3).bool(true);
    watch.pending = { nonce, versions };
    this.send(w.finish());
  }
}

/** What every Galley session reads. */
interface GalleyState {
  readonly store: FakeStore;
  readonly collections: ReadonlySet<string>;
  readonly allowIncremental: boolean;
  readonly snapshotVersion: number;
}

function decodeRequestResources(stream: number, bytes: Uint8Array): RecordedMcpRequest {
  const req = REQUEST_RESOURCES.toObject(REQUEST_RESOURCES.decode(bytes), {
    defaults: true,
    arrays: true,
  }) as {
    collection: string;
    response_nonce: string;
    incremental: boolean;
    sink_node: RecordedMcpRequest['sinkNode'];
    initial_resource_versions: Record<string, string>;
    error_detail: RecordedMcpRequest['errorDetail'];
  };
  return {
    stream,
    collection: req.collection,
    nonce: req.response_nonce,
    incremental: req.incremental,
    sinkNode: req.sink_node,
    initialVersions: req.initial_resource_versions,
    errorDetail: req.error_detail,
  };
}

export interface FakeGalleyOptions {
  /** Collections served; default every collection of the registry. */
  readonly collections?: readonly string[];
  /** Answer incrementally when a sink asks. Default true. */
  readonly incremental?: boolean;
}

/** A Galley serving `ResourceSource` (meshmux dials it: `type: mcp`). */
export class FakeGalley extends Waitable implements GalleyState {
  readonly store = new FakeStore();
  readonly collections: ReadonlySet<string>;
  readonly allowIncremental: boolean;
  readonly requests: RecordedMcpRequest[] = [];
  snapshotVersion = 1;
  private server: grpc.Server | undefined;
  private readonly sessions = new Map<GalleySession, grpc.ServerDuplexStream<Buffer, Uint8Array>>();
  private streamCount = 0;
  private port = 0;

  private constructor(options: FakeGalleyOptions) {
    super();
    this.collections = new Set(
      options.collections ??
        KINDS.kinds.flatMap((k) => (k.legacyCollection === undefined ? [] : [k.legacyCollection])),
    );
    this.allowIncremental = options.incremental ?? true;
  }

  static async start(options: FakeGalleyOptions = {}, port = 0): Promise<FakeGalley> {
    const galley = new FakeGalley(options);
    await galley.listen(port);
    return galley;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get streams(): number {
    return this.streamCount;
  }

  set(kindName: string, objects: readonly FakeObject[]): this {
    this.store.set(kindName, objects);
    return this;
  }

  /** A new snapshot: every open watch gets it (after its outstanding ACK). */
  push(): void {
    this.snapshotVersion++;
    for (const session of this.sessions.keys()) session.push();
  }

  sendRaw(bytes: Uint8Array): void {
    for (const call of this.sessions.values()) call.write(bytes);
  }

  disconnectAll(): void {
    for (const call of this.sessions.values()) {
      call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'fake galley dropped the stream' });
    }
    this.sessions.clear();
    this.notify();
  }

  async stop(): Promise<void> {
    this.server?.forceShutdown();
    this.server = undefined;
    this.sessions.clear();
    await Promise.resolve();
    this.notify();
  }

  async restart(options: { empty?: boolean } = {}): Promise<void> {
    await this.stop();
    if (options.empty === true) this.store.clear();
    await this.listen(this.port);
  }

  private async listen(port: number): Promise<void> {
    const server = new grpc.Server();
    server.addService(
      {
        EstablishResourceStream: rawBidiMethod('/istio.mcp.v1alpha1.ResourceSource/EstablishResourceStream'),
      },
      {
        EstablishResourceStream: (call: grpc.ServerDuplexStream<Buffer, Uint8Array>) => {
          const session = new GalleySession(
            ++this.streamCount,
            this,
            (bytes) => call.write(bytes),
            (code, details) => {
              this.sessions.delete(session);
              call.emit('error', { code, details });
              this.notify();
            },
          );
          this.sessions.set(session, call);
          const gone = (): void => {
            this.sessions.delete(session);
            this.notify();
          };
          call.on('error', gone);
          call.on('cancelled', gone);
          call.on('data', (bytes: Buffer) => {
            const req = decodeRequestResources(session.id, bytes);
            this.requests.push(req);
            session.onRequest(req);
            this.notify();
          });
          this.notify();
        },
      },
    );
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    this.server = server;
  }
}

/**
 * A Galley configured with a sink address: dials `ResourceSink`, sends the empty-collection
 * trigger first, then serves the sink's requests like a `ResourceSource`.
 */
export class GalleySinkPusher extends Waitable implements GalleyState {
  readonly store = new FakeStore();
  readonly collections: ReadonlySet<string>;
  readonly allowIncremental: boolean;
  readonly requests: RecordedMcpRequest[] = [];
  /** Set once the sink NACKed the trigger with UNIMPLEMENTED, as a Galley expects. */
  triggerRefused = false;
  snapshotVersion = 1;
  private readonly client: grpc.Client;
  private call: grpc.ClientDuplexStream<Uint8Array, Buffer> | undefined;
  private session: GalleySession | undefined;
  private streamCount = 0;

  constructor(address: string, options: FakeGalleyOptions = {}) {
    super();
    this.collections = new Set(
      options.collections ??
        KINDS.kinds.flatMap((k) => (k.legacyCollection === undefined ? [] : [k.legacyCollection])),
    );
    this.allowIncremental = options.incremental ?? true;
    this.client = new grpc.Client(address, grpc.credentials.createInsecure());
  }

  set(kindName: string, objects: readonly FakeObject[]): this {
    this.store.set(kindName, objects);
    return this;
  }

  /** Opens a stream (closing the previous one) and sends the trigger. */
  connect(): this {
    this.call?.cancel();
    const id = ++this.streamCount;
    const call = this.client.makeBidiStreamRequest<Uint8Array, Buffer>(
      '/istio.mcp.v1alpha1.ResourceSink/EstablishResourceStream',
      toBuffer,
      rawBytes,
    );
    this.call = call;
    const session = new GalleySession(
      id,
      this,
      (bytes) => call.write(bytes),
      () => call.cancel(),
    );
    this.session = session;
    call.on('error', () => undefined);
    call.on('data', (bytes: Buffer) => {
      const req = decodeRequestResources(id, bytes);
      this.requests.push(req);
      if (req.collection === '' && req.errorDetail?.code === grpc.status.UNIMPLEMENTED)
        this.triggerRefused = true;
      else session.onRequest(req);
      this.notify();
    });
    call.write(RESOURCES.encode(RESOURCES.fromObject({ collection: '' })).finish());
    return this;
  }

  push(): void {
    this.snapshotVersion++;
    this.session?.push();
  }

  /** Ends the stream as a Galley going away would. */
  disconnect(): void {
    this.call?.cancel();
    this.call = undefined;
    this.session = undefined;
  }

  close(): void {
    this.disconnect();
    this.client.close();
  }
}
