import * as grpc from '@grpc/grpc-js';
import { asyncScheduler, type SchedulerLike, type Subscription } from '../core/rx.js';
import type { Logger } from '../core/logger.js';
import type { ConfigResource } from '../core/resource.js';
import type { ConfigSnapshot, KindSnapshot, SnapshotReader } from '../merge/config-snapshot.js';
import { changesBetween } from '../merge/kind-changes.js';
import type { KindRegistry } from '../schema/kinds.js';
import type { AdsHooks } from './ads-hooks.js';
import type { ClientIdentity } from './client-identity.js';
import type { AdsProtocol } from './ads-protocol.js';
import { type AdsStream, ClientStream, type PushCounters, type StreamReport } from './client-stream.js';
import { DELTA_PROTOCOL } from './delta-protocol.js';
import type { AdsRequest } from './discovery-request.js';
import { SOTW_PROTOCOL } from './sotw-protocol.js';
import { abortUnavailable } from './frame-writer.js';
import { LogLineBudget } from '../core/log-line-budget.js';
import type { ClientHolding } from './policy/policy-guard.js';
import { PolicySet } from './policy/policy-set.js';
import { ResourceEncoder } from './resource-encoder.js';
import { ResponseCache } from './response-cache.js';
import { DEFAULT_STREAM_LIMITS, stallAfterFor, type StreamLimits } from './stream-limits.js';
import { ViewRegistry } from './view-registry.js';
import { DEFAULT_WRITE_BUDGET, WriteBudget, type WriteBudgetOptions } from './write-budget.js';
import { ADS_DELTA_METHOD, ADS_SOTW_METHOD } from '../wire/method-paths.js';

const identity = (b: Buffer): Buffer => b;
/** Longest stretch of background encoding between two turns of the event loop. */
const PREWARM_SLICE_MS = 5;

/**
 * The service definition with raw bytes on both sides: requests are decoded by the stream, and
 * responses are written as the shared, pre-encoded buffers of the response cache.
 */
const ADS_DEFINITION: grpc.ServiceDefinition = {
  StreamAggregatedResources: {
    path: ADS_SOTW_METHOD,
    requestStream: true,
    responseStream: true,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
  DeltaAggregatedResources: {
    path: ADS_DELTA_METHOD,
    requestStream: true,
    responseStream: true,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
};

export interface AdsServerOptions {
  readonly reader: SnapshotReader;
  readonly kinds: KindRegistry;
  readonly log: Logger;
  readonly hooks?: AdsHooks;
  /** Encoded MeshConfig to serve; when absent MeshConfig requests are never answered. */
  readonly meshConfig?: () => Uint8Array | undefined;
  /** Who gets what; default: no policies, everything to everyone. */
  readonly policies?: PolicySet;
  /** Bytes in flight over all streams and per stream; default {@link DEFAULT_WRITE_BUDGET}. */
  readonly writeBudget?: Partial<WriteBudgetOptions>;
  /**
   * What one stream may cost; default {@link DEFAULT_STREAM_LIMITS}. Without `stallAfterMs`, it
   * follows `sendTimeoutMs` (2 s, or the timeout when shorter).
   */
  readonly limits?: Partial<StreamLimits>;
  /** Distinct views kept at once (default 1000), and how long one outlives its last client (default 30 s). */
  readonly maxViews?: number;
  readonly viewGraceMs?: number;
  /** Runs send deadlines and view grace periods; default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
}

/** Default cap on distinct views (policy × revision) kept at once. */
export const DEFAULT_MAX_VIEWS = 1000;
/** Default time a view and its responses outlive the last client of the view. */
export const DEFAULT_VIEW_GRACE_MS = 30_000;

/** What the server has done since start, for `/debug/counters` and benchmarks. */
export interface AdsCounters {
  /** Objects encoded into response entries (at most once per object version while cached). */
  readonly encodes: number;
  /** Responses assembled from cached entries (once per type, view and content). */
  readonly assemblies: number;
  /**
   * Slabs the background encoding wrote a kind's first state into (see
   * `ResourceEncoder.framedAhead`); what it encodes later has memory of its own per object.
   */
  readonly aheadSlabs: number;
  /**
   * Blocks of framed objects concatenated for responses, blocks spliced from an earlier one
   * around the objects a change replaced, blocks one view took from another's as they were, and
   * the bytes copied into them.
   */
  readonly blocksBuilt: number;
  readonly blocksSpliced: number;
  readonly blocksShared: number;
  readonly blockBytesCopied: number;
  /**
   * Responses built from a view's own list because the parts of its kind it takes (see
   * `KindPartitions`) did not hold as many objects as the view: 0 unless the two disagree.
   */
  readonly partsMismatched: number;
  readonly streams: number;
  /** Responses written to streams. */
  readonly pushes: number;
  /** Bytes of responses written. */
  readonly bytesSent: number;
  /** Responses whose content the client already had; 0 unless something is wrong. */
  readonly wastedPushes: number;
  /**
   * Subscribed types the streams looked at for a push when snapshots arrived (once ready, those of
   * the kinds each snapshot moved, not every type of every stream) and when policies changed.
   */
  readonly snapshotChecks: number;
  /** Bytes handed to gRPC and not yet flushed, now and at most. */
  readonly bytesInFlight: number;
  readonly peakBytesInFlight: number;
  /** Streams waiting for the write budget. */
  readonly waitingStreams: number;
  /** Bytes in flight on streams whose peer stopped reading (not counted in `bytesInFlight`). */
  readonly parkedBytes: number;
  /** Times a stream was parked (its peer stopped reading), and streams closed by the send deadline. */
  readonly stalls: number;
  readonly sendTimeouts: number;
  /** Views kept (with clients or in their grace period), and those without clients. */
  readonly views: number;
  readonly idleViews: number;
  /** Responses kept, (view, kind) contents kept and lists of blocks kept, over all views. */
  readonly cachedResponses: number;
  readonly viewContents: number;
  readonly blockLists: number;
  /**
   * When the last snapshot reached the server (epoch ms, sub-ms precision): a benchmark on the
   * same machine splits a change's latency into before and after this point.
   */
  readonly lastSnapshotAtMs: number;
}

/**
 * gRPC channel options of the server: accept istiod's 30 s keepalive pings, no size limit on what
 * is sent, requests of at most `maxRequestBytes` (a larger one is refused before it is read), and
 * at most `maxStreamsPerConnection` streams open on one connection (HTTP/2 refuses the next one,
 * which the client sees as UNAVAILABLE): each open stream holds some 11 KB, and one connection
 * could otherwise open tens of thousands.
 */
function adsServerChannelOptions(
  limits: Pick<StreamLimits, 'maxRequestBytes' | 'maxStreamsPerConnection'>,
): grpc.ChannelOptions {
  return {
    'grpc.max_concurrent_streams': limits.maxStreamsPerConnection,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.http2.min_ping_interval_without_data_ms': 5_000,
    'grpc.max_receive_message_length': limits.maxRequestBytes,
    'grpc.max_send_message_length': -1,
    'grpc.keepalive_time_ms': 60_000,
    'grpc.keepalive_timeout_ms': 20_000,
  };
}

/**
 * The ADS server istiods connect to. It owns one subscription to the snapshot stream and fans
 * each snapshot out to every stream; streams share responses built once per view and version.
 */
export class AdsServer {
  private readonly server: grpc.Server;
  private readonly streams = new Set<AdsStream>();
  private readonly encoder: ResourceEncoder;
  readonly responses: ResponseCache;
  private snapshotSubscription: Subscription | undefined;
  /** Per kind, its snapshot in the last configuration snapshot (to tell what moved on). */
  private readonly lastKinds = new Map<string, KindSnapshot>();
  /** Whether the last configuration snapshot was ready (see `listen`). */
  private lastReady = false;
  private nextStreamId = 1;
  /** `close` began: new streams are refused with UNAVAILABLE. */
  private closing = false;
  private policySet: PolicySet;
  private readonly budget: WriteBudget;
  private readonly pushCounters: PushCounters = {
    pushes: 0,
    bytesSent: 0,
    wastedPushes: 0,
    snapshotChecks: 0,
    stalls: 0,
    sendTimeouts: 0,
  };
  private readonly views: ViewRegistry;
  private lastSnapshotAtMs = 0;
  /** Bumped by every background encoding run; a run stops when it is no longer the latest. */
  private prewarmRun = 0;
  /** Per kind, the snapshot a background run last encoded to the end (its numbers, not its objects). */
  private readonly prewarmed = new Map<string, { generation: number; serial: number | undefined }>();

  constructor(private readonly options: AdsServerOptions) {
    this.encoder = new ResourceEncoder(options.kinds);
    this.responses = new ResponseCache(this.encoder);
    this.policySet = options.policies ?? new PolicySet([]);
    this.budget = new WriteBudget({ ...DEFAULT_WRITE_BUDGET, ...options.writeBudget });
    const scheduler = options.scheduler ?? asyncScheduler;
    const sendTimeoutMs = options.limits?.sendTimeoutMs ?? DEFAULT_STREAM_LIMITS.sendTimeoutMs;
    const limits: StreamLimits = {
      ...DEFAULT_STREAM_LIMITS,
      stallAfterMs: stallAfterFor(sendTimeoutMs),
      ...options.limits,
    };
    this.server = new grpc.Server(adsServerChannelOptions(limits));
    this.views = new ViewRegistry({
      maxViews: options.maxViews ?? DEFAULT_MAX_VIEWS,
      graceMs: options.viewGraceMs ?? DEFAULT_VIEW_GRACE_MS,
      scheduler,
      onFree: (viewId) => this.responses.forgetView(viewId),
    });
    // One budget per kind of a stream's warnings, over every stream; the kinds are a closed set.
    const warnings = new Map<string, LogLineBudget>();
    const env = {
      reader: options.reader,
      responses: this.responses,
      kinds: options.kinds,
      meshConfig: options.meshConfig ?? (() => undefined),
      admit: (client: ClientIdentity) => this.policySet.admit(client),
      hooks: options.hooks ?? {},
      log: options.log,
      budget: this.budget,
      counters: this.pushCounters,
      views: this.views,
      limits,
      scheduler,
      disconnects: new LogLineBudget(() => scheduler.now()),
      overLimit: new LogLineBudget(() => scheduler.now()),
      warnings: (kind: string): LogLineBudget => {
        let budget = warnings.get(kind);
        if (budget === undefined) warnings.set(kind, (budget = new LogLineBudget(() => scheduler.now())));
        return budget;
      },
    };
    const open = <R extends AdsRequest>(protocol: AdsProtocol<R>) => {
      return (call: grpc.ServerDuplexStream<Uint8Array, Buffer>): void => {
        // A stream whose handler runs once closing began (its connection raced the shutdown) would
        // never be ended and would hold the exit for the whole grace period.
        if (this.closing) {
          abortUnavailable(call, 'meshmux is shutting down');
          return;
        }
        const id = this.nextStreamId++;
        // The first client ends a background run: its responses encode what they serve straight
        // into their blocks, and a run encoding into memory of its own would only be copied from
        // and take the CPU those responses need.
        this.prewarmRun++;
        this.encoder.endAhead();
        this.streams.add(new ClientStream(id, call, env, (s) => this.streams.delete(s), protocol));
      };
    };
    // istiod speaks state of the world only; delta serves other meshmuxes (`xds` with `delta: true`).
    this.server.addService(ADS_DEFINITION, {
      StreamAggregatedResources: open(SOTW_PROTOCOL),
      DeltaAggregatedResources: open(DELTA_PROTOCOL),
    });
  }

  /**
   * Binds `host:port` (port 0 picks one) with the given credentials (default plaintext h2c, which
   * is what istiod speaks before 1.26) and starts serving; resolves to the bound port. May be called
   * once per listener, e.g. a plaintext and a TLS port.
   */
  async listen(address: string, credentials = grpc.ServerCredentials.createInsecure()): Promise<number> {
    const port = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(address, credentials, (err, p) => (err ? reject(err) : resolve(p)));
    });
    this.snapshotSubscription ??= this.options.reader.snapshots$.subscribe((snapshot) => {
      this.lastSnapshotAtMs = performance.timeOrigin + performance.now();
      const moved = this.movedKinds(snapshot);
      // A ready snapshot waits for no source, so every kind is ready in it: between two ready ones
      // no kind's readiness moves, and a stream looks only at the kinds whose objects did.
      const bothReady = this.lastReady && snapshot.ready;
      this.lastReady = snapshot.ready;
      for (const stream of this.lightestFirst()) stream.onSnapshot(snapshot, bothReady ? moved : undefined);
      this.releaseObsolete(snapshot, moved);
      // Not before every source has answered: encoding would take the CPU the remaining sources'
      // first responses need, and delay the moment meshmux is ready.
      if (this.streams.size === 0 && snapshot.ready) this.prewarm(snapshot);
    });
    this.options.log.info({ address, port, tls: credentials._isSecure() }, 'ADS server listening');
    return port;
  }

  /**
   * The streams, those whose last responses weighed least first: a snapshot reaches the clients of
   * small views before HTTP/2 starts on the large responses of others, which would otherwise go
   * to the socket first wherever their streams connected first. Equal weights keep the order the
   * streams connected in.
   */
  private lightestFirst(): Iterable<AdsStream> {
    if (this.streams.size < 2) return this.streams;
    return [...this.streams].sort((a, b) => a.weight - b.weight);
  }

  /** The kinds whose kind snapshot differs between the last snapshot and `snapshot`: come, gone or changed. */
  private movedKinds(snapshot: ConfigSnapshot): ReadonlySet<string> {
    const moved = new Set<string>();
    for (const [kind, before] of this.lastKinds) if (snapshot.kinds.get(kind) !== before) moved.add(kind);
    for (const kind of snapshot.kinds.keys()) if (!this.lastKinds.has(kind)) moved.add(kind);
    return moved;
  }

  /**
   * Lets go of what a snapshot made obsolete. The encodings of objects no longer served leave the
   * encoder's cache. Views without clients keep what was built for them only while it is current:
   * once a kind moves on, what they hold of it (an older generation of its objects, and responses
   * framing them) is dropped, so an idle view never pins objects the configuration no longer has.
   * A client that returns within the grace period gets it built again from the current kinds.
   */
  private releaseObsolete(snapshot: ConfigSnapshot, moved: ReadonlySet<string>): void {
    for (const kind of moved) {
      const before = this.lastKinds.get(kind);
      // A kind new in this snapshot: nothing of it was encoded.
      if (before === undefined) continue;
      const { removed, added } = changesBetween(before, snapshot.kinds.get(kind));
      this.encoder.forget(removed, added);
    }
    this.lastKinds.clear();
    for (const k of snapshot.kinds.values()) this.lastKinds.set(k.kind, k);
    if (moved.size === 0 || this.views.idleViews === 0) return;
    for (const viewId of this.views.idleIds()) this.responses.forgetKinds(viewId, moved);
  }

  /**
   * With nobody connected and the snapshot ready, encodes its objects in the background, a few
   * milliseconds per turn of the event loop, so the first istiods to connect find them ready
   * instead of waiting for them to be encoded. A newer snapshot takes over, walking only the kinds
   * that changed (objects already encoded cost a lookup); a client connecting ends the run.
   */
  private prewarm(snapshot: ConfigSnapshot): void {
    const run = ++this.prewarmRun;
    // Only kinds whose generation moved since they were last walked to the end; of a kind whose
    // change since then the merge knows, only the objects it added.
    const kinds = [...snapshot.kinds.values()].filter(
      (k) => this.prewarmed.get(k.kind)?.generation !== k.generation,
    );
    // A kind never walked to the end is framed into shared slabs: its first state, objects that
    // live side by side. What a later run frames (the objects a change added, few and scattered in
    // time) gets memory of its own each: in slabs, a slab would stay for its one object still
    // served while changes came on and no istiod took them, slab after slab.
    const inSlabs = kinds.map((k) => this.prewarmed.get(k.kind) === undefined);
    const lists = kinds.map((k) => {
      const done = this.prewarmed.get(k.kind);
      return k.changes !== undefined && done?.serial !== undefined && k.changes.from === done.serial
        ? k.changes.added
        : k.resources;
    });
    let list = 0;
    let at = 0;
    const step = (): void => {
      if (run !== this.prewarmRun) return;
      const until = performance.now() + PREWARM_SLICE_MS;
      while (list < lists.length && performance.now() < until) {
        const resources = lists[list] as readonly ConfigResource[];
        const end = Math.min(at + 64, resources.length);
        if (inSlabs[list] === true)
          for (; at < end; at++) this.encoder.framedAhead(resources[at] as ConfigResource);
        else for (; at < end; at++) this.encoder.framed(resources[at] as ConfigResource);
        if (at === resources.length) {
          const done = kinds[list];
          if (done !== undefined)
            this.prewarmed.set(done.kind, { generation: done.generation, serial: done.serial });
          list++;
          at = 0;
        }
      }
      if (list < lists.length) setImmediate(step);
      else this.encoder.endAhead();
    };
    setImmediate(step);
  }

  /** The policies clients are looked up under. */
  get policies(): PolicySet {
    return this.policySet;
  }

  /** Replaces the policies; every stream is looked up again and receives only what its new view changes. */
  setPolicies(policies: PolicySet): void {
    this.policySet = policies;
    for (const stream of [...this.streams]) stream.reevaluate();
  }

  /** Every admitted client with the policy and view it is served under, to judge a change of the policies. */
  holdings(): ClientHolding[] {
    const out: ClientHolding[] = [];
    for (const stream of this.streams) {
      const holding = stream.holding();
      if (holding !== undefined) out.push(holding);
    }
    return out;
  }

  /** Reports of every open stream, for `/debug/syncz`. */
  reports(): StreamReport[] {
    return [...this.streams].map((s) => s.report());
  }

  /** Counters since start (a fresh object each call). */
  counters(): AdsCounters {
    const cache = this.responses.sizes();
    return {
      encodes: this.encoder.encodes,
      aheadSlabs: this.encoder.aheadSlabs,
      assemblies: this.responses.counters.assemblies,
      blocksBuilt: this.responses.blockCounters.blocksBuilt,
      blocksSpliced: this.responses.blockCounters.blocksSpliced,
      blocksShared: this.responses.blockCounters.blocksShared,
      blockBytesCopied: this.responses.blockCounters.bytesCopied,
      partsMismatched: this.responses.counters.partsMismatched,
      streams: this.streams.size,
      ...this.pushCounters,
      bytesInFlight: this.budget.bytesInFlight,
      peakBytesInFlight: this.budget.peakBytes,
      waitingStreams: this.budget.waiting,
      parkedBytes: this.budget.parkedBytes,
      views: this.views.size,
      idleViews: this.views.idleViews,
      cachedResponses: cache.responses,
      viewContents: cache.contents,
      blockLists: cache.blockLists,
      lastSnapshotAtMs: this.lastSnapshotAtMs,
    };
  }

  /**
   * Ends every stream, then stops the server. Returns as soon as every stream is closed; `graceMs`
   * only bounds how long in-flight responses and statuses may take to flush before connections are
   * cut.
   */
  async close(graceMs = 5_000): Promise<void> {
    this.closing = true;
    this.snapshotSubscription?.unsubscribe();
    this.prewarmRun++;
    const started = performance.now();
    for (const stream of [...this.streams]) stream.end();
    const forced = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve(true);
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    this.views.close();
    this.options.log.info(
      { graceMs, forced, ms: Math.round(performance.now() - started) },
      'ADS server stopped',
    );
  }
}
