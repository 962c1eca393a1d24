import { type ServerDuplexStream, status as grpcStatus } from '@grpc/grpc-js';
import { MeshmuxError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { ConfigSnapshot, SnapshotReader } from '../merge/config-snapshot.js';
import { anyTypeUrl } from '../schema/proto-root.js';
import type { KindDescriptor, KindRegistry } from '../schema/kinds.js';
import type { AdsHooks } from './ads-hooks.js';
import { anonymousIdentity, type ClientIdentity, parseSans, withNode } from './client-identity.js';
import type { ClientView } from './client-view.js';
import type { Admission } from './policy/policy-set.js';
import { decodeDiscoveryRequest, type DiscoveryRequest } from './discovery-request.js';
import { type FrameWriter, frameWriterFor } from './frame-writer.js';
import { type BuiltResponse, contentOf, type ResponseCache } from './response-cache.js';
import type { BudgetWaiter, WriteBudget } from './write-budget.js';

/** What every stream adds to; the server reads it for `/debug/counters`. Plain numbers, only ever increased. */
export interface PushCounters {
  /** Responses written. */
  pushes: number;
  /** Bytes of responses written (DiscoveryResponse bytes, without gRPC framing). */
  bytesSent: number;
  /** Responses whose content the client already had (same content part of `version_info`). */
  wastedPushes: number;
}

/** What every stream shares; owned by the server. */
export interface StreamEnvironment {
  readonly reader: SnapshotReader;
  readonly responses: ResponseCache;
  readonly kinds: KindRegistry;
  /** Encoded MeshConfig to answer with; absent means MeshConfig requests are never answered. */
  readonly meshConfig: () => Uint8Array | undefined;
  /** Decides whether a client is served and what it sees; may change at runtime (policy reload). */
  readonly admit: (client: ClientIdentity) => Admission;
  readonly hooks: AdsHooks;
  readonly log: Logger;
  /** Bytes in flight over every stream; a stream that does not fit waits and then sends what is latest. */
  readonly budget: WriteBudget;
  readonly counters: PushCounters;
}

/** Per type URL state of one stream. */
interface TypeState {
  readonly typeUrl: string;
  /** Absent for type URLs meshmux does not know: answered as empty. */
  readonly kind: KindDescriptor | undefined;
  sentVersion?: string;
  sentNonce?: string;
  sentAt?: number;
  ackedVersion?: string;
  awaitingAck: boolean;
  nacks: number;
}

/** A snapshot of a stream's state for `/debug/syncz`. */
export interface StreamReport {
  readonly client: ClientIdentity;
  readonly policy: string;
  readonly view: string;
  readonly connectedAt: string;
  readonly types: ReadonlyArray<{
    typeUrl: string;
    sentVersion?: string;
    ackedVersion?: string;
    awaitingAck: boolean;
    nacks: number;
  }>;
}

type Call = ServerDuplexStream<Uint8Array, Buffer>;

/**
 * One istiod's ADS stream. The first request for a type URL subscribes whatever nonce it carries
 * (istiod puts a timestamp there); later requests are ACKs or NACKs of the last response sent for
 * that type, and any other nonce is stale and ignored. At most one response per type is awaiting
 * its ACK; newer state waits and is sent, latest only, when the ACK arrives. MeshConfig is never
 * awaited, since istiod never acknowledges it.
 */
export class ClientStream implements BudgetWaiter {
  private identity: ClientIdentity;
  private view: ClientView | undefined;
  private policy = '';
  private readonly types = new Map<string, TypeState>();
  /** Type URLs with a push due, in order of arrival. */
  private readonly due = new Set<string>();
  private closed = false;
  /** Queued in the write budget. */
  private waitingForBudget = false;
  /** Bytes this stream took from the budget whose writes have not flushed yet. */
  private inFlightBytes = 0;
  private readonly write: FrameWriter;
  private readonly connectedAt = new Date();

  constructor(
    streamId: number,
    private readonly call: Call,
    private readonly env: StreamEnvironment,
    private readonly onClose: (stream: ClientStream) => void,
  ) {
    const certificate = call.getAuthContext().sslPeerCertificate;
    this.identity = anonymousIdentity(streamId, call.getPeer(), parseSans(certificate?.subjectaltname));
    this.write = frameWriterFor(call);
    call.on('data', (bytes: Uint8Array) => this.onData(bytes));
    call.on('end', () => this.close('client closed the stream', true));
    call.on('error', (err: Error) => this.close(`stream error: ${err.message}`, false));
    call.on('cancelled', () => this.close('cancelled', false));
    env.hooks.onConnect?.(this.identity);
  }

  get client(): ClientIdentity {
    return this.identity;
  }

  /** Queues a push for every subscribed type whose content, as this client sees it, changed. */
  onSnapshot(snapshot: ConfigSnapshot): void {
    if (this.view === undefined) return;
    for (const state of this.types.values()) {
      if (this.needsPush(state, snapshot)) this.due.add(state.typeUrl);
    }
    this.flush();
  }

  /** The write budget has room again: send what is latest now. */
  resume(): void {
    this.waitingForBudget = false;
    this.flush();
  }

  /** Ends the stream from the server side (shutdown). */
  end(): void {
    if (this.closed) return;
    this.call.end();
    this.close('server shutting down', false);
  }

  /**
   * Looks the client up again (policies changed): a client no longer admitted is refused; one whose
   * view changed receives every type whose content differs in the new view, and nothing else.
   */
  reevaluate(): void {
    if (this.view === undefined || this.closed) return;
    if (!this.admitWith(this.env.admit(this.identity))) return;
    this.onSnapshot(this.env.reader.current());
  }

  report(): StreamReport {
    return {
      client: this.identity,
      policy: this.policy,
      view: this.view?.id ?? '',
      connectedAt: this.connectedAt.toISOString(),
      types: [...this.types.values()].map((t) => ({
        typeUrl: t.typeUrl,
        ...(t.sentVersion === undefined ? {} : { sentVersion: t.sentVersion }),
        ...(t.ackedVersion === undefined ? {} : { ackedVersion: t.ackedVersion }),
        awaitingAck: t.awaitingAck,
        nacks: t.nacks,
      })),
    };
  }

  private onData(bytes: Uint8Array): void {
    let request: DiscoveryRequest;
    try {
      request = decodeDiscoveryRequest(bytes);
    } catch (err) {
      const error = new MeshmuxError('DECODE', `undecodable DiscoveryRequest: ${String(err)}`, {
        file: `stream ${this.identity.streamId} from ${this.identity.peer}`,
      });
      this.env.hooks.onBadRequest?.(this.identity, error);
      this.env.log.warn({ peer: this.identity.peer, err: error.message }, 'ignored an undecodable request');
      return;
    }
    if (this.view === undefined) {
      // The first request decides: it carries the node that policies match on.
      if (request.node !== undefined)
        this.identity = withNode(this.identity, request.node.id, request.node.metadata);
      if (!this.admitWith(this.env.admit(this.identity))) return;
    }
    if (request.typeUrl === '') return;
    const state = this.types.get(request.typeUrl);
    if (state === undefined) {
      this.subscribe(request.typeUrl);
      return;
    }
    if (state.sentNonce === undefined || request.responseNonce !== state.sentNonce) return; // stale
    state.awaitingAck = false;
    if (request.errorDetail !== undefined) {
      state.nacks++;
      this.env.hooks.onNack?.(
        this.identity,
        state.typeUrl,
        state.sentVersion ?? '',
        request.errorDetail.message,
      );
      this.env.log.warn(
        { node: this.identity.nodeId, typeUrl: state.typeUrl, reason: request.errorDetail.message },
        'client rejected a response',
      );
    } else {
      state.ackedVersion = request.versionInfo;
      const latency = state.sentAt === undefined ? 0 : performance.now() - state.sentAt;
      this.env.hooks.onAck?.(this.identity, state.typeUrl, request.versionInfo, latency);
    }
    // Whatever changed while the response was out goes now; a NACKed version is not re-sent.
    if (this.needsPush(state, this.env.reader.current())) {
      this.due.add(state.typeUrl);
      this.flush();
    }
  }

  /** Applies an admission; refuses and closes the stream when it is a refusal. Returns whether it is admitted. */
  private admitWith(admission: Admission): boolean {
    if (!admission.admitted) {
      this.env.hooks.onRefuse?.(this.identity, admission.policy ?? '', admission.reason);
      this.call.emit('error', { code: grpcStatus.PERMISSION_DENIED, details: admission.reason });
      this.close(`refused: ${admission.reason}`, false);
      return false;
    }
    const first = this.view === undefined;
    if (first || admission.policy !== this.policy || admission.view.id !== this.view?.id) {
      this.env.hooks.onAdmit?.(this.identity, admission.policy, admission.view.id, first);
    }
    this.policy = admission.policy;
    this.view = admission.view;
    return true;
  }

  private subscribe(typeUrl: string): void {
    const resolved = this.env.kinds.resolveTypeUrl(typeUrl);
    if (resolved === undefined) {
      this.env.log.warn(
        { node: this.identity.nodeId, typeUrl },
        'unknown type URL: it will be answered empty',
      );
    }
    this.types.set(typeUrl, { typeUrl, kind: resolved?.kind, awaitingAck: false, nacks: 0 });
    this.due.add(typeUrl);
    this.flush();
  }

  /** A kind is served once every source that may hold it has synced (or the startup budget passed). */
  private ready(state: TypeState, snapshot: ConfigSnapshot): boolean {
    return state.kind === undefined || state.kind.envelope === 'bare'
      ? snapshot.ready
      : snapshot.readyFor(state.kind.key);
  }

  private needsPush(state: TypeState, snapshot: ConfigSnapshot): boolean {
    if (state.awaitingAck || !this.ready(state, snapshot)) return false;
    // MeshConfig goes once, when it can; istiod never acknowledges it, so it is never re-sent.
    if (state.kind?.envelope === 'bare')
      return state.sentVersion === undefined && this.env.meshConfig() !== undefined;
    if (this.view === undefined) return false;
    const version = this.env.responses.viewVersion(this.view, snapshot.kinds.get(state.kind?.key ?? ''));
    // Content decides, not the revisions named after it: content that went and came back while a
    // response was out is not sent again.
    return state.sentVersion === undefined || contentOf(version) !== contentOf(state.sentVersion);
  }

  private flush(): void {
    if (this.waitingForBudget) return;
    const snapshot = this.env.reader.current();
    while (!this.closed && this.due.size > 0) {
      const typeUrl = this.due.values().next().value;
      if (typeUrl === undefined) break;
      const state = this.types.get(typeUrl);
      if (state === undefined || !this.ready(state, snapshot)) {
        this.due.delete(typeUrl);
        continue;
      }
      const response = this.build(state, snapshot);
      if (response === undefined) {
        this.due.delete(typeUrl);
        continue;
      }
      // Built (and cached for the view) but not written until the budget has room; when it does,
      // this runs again and builds whatever is latest by then.
      const bytes = response.byteLength;
      if (!this.env.budget.take(bytes, this)) {
        this.waitingForBudget = true;
        return;
      }
      this.due.delete(typeUrl);
      const envelopeIsBare = state.kind?.envelope === 'bare';
      if (state.sentVersion !== undefined && contentOf(state.sentVersion) === contentOf(response.version)) {
        this.env.counters.wastedPushes++;
      }
      this.env.counters.pushes++;
      this.env.counters.bytesSent += bytes;
      state.sentVersion = response.version;
      state.sentNonce = response.nonce;
      state.sentAt = performance.now();
      state.awaitingAck = !envelopeIsBare;
      this.env.hooks.onPush?.(
        this.identity,
        typeUrl,
        response.version,
        response.byteLength,
        response.resourceCount,
      );
      this.inFlightBytes += bytes;
      this.write(response.chunks, bytes, () => {
        // After the stream ended its bytes were given back already.
        if (this.closed) return;
        this.inFlightBytes -= bytes;
        this.env.budget.release(bytes);
      });
    }
    this.env.budget.cancel(this);
  }

  private build(state: TypeState, snapshot: ConfigSnapshot): BuiltResponse | undefined {
    const kind = state.kind;
    if (kind?.envelope === 'bare') {
      const mesh = this.env.meshConfig();
      if (mesh === undefined || state.sentVersion !== undefined) return undefined;
      return this.env.responses.bareResponse(state.typeUrl, anyTypeUrl(kind.bodyType), mesh);
    }
    if (state.awaitingAck || this.view === undefined) return undefined;
    const kindSnapshot = kind === undefined ? undefined : snapshot.kinds.get(kind.key);
    const version = this.env.responses.viewVersion(this.view, kindSnapshot);
    if (state.sentVersion !== undefined && contentOf(version) === contentOf(state.sentVersion))
      return undefined;
    return this.env.responses.response(state.typeUrl, this.view, kindSnapshot);
  }

  private close(reason: string, endOurSide: boolean): void {
    if (this.closed) return;
    this.closed = true;
    // grpc-js never completes the writes of a cancelled call: give their bytes back now.
    this.env.budget.cancel(this);
    this.waitingForBudget = false;
    const inFlight = this.inFlightBytes;
    this.inFlightBytes = 0;
    if (inFlight > 0) this.env.budget.release(inFlight);
    if (endOurSide) this.call.end();
    this.env.hooks.onDisconnect?.(this.identity, reason);
    this.env.log.info(
      { node: this.identity.nodeId, peer: this.identity.peer, reason },
      'client disconnected',
    );
    this.onClose(this);
  }
}
