import { type ServerDuplexStream, status as grpcStatus } from '@grpc/grpc-js';
import type { SchedulerLike, Subscription } from '../core/rx.js';
import { MeshmuxError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { truncateForLog, truncateRecordForLog } from '../core/truncate-for-log.js';
import type { ConfigSnapshot, SnapshotReader } from '../merge/config-snapshot.js';
import type { EnvelopeBuilders, KindDescriptor, KindRegistry } from '../schema/kinds.js';
import type { AdsHooks } from './ads-hooks.js';
import type { AdsProtocol, TypeSubscription } from './ads-protocol.js';
import { anonymousIdentity, type ClientIdentity, parseSans, withNode } from './client-identity.js';
import type { ClientView } from './client-view.js';
import type { Admission } from './policy/policy-set.js';
import type { AdsRequest } from './discovery-request.js';
import { abortUnavailable, type FrameWriter, frameWriterFor } from './frame-writer.js';
import { type BuiltResponse, contentOf, type ResponseCache } from './response-cache.js';
import { SendDeadline } from './send-deadline.js';
import type { LogLineBudget } from '../core/log-line-budget.js';
import {
  MAX_TYPE_URL_CHARS,
  type LimitName,
  maxEncodedMetadataBytes,
  type StreamLimits,
} from './stream-limits.js';
import type { ViewRegistry } from './view-registry.js';
import { WarningLimiter } from './warning-limiter.js';
import type { BudgetWaiter, WriteBudget } from './write-budget.js';

/** What every stream adds to; the server reads it for `/debug/counters`. Plain numbers, only ever increased. */
export interface PushCounters {
  /** Responses written. */
  pushes: number;
  /** Bytes of responses written (DiscoveryResponse bytes, without gRPC framing). */
  bytesSent: number;
  /** Responses whose content the client already had (same content part of `version_info`). */
  wastedPushes: number;
  /** Subscribed types a stream looked at for a push when a snapshot arrived or policies changed. */
  snapshotChecks: number;
  /** Times a stream's oldest response went unread long enough for its bytes to leave the global budget. */
  stalls: number;
  /** Streams closed because a response did not flush within the send deadline. */
  sendTimeouts: number;
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
  /** Views in use: counted per client, capped, freed after their last client leaves. */
  readonly views: ViewRegistry;
  readonly limits: StreamLimits;
  /** Runs send deadlines and measures time for rate-limited warnings. */
  readonly scheduler: SchedulerLike;
  /** Bounds the server's lines about streams that end, over every stream. */
  readonly disconnects: LogLineBudget;
  /** Bounds the server's lines about streams refused for going over a limit, over every stream. */
  readonly overLimit: LogLineBudget;
  /**
   * Bounds the server's lines of each kind of a stream's warnings (see {@link WarningLimiter}),
   * over every stream: a client that opens stream after stream, each warned about once, must
   * not flood the log either. Kinds are the closed set the streams use.
   */
  readonly warnings: (kind: string) => LogLineBudget;
}

/** Per type URL state of one stream. */
interface TypeState<R extends AdsRequest> {
  readonly typeUrl: string;
  /** Absent for type URLs meshmux does not know: answered as empty. */
  readonly kind: KindDescriptor | undefined;
  /** What the protocol variant keeps of the subscription. */
  readonly subscription: TypeSubscription<R>;
  sentVersion?: string;
  sentNonce?: string;
  sentAt?: number;
  /** Bytes of the last response sent. */
  sentBytes?: number;
  ackedVersion?: string;
  awaitingAck: boolean;
  nacks: number;
}

/** A snapshot of a stream's state for `/debug/syncz`. */
export interface StreamReport {
  readonly client: ClientIdentity;
  /** `sotw` (state of the world, what istiod speaks) or `delta`. */
  readonly protocol: 'sotw' | 'delta';
  readonly policy: string;
  readonly view: string;
  readonly connectedAt: string;
  readonly types: ReadonlyArray<{
    typeUrl: string;
    sentVersion?: string;
    ackedVersion?: string;
    awaitingAck: boolean;
    nacks: number;
    /** Where the istiod stands on this type against what meshmux would send it now. */
    sync: TypeSync;
  }>;
}

/**
 * `STALE`: a response is unacknowledged, or state waits to be sent (also a first one, held until
 * the sources are ready); `NOT SENT`: nothing was sent and nothing waits (MeshConfig without a
 * `mesh` section); `NACKED`: the istiod rejected the last response (it keeps the one before);
 * `SYNCED`: it acknowledged the current state (or, for a type never acknowledged, got it).
 */
export type TypeSync = 'SYNCED' | 'STALE' | 'NACKED' | 'NOT SENT';

type Call = ServerDuplexStream<Uint8Array, Buffer>;

/** What the server does with a stream, whichever variant of the protocol it speaks. */
export interface AdsStream {
  readonly client: ClientIdentity;
  /**
   * Queues a push for every subscribed type whose content, as this client sees it, changed.
   * `moved`: the kinds whose objects or readiness may differ from the snapshot before (every kind
   * when absent); a type of any other kind is as it was, and is not looked at.
   */
  onSnapshot(snapshot: ConfigSnapshot, moved?: ReadonlySet<string>): void;
  /**
   * Bytes of the last response sent for each type, summed: what its next pushes are likely to
   * weigh (a whole view for a state-of-the-world client, a few objects for a delta one).
   */
  readonly weight: number;
  /** Looks the client up again after the policies changed. */
  reevaluate(): void;
  /** The client with the policy and view it is served under; undefined before it is admitted. */
  holding():
    { readonly client: ClientIdentity; readonly policy: string; readonly view: ClientView } | undefined;
  report(): StreamReport;
  /** Ends the stream from the server side (shutdown). */
  end(): void;
}

/**
 * One client's ADS stream, in either variant of the protocol (`protocol`: what a response carries).
 * The first request for a type URL subscribes whatever nonce it carries (istiod puts a timestamp
 * there); later requests are ACKs or NACKs of the last response sent for that type, and any other
 * nonce is stale and ignored (a delta request may still change the subscription). At most one
 * response per type is awaiting its ACK; newer state waits and is sent, latest only, when the ACK
 * arrives. MeshConfig is never awaited, since istiod never acknowledges it.
 */
export class ClientStream<R extends AdsRequest> implements AdsStream, BudgetWaiter {
  private identity: ClientIdentity;
  private view: ClientView | undefined;
  private policy = '';
  private readonly types = new Map<string, TypeState<R>>();
  /** Type URLs with a push due, in order of arrival. */
  private readonly due = new Set<string>();
  private closed = false;
  /** See {@link AdsStream.weight}. */
  private lastSentBytes = 0;
  /** Queued in the write budget. */
  private waitingForBudget = false;
  private readonly write: FrameWriter;
  private readonly connectedAt = new Date();
  private readonly deadline: SendDeadline;
  /** The peer has not read the oldest unflushed response for a while. */
  private stalled = false;
  private readonly warnings: WarningLimiter;
  /** Closes the stream unless a first request admits its client in time. */
  private firstRequestDeadline: Subscription | undefined;

  constructor(
    streamId: number,
    private readonly call: Call,
    private readonly env: StreamEnvironment,
    private readonly onClose: (stream: AdsStream) => void,
    private readonly protocol: AdsProtocol<R>,
  ) {
    const certificate = call.getAuthContext().sslPeerCertificate;
    this.identity = anonymousIdentity(streamId, call.getPeer(), parseSans(certificate?.subjectaltname));
    this.write = frameWriterFor(call);
    this.warnings = new WarningLimiter(() => env.scheduler.now());
    this.deadline = new SendDeadline({
      scheduler: env.scheduler,
      stallAfterMs: env.limits.stallAfterMs,
      timeoutMs: env.limits.sendTimeoutMs,
      onStall: () => this.onStall(),
      onTimeout: (pendingMs) => this.onSendTimeout(pendingMs),
    });
    call.on('data', (bytes: Uint8Array) => this.onData(bytes));
    call.on('end', () => this.close('client closed the stream', true));
    call.on('error', (err: Error) => this.close(`stream error: ${err.message}`, false));
    call.on('cancelled', () => this.close('cancelled', false));
    this.firstRequestDeadline = env.scheduler.schedule(
      () => this.onFirstRequestTimeout(),
      env.limits.firstRequestTimeoutMs,
    );
    env.hooks.onConnect?.(this.identity);
  }

  get client(): ClientIdentity {
    return this.identity;
  }

  /** The address the client connects from: the write budget's line takes turns between addresses. */
  get peerIp(): string {
    return this.identity.peerIp;
  }

  get weight(): number {
    return this.lastSentBytes;
  }

  /** Queues a push for every subscribed type whose content, as this client sees it, changed. */
  onSnapshot(snapshot: ConfigSnapshot, moved?: ReadonlySet<string>): void {
    if (this.view === undefined) return;
    for (const state of this.types.values()) {
      // What decides a push of a kind that did not move is as it was at the last snapshot, or
      // was looked at since (an ACK, a request): only MeshConfig (sent once, whatever the
      // snapshot) and types no kind serves (answered once everything is ready) are looked at anyway.
      const kind = state.kind;
      if (
        moved !== undefined &&
        kind !== undefined &&
        !moved.has(kind.key) &&
        kind.envelope.sentOnce !== true &&
        !kind.envelope.waitsForEverySource
      )
        continue;
      this.env.counters.snapshotChecks++;
      if (this.needsPush(state, snapshot)) this.due.add(state.typeUrl);
    }
    this.flush();
  }

  /** The write budget has room again: send what is latest now. */
  resume(): void {
    this.waitingForBudget = false;
    this.flush();
  }

  /**
   * Ends the stream from the server side (shutdown). A stream with nothing left to flush gets its
   * status at once; one still holding unflushed bytes is reset with UNAVAILABLE at once, whether
   * its peer is known to stall or only slow to read (say, it connected just before shutdown):
   * waiting for it would hold the exit up to the grace period, and the istiod reconnects to
   * another replica and gets the whole state there anyway.
   */
  end(): void {
    if (this.closed) return;
    if (this.stalled || this.env.budget.heldBy(this) > 0)
      abortUnavailable(this.call, 'meshmux is shutting down');
    else this.call.end();
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

  holding(): { client: ClientIdentity; policy: string; view: ClientView } | undefined {
    if (this.view === undefined || this.closed) return undefined;
    return { client: this.identity, policy: this.policy, view: this.view };
  }

  /** Client-supplied strings in it are truncated: it goes to debug pages and the status page. */
  report(): StreamReport {
    const c = this.identity;
    return {
      client: {
        ...c,
        nodeId: truncateForLog(c.nodeId),
        pod: truncateForLog(c.pod),
        namespace: truncateForLog(c.namespace),
        revision: truncateForLog(c.revision),
        metadata: truncateRecordForLog(c.metadata),
        sans: c.sans.slice(0, 16).map((san) => truncateForLog(san)),
      },
      protocol: this.protocol.name,
      policy: this.policy,
      view: truncateForLog(this.view?.id ?? ''),
      connectedAt: this.connectedAt.toISOString(),
      types: [...this.types.values()].map((t) => ({
        typeUrl: truncateForLog(t.typeUrl),
        ...(t.sentVersion === undefined ? {} : { sentVersion: t.sentVersion }),
        ...(t.ackedVersion === undefined ? {} : { ackedVersion: t.ackedVersion }),
        awaitingAck: t.awaitingAck,
        nacks: t.nacks,
        sync: this.syncOf(t),
      })),
    };
  }

  private syncOf(t: TypeState<R>): TypeSync {
    if (t.awaitingAck || this.due.has(t.typeUrl)) return 'STALE';
    if (t.sentVersion === undefined) return 'NOT SENT';
    if (t.nacks > 0 && t.ackedVersion !== t.sentVersion && t.kind?.envelope.awaitsAck !== false)
      return 'NACKED';
    return 'SYNCED';
  }

  private onData(bytes: Uint8Array): void {
    // Requests queued before a refusal still arrive: reading them would only cost.
    if (this.closed) return;
    const first = this.view === undefined;
    let request: R;
    try {
      if (first && !this.encodedMetadataWithinLimit(this.protocol.metadataBytes(bytes))) return;
      request = this.protocol.decode(bytes, first);
    } catch (err) {
      const message = this.protocol.name === 'delta' ? 'DeltaDiscoveryRequest' : 'DiscoveryRequest';
      const error = new MeshmuxError('DECODE', `undecodable ${message}: ${String(err)}`, {
        file: `stream ${this.identity.streamId} from ${this.identity.peer}`,
      });
      this.env.hooks.onBadRequest?.(this.identity, error);
      this.warn(
        'undecodable',
        { peer: this.identity.peer, err: truncateForLog(error.message) },
        'ignored an undecodable request',
      );
      return;
    }
    if (first) {
      // The first request decides: it carries the node that policies match on.
      if (request.node !== undefined) {
        if (!this.nodeWithinLimits(request.node.id, request.node.metadata)) return;
        this.identity = withNode(this.identity, request.node.id, request.node.metadata);
      }
      if (!this.admitWith(this.env.admit(this.identity))) return;
    }
    if (request.typeUrl === '') return;
    const state = this.types.get(request.typeUrl);
    if (state === undefined) {
      if (request.typeUrl.length > MAX_TYPE_URL_CHARS) {
        this.refuseOverLimit(
          'type-url-length',
          `a type URL of ${request.typeUrl.length} characters is over the server limit of ${MAX_TYPE_URL_CHARS}: ${truncateForLog(request.typeUrl, 128)}`,
        );
        return;
      }
      const max = this.env.limits.maxTypesPerStream;
      if (this.types.size >= max) {
        this.refuseOverLimit(
          'types-per-stream',
          `a stream may subscribe to at most ${max} type URLs (server limit maxTypesPerStream); ${truncateForLog(request.typeUrl, 128)} would be one more`,
        );
        return;
      }
      this.subscribe(request);
      return;
    }
    const owed = state.subscription.update(request);
    if (state.sentNonce === undefined || request.responseNonce !== state.sentNonce) {
      // Stale (or, in delta, a subscription change alone).
      if (owed) {
        this.due.add(state.typeUrl);
        this.flush();
      }
      return;
    }
    state.awaitingAck = false;
    if (request.errorDetail !== undefined) {
      state.nacks++;
      this.env.hooks.onNack?.(
        this.identity,
        state.typeUrl,
        state.sentVersion ?? '',
        request.errorDetail.message,
      );
      this.warn(
        'nack',
        {
          node: truncateForLog(this.identity.nodeId),
          typeUrl: truncateForLog(state.typeUrl),
          reason: truncateForLog(request.errorDetail.message),
        },
        'client rejected a response',
      );
    } else {
      state.ackedVersion = this.protocol.ackedVersion(request, state.sentVersion);
      const latency = state.sentAt === undefined ? 0 : performance.now() - state.sentAt;
      this.env.hooks.onAck?.(this.identity, state.typeUrl, state.ackedVersion, latency);
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
      this.refuse(grpcStatus.PERMISSION_DENIED, admission.reason, `refused: ${admission.reason}`);
      return false;
    }
    const previous = this.view;
    let view = admission.view;
    if (previous?.id !== view.id) {
      const shared = this.env.views.acquire(view);
      if (shared === undefined) {
        this.refuseOverLimit(
          'max-views',
          `meshmux already serves its maximum of distinct views (server limit maxViews), each to connected clients; this client would need another (policy ${admission.policy}, revision ${truncateForLog(this.identity.revision, 64) || '(none)'})`,
          grpcStatus.RESOURCE_EXHAUSTED,
        );
        return false;
      }
      view = shared;
      if (previous !== undefined) this.env.views.release(previous);
    } else if (previous.partition?.scheme.id === view.partition?.scheme.id) {
      view = previous;
    } else {
      // The same filter in a configuration whose policies split kinds otherwise (a policy beside
      // it changed): its clients take the new split, as the views of the new policies do, so one
      // split of each kind serves every view.
      this.env.views.refresh(view);
    }
    const first = previous === undefined;
    if (first || admission.policy !== this.policy || view.id !== previous.id) {
      this.env.hooks.onAdmit?.(this.identity, admission.policy, truncateForLog(view.id), first);
    }
    this.policy = admission.policy;
    this.view = view;
    this.firstRequestDeadline?.unsubscribe();
    this.firstRequestDeadline = undefined;
    return true;
  }

  /** Checks the node against the admission limits; refuses the stream when it is over one. */
  private nodeWithinLimits(nodeId: string, metadata: Readonly<Record<string, unknown>>): boolean {
    const { maxNodeIdLength, maxMetadataBytes } = this.env.limits;
    if (nodeId.length > maxNodeIdLength) {
      this.refuseOverLimit(
        'node-id-length',
        `node id is ${nodeId.length} characters, over the server limit maxNodeIdLength of ${maxNodeIdLength} (it starts ${JSON.stringify(nodeId.slice(0, 64))})`,
      );
      return false;
    }
    const metadataBytes = Buffer.byteLength(JSON.stringify(metadata));
    if (metadataBytes > maxMetadataBytes) {
      this.refuseOverLimit(
        'metadata-size',
        `node metadata is ${metadataBytes} bytes as JSON, over the server limit maxMetadataBytes of ${maxMetadataBytes}`,
      );
      return false;
    }
    return true;
  }

  /** Checks the node metadata's encoded size before it is decoded; refuses the stream when it is over the bound. */
  private encodedMetadataWithinLimit(encodedBytes: number): boolean {
    const { maxMetadataBytes } = this.env.limits;
    const bound = maxEncodedMetadataBytes(maxMetadataBytes);
    if (encodedBytes <= bound) return true;
    this.refuseOverLimit(
      'metadata-size',
      `node metadata is ${encodedBytes} bytes encoded, over the ${bound} that metadata within the server limit maxMetadataBytes of ${maxMetadataBytes} (bytes as JSON) may take`,
    );
    return false;
  }

  /** Refuses the stream for going over a limit, with a message naming it. */
  private refuseOverLimit(
    limit: LimitName,
    message: string,
    code: grpcStatus = grpcStatus.INVALID_ARGUMENT,
  ): void {
    this.env.hooks.onLimit?.(this.identity, limit);
    // A client looping over streams it knows are refused must not flood the log: the count is in the metrics.
    const line = this.env.overLimit.allow();
    if (line.log) {
      this.env.log.warn(
        {
          node: truncateForLog(this.identity.nodeId),
          peer: this.identity.peer,
          limit,
          reason: message,
          ...(line.leftOut === 0 ? {} : { notLoggedBefore: line.leftOut }),
        },
        'client refused: over a limit',
      );
    }
    this.refuse(code, message, `refused: ${limit}`);
  }

  /**
   * Ends the stream with status `code`. It is closed first, under `reason`: the status is emitted
   * as an 'error' of the call, and the stream's own listener would otherwise close it as a
   * transport error, whose reason (the log line, the disconnect hook, the trace) is not this one.
   */
  private refuse(code: grpcStatus, details: string, reason: string): void {
    this.close(reason, false);
    this.call.emit('error', { code, details });
  }

  /**
   * Logs a line unless one of the same kind was logged on this stream in the last few seconds (see
   * {@link WarningLimiter}) or the server's lines of that kind are spent for now (`warnings`).
   */
  private warn(
    kind: string,
    fields: Record<string, unknown>,
    message: string,
    level: 'warn' | 'info' = 'warn',
  ): void {
    const { log, suppressed } = this.warnings.allow(kind);
    if (!log) return;
    const line = this.env.warnings(kind).allow();
    if (!line.log) return;
    this.env.log[level](
      {
        ...fields,
        ...(suppressed > 0 ? { suppressed } : {}),
        ...(line.leftOut > 0 ? { notLoggedBefore: line.leftOut } : {}),
      },
      message,
    );
  }

  /**
   * No request admitted the client in time: the stream ends, so streams that never send one (a
   * broken client, or one opening thousands on a connection) cannot pile up. Only the disconnection
   * line is logged, which is bounded over every stream.
   */
  private onFirstRequestTimeout(): void {
    if (this.closed || this.view !== undefined) return;
    const ms = this.env.limits.firstRequestTimeoutMs;
    this.env.hooks.onLimit?.(this.identity, 'first-request-timeout');
    this.refuse(
      grpcStatus.DEADLINE_EXCEEDED,
      `no request admitted the client within the server limit firstRequestTimeout of ${ms} ms`,
      'refused: first-request-timeout',
    );
  }

  /** The peer has not read a response for a while: its bytes stop holding everyone else back. */
  private onStall(): void {
    if (this.closed) return;
    this.env.counters.stalls++;
    this.stalled = true;
    this.env.budget.park(this);
    this.warn(
      'stall',
      {
        node: truncateForLog(this.identity.nodeId),
        peer: this.identity.peer,
        heldBytes: this.env.budget.heldBy(this),
      },
      'client is not reading: its responses no longer count against the shared write budget',
      'info',
    );
  }

  /** A response did not flush within the send deadline: the stream ends so the istiod reconnects. */
  private onSendTimeout(pendingMs: number): void {
    if (this.closed) return;
    this.env.counters.sendTimeouts++;
    this.env.hooks.onLimit?.(this.identity, 'send-timeout');
    const heldBytes = this.env.budget.heldBy(this);
    this.env.log.warn(
      { node: truncateForLog(this.identity.nodeId), peer: this.identity.peer, pendingMs, heldBytes },
      'closing a stream whose client did not read its response within the send timeout',
    );
    abortUnavailable(
      this.call,
      `response not read within the send timeout of ${this.env.limits.sendTimeoutMs} ms; reconnect`,
    );
    this.close(`send timeout after ${Math.round(pendingMs)} ms`, false);
  }

  private subscribe(request: R): void {
    const typeUrl = request.typeUrl;
    const resolved = this.env.kinds.resolveTypeUrl(typeUrl);
    if (resolved === undefined) {
      this.warn(
        'unknown-type',
        { node: truncateForLog(this.identity.nodeId), typeUrl: truncateForLog(typeUrl) },
        'unknown type URL: it will be answered empty',
      );
    }
    this.types.set(typeUrl, {
      typeUrl,
      kind: resolved?.kind,
      subscription: this.protocol.subscribe(typeUrl, request, this.env.responses),
      awaitingAck: false,
      nacks: 0,
    });
    this.due.add(typeUrl);
    this.flush();
  }

  /** A kind is served once every source that may hold it has synced (or the startup budget passed). */
  private ready(state: TypeState<R>, snapshot: ConfigSnapshot): boolean {
    // An unknown type waits for everything: it is answered empty, once nothing can still arrive.
    if (state.kind === undefined || state.kind.envelope.waitsForEverySource) return snapshot.ready;
    return snapshot.readyFor(state.kind.key);
  }

  private needsPush(state: TypeState<R>, snapshot: ConfigSnapshot): boolean {
    if (state.awaitingAck || !this.ready(state, snapshot)) return false;
    // A kind sent once (MeshConfig, never acknowledged) goes when it can and is never re-sent.
    if (state.kind?.envelope.sentOnce === true)
      return state.sentVersion === undefined && this.env.meshConfig() !== undefined;
    if (this.view === undefined) return false;
    const version = this.env.responses.viewVersion(this.view, snapshot.kinds.get(state.kind?.key ?? ''));
    // Content decides, not the revisions named after it: content that went and came back while a
    // response was out is not sent again.
    return (
      state.sentVersion === undefined ||
      state.subscription.owed ||
      contentOf(version) !== contentOf(state.sentVersion)
    );
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
      if (state.sentVersion !== undefined && contentOf(state.sentVersion) === contentOf(response.version)) {
        this.env.counters.wastedPushes++;
      }
      this.env.counters.pushes++;
      this.env.counters.bytesSent += bytes;
      state.subscription.sent(response);
      state.sentVersion = response.version;
      state.sentNonce = response.nonce;
      this.lastSentBytes += bytes - (state.sentBytes ?? 0);
      state.sentBytes = bytes;
      state.sentAt = performance.now();
      state.awaitingAck = state.kind?.envelope.awaitsAck ?? true;
      this.env.hooks.onPush?.(
        this.identity,
        typeUrl,
        response.version,
        response.byteLength,
        response.resourceCount,
      );
      this.deadline.written();
      this.write(response.chunks, bytes, () => {
        // After the stream ended its bytes were given back already.
        if (this.closed) return;
        this.stalled = false;
        this.deadline.flushed();
        this.env.budget.release(bytes, this);
      });
    }
    this.env.budget.cancel(this);
  }

  private build(state: TypeState<R>, snapshot: ConfigSnapshot): BuiltResponse | undefined {
    const kind = state.kind;
    const builders: EnvelopeBuilders<BuiltResponse> = {
      bare: (bodyTypeUrl) => {
        const mesh = this.env.meshConfig();
        if (mesh === undefined || state.sentVersion !== undefined) return undefined;
        return state.subscription.bare(bodyTypeUrl, mesh);
      },
      mcpResources: () => {
        if (state.awaitingAck || this.view === undefined) return undefined;
        const kindSnapshot = kind === undefined ? undefined : snapshot.kinds.get(kind.key);
        const version = this.env.responses.viewVersion(this.view, kindSnapshot);
        if (
          state.sentVersion !== undefined &&
          !state.subscription.owed &&
          contentOf(version) === contentOf(state.sentVersion)
        )
          return undefined;
        return state.subscription.resources(this.view, kindSnapshot, kind !== undefined);
      },
    };
    // An unknown type is answered as an empty list of MCP resources.
    return kind === undefined ? builders.mcpResources() : kind.envelope.build(kind.bodyType, builders);
  }

  private close(reason: string, endOurSide: boolean): void {
    if (this.closed) return;
    this.closed = true;
    this.deadline.stop();
    this.firstRequestDeadline?.unsubscribe();
    // grpc-js never completes the writes of a cancelled call: give their bytes back now.
    this.waitingForBudget = false;
    this.env.budget.forget(this);
    if (this.view !== undefined) this.env.views.release(this.view);
    if (endOurSide) this.call.end();
    this.env.hooks.onDisconnect?.(this.identity, reason);
    // A flood of streams opened and reset must not flood the log: the count is in the metrics.
    const line = this.env.disconnects.allow();
    if (line.log) {
      this.env.log.info(
        {
          node: truncateForLog(this.identity.nodeId),
          peer: this.identity.peer,
          reason,
          ...(line.leftOut === 0 ? {} : { notLoggedBefore: line.leftOut }),
        },
        'client disconnected',
      );
    }
    this.onClose(this);
  }
}
