/**
 * A stand-in for istiod's `xds://` config-source client (spec §1.4–1.11), so end-to-end tests can
 * prove that what meshmux serves is what a real istiod would accept, store and wait for.
 *
 * Fidelity is to istiod master's adsc with these deliberate differences:
 * - a response for a type URL the client never requested is not stored but reported as a problem
 *   (istiod stores it when it happens to be a Pilot kind; a conforming server never sends one);
 * - Istio's per-kind body validation is not run; only the metadata rules istiod applies to every
 *   kind (rejected annotations) and a body-type check against the kind are;
 * - the backoff resets when the server's response headers arrive, the first sign grpc-js gives
 *   of an established stream (istiod resets right after creating the stream).
 */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import type { Timestamp } from '../../src/core/resource.js';
import { lookupProto, messageType } from '../../src/schema/proto-root.js';
import { KINDS, MESH_CONFIG_KIND, typeUrlOf, type KindDescriptor } from '../../src/schema/kinds.js';
import {
  ADS_STREAM_PATH,
  decodeDiscoveryResponse,
  encodeDiscoveryRequest,
  stringStruct,
  type AnyMessage,
  type DiscoveryRequest,
  type DiscoveryResponse,
  type MessageInit,
  type NodeMessage,
} from './ads-wire.js';

/** The type URL istiod asks for first; answered with a bare MeshConfig, never wrapped. */
export const MESH_CONFIG_TYPE_URL = typeUrlOf(MESH_CONFIG_KIND, MESH_CONFIG_KIND.currentVersion);

/** The node id an istiod 1.12+ in `istio-system` sends. */
export const DEFAULT_NODE_ID = 'sidecar~10.1.2.3~istiod-abc.istio-system~istio-system.svc.cluster.local';

/** The node metadata an istiod without a revision sends. */
export const DEFAULT_NODE_METADATA: Readonly<Record<string, string>> = Object.freeze({
  GENERATOR: 'api',
  ISTIO_VERSION: '65536.65536.65536',
});

/** The label istiod's revision filter reads. */
const REVISION_LABEL = 'istio.io/rev';

const MCP_RESOURCE_ANY_SUFFIX = '/istio.mcp.v1alpha1.Resource';
const MESH_CONFIG_ANY_TYPE_URL = `type.googleapis.com/${MESH_CONFIG_KIND.bodyType}`;

/** Annotations istiod's metadata validation rejects on every kind. */
const REJECTED_ANNOTATIONS: readonly string[] = [
  'internal.istio.io/webhook-always-reject',
  'internal.istio.io/parents',
  'internal.istio.io/parent-namespace',
];
const DRY_RUN_ANNOTATION = 'istio.io/dry-run';
const DRY_RUN_KIND_KEY = 'security.istio.io/AuthorizationPolicy';

/**
 * Which type URLs to request besides MeshConfig: `current` = istiod 1.24+ (v1 spellings, with
 * TrafficExtension as in 1.30+), `legacy` = istiod 1.9–1.23 spellings, or an explicit list.
 */
export type IstiodRelease = 'current' | 'legacy' | readonly string[];

/** istiod's reconnect backoff (cenkalti ExponentialBackOff with istio's options). */
export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly multiplier: number;
  /** Each delay is drawn uniformly from `interval × (1 ± jitter)`. */
  readonly jitter: number;
  /** After this long without a reset every delay is `maxMs` (istio's wrapper never gives up). */
  readonly maxElapsedMs: number;
}

/** istiod's own values (spec §1.10). */
export const ISTIOD_BACKOFF: BackoffPolicy = Object.freeze({
  initialMs: 500,
  maxMs: 60_000,
  multiplier: 1.5,
  jitter: 0.5,
  maxElapsedMs: 15 * 60_000,
});

/** How to dial and who to be; every field but `address` defaults to what an istiod does. */
export interface IstiodClientOptions {
  /** `host:port`, the `xds://` address without the scheme. */
  readonly address: string;
  /** Default `current`. */
  readonly release?: IstiodRelease;
  /** Default {@link DEFAULT_NODE_ID}. */
  readonly nodeId?: string;
  /** Replaces {@link DEFAULT_NODE_METADATA}; `ISTIO_VERSION` is still added when missing, as adsc does. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** istiod's revision: sent as `ISTIO_REVISION` and used by the `istio.io/rev` label filter. */
  readonly revision?: string;
  /** Default plaintext, as every istiod before 1.26 and every non-SIMPLE `tls_settings`. */
  readonly credentials?: grpc.ChannelCredentials;
  /** Extra channel options (e.g. `grpc.ssl_target_name_override`); applied over istiod's dial options. */
  readonly channelOptions?: grpc.ChannelOptions;
  /** Overrides parts of {@link ISTIOD_BACKOFF}; tests use a few milliseconds. */
  readonly backoff?: Partial<BackoffPolicy>;
  /** Drop resources without `create_time`, as istiod ≤1.13 did. Default false (master keeps them). */
  readonly requireCreateTime?: boolean;
}

/** One config object as the client's store holds it. Must not be altered. */
export interface StoredConfig {
  readonly namespace: string;
  readonly name: string;
  /** `metadata.version` as received; may be empty. */
  readonly version: string;
  /** Undefined when the server sent none. */
  readonly createTime: Timestamp | undefined;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** Full name of the body message, from the last `/` of the body's type URL. */
  readonly bodyType: string;
  /** The body decoded with protobufjs `toObject` (snake_case fields, enums as names, int64 as numbers). */
  readonly body: Readonly<Record<string, unknown>>;
  /** The body bytes exactly as received. */
  readonly bodyBytes: Uint8Array;
}

/** Why a response or one of its resources was (partly) refused. A closed set, so tests can match on it. */
export type ProblemReason =
  /** A response for a type URL this client never requested. */
  | 'unrequested-type'
  /** A resource Any whose type URL does not end in `/istio.mcp.v1alpha1.Resource`. */
  | 'envelope'
  /** The `istio.mcp.v1alpha1.Resource` bytes did not decode. */
  | 'undecodable-resource'
  /** `metadata.name` did not split into exactly `<namespace>/<name>`. */
  | 'invalid-name'
  /** No `metadata.create_time` (dropped only with `requireCreateTime`). */
  | 'missing-create-time'
  /** Body absent, of an unknown message, not the kind's message, or undecodable. */
  | 'body'
  /** An annotation istiod's validation rejects. */
  | 'rejected-annotation'
  /** Two resources with the same name in one response (the later one is applied). */
  | 'duplicate-name'
  /** A MeshConfig response not made of exactly one decodable bare MeshConfig. */
  | 'mesh-config';

/** One thing an istiod would have dropped, or a protocol violation; recorded, never thrown. */
export interface ClientProblem {
  readonly reason: ProblemReason;
  readonly typeUrl: string;
  /** `metadata.name` of the resource, when the problem concerns one. */
  readonly resourceName?: string;
  readonly detail: string;
  /** 1-based number of the stream it happened on. */
  readonly stream: number;
}

/** One response as received, before processing. */
export interface ReceivedResponse {
  readonly stream: number;
  readonly typeUrl: string;
  readonly versionInfo: string;
  readonly nonce: string;
  readonly resourceCount: number;
}

/** One ACK the client sent. */
export interface SentAck {
  readonly stream: number;
  readonly typeUrl: string;
  readonly versionInfo: string;
  readonly nonce: string;
}

/** How a stream ended. */
export interface StreamEnd {
  readonly stream: number;
  readonly code: grpc.status;
  readonly details: string;
}

type AdsCall = grpc.ClientDuplexStream<MessageInit<DiscoveryRequest>, DiscoveryResponse>;

type Waiter = {
  readonly predicate: (client: IstiodClient) => boolean;
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
};

/** Go's `time.Now().String()` in UTC: `2026-08-22 15:00:18.1234 +0000 UTC m=+0.510000000`. */
function goTimeNowString(): string {
  const nowMs = performance.timeOrigin + performance.now();
  const d = new Date(Math.floor(nowMs));
  const p2 = (n: number): string => String(n).padStart(2, '0');
  const micros = Math.floor((nowMs % 1000) * 1000);
  // Go's `.999999999` layout drops trailing zeros, and the dot with them.
  const fraction = String(micros * 1000)
    .padStart(9, '0')
    .replace(/0+$/, '');
  const clock = `${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())}:${p2(d.getUTCSeconds())}`;
  const date = `${d.getUTCFullYear()}-${p2(d.getUTCMonth() + 1)}-${p2(d.getUTCDate())}`;
  const monotonic = (performance.now() / 1000).toFixed(9);
  return `${date} ${clock}${fraction === '' ? '' : `.${fraction}`} +0000 UTC m=+${monotonic}`;
}

/** cenkalti-style exponential backoff; `reset()` starts over from the initial interval. */
class ExponentialBackoff {
  private interval: number;
  private startedAt = performance.now();

  constructor(private readonly policy: BackoffPolicy) {
    this.interval = policy.initialMs;
  }

  reset(): void {
    this.interval = this.policy.initialMs;
    this.startedAt = performance.now();
  }

  nextDelayMs(): number {
    const { maxMs, multiplier, jitter, maxElapsedMs } = this.policy;
    const delta = jitter * this.interval;
    const delay = this.interval - delta + Math.random() * 2 * delta;
    this.interval = Math.min(this.interval * multiplier, maxMs);
    return performance.now() - this.startedAt + delay > maxElapsedMs ? maxMs : delay;
  }
}

/** Decoded `istio.mcp.v1alpha1.Resource`, as protobufjs `toObject` gives it. */
interface McpResourceObject {
  readonly metadata?: {
    readonly name?: string;
    readonly create_time?: { readonly seconds?: number; readonly nanos?: number };
    readonly version?: string;
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
  };
  readonly body?: { readonly type_url?: string; readonly value?: Uint8Array };
}

const MCP_RESOURCE = messageType('istio.mcp.v1alpha1.Resource');
const MESH_CONFIG = messageType(MESH_CONFIG_KIND.bodyType);
const BODY_TO_OBJECT = { longs: Number, enums: String } as const;

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * An istiod's config-source client. `start()` dials and subscribes; every response is processed
 * synchronously in arrival order, exactly one at a time, like adsc's receive loop. All state is
 * observable and read-only from outside; it is never cleared, not even across reconnects.
 */
export class IstiodClient {
  /** The config type URLs requested after MeshConfig, in request order. */
  readonly requestedTypeUrls: readonly string[];
  /** The node sent on the first request of each stream and on every ACK. */
  readonly node: NodeMessage;

  private readonly revision: string;
  private readonly requireCreateTime: boolean;
  private readonly requested: ReadonlySet<string>;
  /** Requested type URLs that are config kinds: the ones that store state and count for sync. */
  private readonly configKinds: ReadonlyMap<string, KindDescriptor>;
  private readonly grpcClient: grpc.Client;
  private readonly backoff: ExponentialBackoff;

  private readonly storeByType = new Map<string, Map<string, StoredConfig>>();
  private readonly versionInfoByType = new Map<string, string>();
  private readonly responseCounts = new Map<string, number>();
  private readonly syncedTypes = new Set<string>();
  private readonly receivedLog: ReceivedResponse[] = [];
  private readonly ackLog: SentAck[] = [];
  private readonly problemLog: ClientProblem[] = [];
  private readonly streamEndLog: StreamEnd[] = [];
  private waiters: Waiter[] = [];

  private call: AdsCall | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private started = false;
  private closed = false;
  private streamCount = 0;
  private updateCount = 0;
  private byteCount = 0;
  private mesh: Readonly<Record<string, unknown>> | undefined;

  constructor(options: IstiodClientOptions) {
    const release = options.release ?? 'current';
    const typeUrls =
      release === 'current'
        ? KINDS.currentTypeUrls()
        : release === 'legacy'
          ? KINDS.legacyTypeUrls()
          : release.filter((t) => t !== MESH_CONFIG_TYPE_URL);
    this.requestedTypeUrls = Object.freeze([...new Set(typeUrls)]);
    this.requested = new Set([MESH_CONFIG_TYPE_URL, ...this.requestedTypeUrls]);
    const configKinds = new Map<string, KindDescriptor>();
    for (const typeUrl of this.requestedTypeUrls) {
      const kind = KINDS.resolveTypeUrl(typeUrl)?.kind;
      if (kind !== undefined && kind !== MESH_CONFIG_KIND) configKinds.set(typeUrl, kind);
    }
    this.configKinds = configKinds;

    this.revision = options.revision ?? '';
    this.requireCreateTime = options.requireCreateTime ?? false;
    const metadata: Record<string, string> = { ...(options.metadata ?? DEFAULT_NODE_METADATA) };
    if (this.revision !== '') metadata['ISTIO_REVISION'] = this.revision;
    metadata['ISTIO_VERSION'] ??= DEFAULT_NODE_METADATA['ISTIO_VERSION'] ?? '';
    this.node = Object.freeze({ id: options.nodeId ?? DEFAULT_NODE_ID, metadata: stringStruct(metadata) });

    this.backoff = new ExponentialBackoff({ ...ISTIOD_BACKOFF, ...options.backoff });
    this.grpcClient = new grpc.Client(
      options.address,
      options.credentials ?? grpc.credentials.createInsecure(),
      {
        // istiod's dial options (spec §1.2).
        'grpc.max_receive_message_length': 2 ** 31 - 1,
        'grpc-node.flow_control_window': 1024 * 1024,
        'grpc.keepalive_time_ms': 30_000,
        'grpc.keepalive_timeout_ms': 10_000,
        'grpc.keepalive_permit_without_calls': 0,
        ...options.channelOptions,
      },
    );
  }

  /** Opens the first stream and sends the initial requests. Idempotent; returns `this` for chaining. */
  start(): this {
    if (this.started || this.closed) return this;
    this.started = true;
    this.openStream();
    return this;
  }

  /** Per requested type URL, `namespace/name` → object. The maps must not be altered. */
  get store(): ReadonlyMap<string, ReadonlyMap<string, StoredConfig>> {
    return this.storeByType;
  }

  /** The objects of one type URL (empty when none). */
  configs(typeUrl: string): ReadonlyMap<string, StoredConfig> {
    return this.storeByType.get(typeUrl) ?? new Map<string, StoredConfig>();
  }

  /** Last `version_info` per type URL (MeshConfig responses with resources do not record it, as in adsc). */
  get versionInfo(): ReadonlyMap<string, string> {
    return this.versionInfoByType;
  }

  /** Responses received per type URL, whatever their fate. */
  get responses(): ReadonlyMap<string, number> {
    return this.responseCounts;
  }

  /** Creates + updates + deletes applied to the store since construction. */
  get updates(): number {
    return this.updateCount;
  }

  /** Encoded bytes of every DiscoveryResponse received. */
  get bytesReceived(): number {
    return this.byteCount;
  }

  /** Every response received, in order. */
  get received(): readonly ReceivedResponse[] {
    return this.receivedLog;
  }

  /** Every ACK sent, in order. */
  get acks(): readonly SentAck[] {
    return this.ackLog;
  }

  /** Everything a real istiod would have dropped or that breaks the protocol, in order. */
  get problems(): readonly ClientProblem[] {
    return this.problemLog;
  }

  /** How each finished stream ended, in order. */
  get streamEnds(): readonly StreamEnd[] {
    return this.streamEndLog;
  }

  /** Streams opened so far (the first is number 1). */
  get streams(): number {
    return this.streamCount;
  }

  /** The last MeshConfig received (protobufjs `toObject`), if any. istiod keeps it and ignores it. */
  get meshConfig(): Readonly<Record<string, unknown>> | undefined {
    return this.mesh;
  }

  /** Config type URLs requested but not answered yet on any stream. */
  unsyncedTypeUrls(): string[] {
    return [...this.configKinds.keys()].filter((t) => !this.syncedTypes.has(t));
  }

  /**
   * istiod's HasSynced: every requested config type (MeshConfig excluded, unknown kinds excluded)
   * has had at least one response processed. Never goes back to false, not even on reconnect.
   */
  synced(): boolean {
    return this.unsyncedTypeUrls().length === 0;
  }

  /** Resolves once {@link synced}; rejects after `timeoutMs` naming the types still unanswered. */
  waitForSync(timeoutMs: number): Promise<void> {
    return this.waitFor(
      (c) => c.synced(),
      timeoutMs,
      () => `sync; unanswered: ${this.unsyncedTypeUrls().join(', ')}`,
    );
  }

  /**
   * Resolves as soon as `predicate(this)` is true: now, or after a later processed response or
   * stream start/end. Rejects after `timeoutMs`, when the predicate throws, or on `close()`.
   */
  waitFor(
    predicate: (client: IstiodClient) => boolean,
    timeoutMs: number,
    describe: () => string = () => 'condition',
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.closed) {
        reject(new Error('IstiodClient is closed'));
        return;
      }
      try {
        if (predicate(this)) {
          resolve();
          return;
        }
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      const waiter: Waiter = {
        predicate,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          reject(new Error(`IstiodClient: timed out after ${timeoutMs} ms waiting for ${describe()}`));
        }, timeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  /** Ends the stream, stops reconnecting, rejects pending waits. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.call?.cancel();
    this.call = undefined;
    this.grpcClient.close();
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) {
      clearTimeout(w.timer);
      w.reject(new Error('IstiodClient is closed'));
    }
  }

  private openStream(): void {
    const stream = ++this.streamCount;
    const call = this.grpcClient.makeBidiStreamRequest<MessageInit<DiscoveryRequest>, DiscoveryResponse>(
      ADS_STREAM_PATH,
      encodeDiscoveryRequest,
      (bytes) => {
        this.byteCount += bytes.byteLength;
        return decodeDiscoveryResponse(bytes);
      },
    );
    this.call = call;
    call.on('metadata', () => this.backoff.reset());
    call.on('data', (res: DiscoveryResponse) => this.onResponse(stream, call, res));
    // The status event below carries the same information; an unhandled 'error' would crash the test run.
    call.on('error', () => undefined);
    call.on('status', (status: grpc.StatusObject) => this.onStreamEnd(stream, call, status));

    // adsc's initial requests: MeshConfig first, node only on the first, and Send() stamps each
    // with a wall-clock nonce (spec §1.5) that a server must not mistake for an ACK.
    const typeUrls = [MESH_CONFIG_TYPE_URL, ...this.requestedTypeUrls];
    typeUrls.forEach((typeUrl, i) => {
      call.write({
        type_url: typeUrl,
        version_info: '',
        resource_names: [],
        response_nonce: goTimeNowString(),
        ...(i === 0 ? { node: this.node } : {}),
      });
    });
    this.notify();
  }

  private onStreamEnd(stream: number, call: AdsCall, status: grpc.StatusObject): void {
    this.streamEndLog.push({ stream, code: status.code, details: status.details });
    if (this.call === call) this.call = undefined;
    if (!this.closed) {
      // Reconnect on any end, OK included: adsc treats io.EOF like any other Recv error.
      this.reconnectTimer = setTimeout(() => {
        this.reconnectTimer = undefined;
        if (!this.closed) this.openStream();
      }, this.backoff.nextDelayMs());
    }
    this.notify();
  }

  private onResponse(stream: number, call: AdsCall, res: DiscoveryResponse): void {
    const typeUrl = res.type_url;
    this.receivedLog.push({
      stream,
      typeUrl,
      versionInfo: res.version_info,
      nonce: res.nonce,
      resourceCount: res.resources.length,
    });
    this.responseCounts.set(typeUrl, (this.responseCounts.get(typeUrl) ?? 0) + 1);

    if (typeUrl === MESH_CONFIG_TYPE_URL && res.resources.length > 0) {
      // adsc keeps the mesh config and moves on: no version recorded, no ACK, no sync.
      this.takeMeshConfig(stream, res.resources);
      this.notify();
      return;
    }
    this.versionInfoByType.set(typeUrl, res.version_info);
    const kind = this.configKinds.get(typeUrl);
    if (!this.requested.has(typeUrl)) {
      this.problem(
        stream,
        'unrequested-type',
        typeUrl,
        `never requested; ${res.resources.length} resources ignored`,
      );
    } else if (kind !== undefined) {
      this.applyState(stream, typeUrl, kind, res.resources);
      this.syncedTypes.add(typeUrl);
    }
    if (!typeUrl.startsWith('istio.io/debug')) {
      // Always an ACK, never a NACK: istiod drops bad resources one by one and accepts the rest.
      call.write({
        type_url: typeUrl,
        response_nonce: res.nonce,
        version_info: res.version_info,
        node: this.node,
        resource_names: [],
      });
      this.ackLog.push({ stream, typeUrl, versionInfo: res.version_info, nonce: res.nonce });
    }
    this.notify();
  }

  private takeMeshConfig(stream: number, resources: readonly AnyMessage[]): void {
    const [first] = resources;
    if (first === undefined) return;
    if (resources.length !== 1 || first.type_url !== MESH_CONFIG_ANY_TYPE_URL) {
      this.problem(
        stream,
        'mesh-config',
        MESH_CONFIG_TYPE_URL,
        `expected one ${MESH_CONFIG_ANY_TYPE_URL}, got ${resources.map((r) => r.type_url).join(', ')}`,
      );
    }
    try {
      this.mesh = MESH_CONFIG.toObject(MESH_CONFIG.decode(first.value), BODY_TO_OBJECT);
    } catch (err) {
      this.problem(stream, 'mesh-config', MESH_CONFIG_TYPE_URL, `undecodable: ${errorText(err)}`);
    }
  }

  /** adsc's handleMCP: apply one state-of-the-world response for one kind. */
  private applyState(
    stream: number,
    typeUrl: string,
    kind: KindDescriptor,
    resources: readonly AnyMessage[],
  ): void {
    let existing = this.storeByType.get(typeUrl);
    if (existing === undefined) {
      existing = new Map();
      this.storeByType.set(typeUrl, existing);
    }
    const received = new Set<string>();
    for (const any of resources) {
      const config = this.decodeConfig(stream, typeUrl, kind, any);
      if (config === undefined) continue;
      const key = `${config.namespace}/${config.name}`;
      if (received.has(key)) this.problem(stream, 'duplicate-name', typeUrl, 'later entry applied', key);
      received.add(key);

      // Validation happens on create/update, after the name counts as received: a rejected update
      // keeps the previous object instead of deleting it.
      const rejected = this.rejectedAnnotation(kind, config);
      if (rejected !== undefined) {
        this.problem(stream, 'rejected-annotation', typeUrl, `annotation ${rejected}`, key);
        continue;
      }
      const previous = existing.get(key);
      // istiod's update rule: an unchanged non-empty metadata.version means "nothing to do",
      // whatever else changed.
      if (previous === undefined || config.version === '' || previous.version !== config.version) {
        existing.set(key, config);
        this.updateCount++;
      }
    }
    for (const key of [...existing.keys()]) {
      if (!received.has(key)) {
        existing.delete(key);
        this.updateCount++;
      }
    }
  }

  /** One resource Any → a stored object, or undefined (with a problem recorded) if istiod would skip it. */
  private decodeConfig(
    stream: number,
    typeUrl: string,
    kind: KindDescriptor,
    any: AnyMessage,
  ): StoredConfig | undefined {
    if (!any.type_url.endsWith(MCP_RESOURCE_ANY_SUFFIX)) {
      this.problem(stream, 'envelope', typeUrl, `resource Any has type URL "${any.type_url}"`);
      return undefined;
    }
    let resource: McpResourceObject;
    try {
      resource = MCP_RESOURCE.toObject(MCP_RESOURCE.decode(any.value), { longs: Number });
    } catch (err) {
      this.problem(stream, 'undecodable-resource', typeUrl, errorText(err));
      return undefined;
    }
    const metadata = resource.metadata ?? {};
    const fullName = metadata.name ?? '';
    const labels = metadata.labels ?? {};
    const revisionLabel = labels[REVISION_LABEL];
    // Objects for another revision are treated as absent (so a stored copy gets deleted).
    if (this.revision !== '' && revisionLabel !== undefined && revisionLabel !== this.revision)
      return undefined;

    const parts = fullName.split('/');
    const [namespace, name] = parts;
    if (parts.length !== 2 || namespace === undefined || name === undefined) {
      this.problem(stream, 'invalid-name', typeUrl, `"${fullName}" is not <namespace>/<name>`, fullName);
      return undefined;
    }
    const createTime =
      metadata.create_time === undefined
        ? undefined
        : { seconds: metadata.create_time.seconds ?? 0, nanos: metadata.create_time.nanos ?? 0 };
    if (createTime === undefined) {
      this.problem(stream, 'missing-create-time', typeUrl, 'istiod ≤1.13 drops it', fullName);
      if (this.requireCreateTime) return undefined;
    }

    const bodyTypeUrl = resource.body?.type_url;
    if (resource.body === undefined || bodyTypeUrl === undefined) {
      this.problem(stream, 'body', typeUrl, 'no body', fullName);
      return undefined;
    }
    const bodyType = bodyTypeUrl.slice(bodyTypeUrl.lastIndexOf('/') + 1);
    const bodyMessage = lookupProto(bodyType);
    if (!(bodyMessage instanceof protobuf.Type)) {
      this.problem(stream, 'body', typeUrl, `unknown body message "${bodyTypeUrl}"`, fullName);
      return undefined;
    }
    if (bodyType !== kind.bodyType) {
      this.problem(
        stream,
        'body',
        typeUrl,
        `body is ${bodyType}, ${kind.kind} needs ${kind.bodyType}`,
        fullName,
      );
      return undefined;
    }
    const bodyBytes = resource.body.value ?? new Uint8Array();
    let body: Record<string, unknown>;
    try {
      body = bodyMessage.toObject(bodyMessage.decode(bodyBytes), BODY_TO_OBJECT);
    } catch (err) {
      this.problem(stream, 'body', typeUrl, `undecodable ${bodyType}: ${errorText(err)}`, fullName);
      return undefined;
    }
    return Object.freeze({
      namespace,
      name,
      version: metadata.version ?? '',
      createTime,
      labels: Object.freeze({ ...labels }),
      annotations: Object.freeze({ ...metadata.annotations }),
      bodyType,
      body,
      bodyBytes,
    });
  }

  /** The first annotation istiod's metadata validation would reject, if any. */
  private rejectedAnnotation(kind: KindDescriptor, config: StoredConfig): string | undefined {
    const names = Object.keys(config.annotations);
    return (
      names.find((a) => REJECTED_ANNOTATIONS.includes(a)) ??
      (kind.key === DRY_RUN_KIND_KEY ? undefined : names.find((a) => a === DRY_RUN_ANNOTATION))
    );
  }

  private problem(
    stream: number,
    reason: ProblemReason,
    typeUrl: string,
    detail: string,
    resourceName?: string,
  ): void {
    this.problemLog.push({
      reason,
      typeUrl,
      detail,
      stream,
      ...(resourceName === undefined ? {} : { resourceName }),
    });
  }

  /** Re-evaluates pending waits after a state change. */
  private notify(): void {
    if (this.waiters.length === 0) return;
    const pending: Waiter[] = [];
    for (const w of this.waiters) {
      let done: boolean;
      try {
        done = w.predicate(this);
      } catch (err) {
        clearTimeout(w.timer);
        w.reject(err instanceof Error ? err : new Error(String(err)));
        continue;
      }
      if (done) {
        clearTimeout(w.timer);
        w.resolve();
      } else {
        pending.push(w);
      }
    }
    this.waiters = pending;
  }
}
