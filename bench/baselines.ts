/**
 * The servers meshmux is measured against, run in the same process slot and on the same core:
 *
 * - {@link RawFanout}: the limit. Pre-encoded per-policy responses written to every stream with
 *   at most 16 writes in flight, each handed to HTTP/2 without a copy (meshmux's own writer, the
 *   cheapest way out of a grpc-js server); no merge, no encoding, no bookkeeping. Pushes on
 *   command, for the raw push time of a view.
 * - {@link EmulatedServer} `naive`: the same sources and merge as meshmux, then every object
 *   re-encoded for every client on every push, no coalescing.
 * - `istiod`: naive encoding done twice per object per client per push (as istiod's MCP server
 *   marshals), debounce 100 ms quiet / 10 s at most, 25 concurrent pushes, latest state per client.
 * - `nacos`: debounce 100 ms / 5 s, every connection re-serialized and pushed on every event.
 */
import * as grpc from '@grpc/grpc-js';
import { Subscription } from 'rxjs';
import type { ConfigResource } from '../src/core/resource.js';
import { anonymousIdentity, withNode } from '../src/downstream/client-identity.js';
import type { ClientView } from '../src/downstream/client-view.js';
import { decodeDiscoveryRequest } from '../src/downstream/discovery-request.js';
import { type FrameWriter, frameWriterFor } from '../src/downstream/frame-writer.js';
import { DEFAULT_WRITE_BUDGET } from '../src/downstream/write-budget.js';
import { PolicySet } from '../src/downstream/policy/policy-set.js';
import { ResourceEncoder } from '../src/downstream/resource-encoder.js';
import type { ConfigSnapshot } from '../src/merge/config-snapshot.js';
import type { MergeEngine } from '../src/merge/merge-engine.js';
import { KINDS } from '../src/schema/kinds.js';
import type { MeshmuxConfig } from '../src/settings/meshmux-config.js';
import { CONFIG_TYPE_URLS, POLICIES, type MeshModel, type PolicyName, SE_URL } from './fixtures.js';
import { assembleResponse, RAW_SOTW_ADS } from './wire-scan.js';

const SERVER_OPTIONS: grpc.ServerOptions = {
  'grpc.max_send_message_length': -1,
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
};

/** Counters every server reports (meshmux reports these and more on `/debug/counters`). */
export interface BaselineCounters {
  encodes: number;
  assemblies: number;
  pushes: number;
  bytesSent: number;
  wastedPushes: number;
  streams: number;
}

type Call = grpc.ServerDuplexStream<Buffer, Buffer>;

function adsServer(handler: (call: Call) => void): grpc.Server {
  const server = new grpc.Server(SERVER_OPTIONS);
  server.addService(RAW_SOTW_ADS, { StreamAggregatedResources: handler });
  return server;
}

async function bind(server: grpc.Server): Promise<number> {
  return new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) =>
      err ? reject(err) : resolve(port),
    ),
  );
}

/** The fleet's policy from an istiod node id (`...~istiod-<policy>-<n>.<ns>~...`). */
function policyOfNode(nodeId: string): PolicyName {
  const m = /~istiod-(core|east|edge)-/.exec(nodeId);
  return (m?.[1] ?? 'core') as PolicyName;
}

/**
 * Writes in order, first come first served, with at most `maxWrites` in flight, or (with
 * `maxBytes`) at most that many bytes handed to HTTP/2 and not yet sent, as meshmux's write budget
 * bounds them (a write larger than the whole budget goes alone). A writer drops writes to a
 * stream that is gone without calling back: `forget` gives back what such a stream held.
 */
class WriteQueue {
  private inFlight = 0;
  private bytesInFlight = 0;
  private readonly queue: Array<{
    readonly writer: FrameWriter;
    readonly bytes: number;
    readonly go: () => void;
  }> = [];
  /** Per writer, its writes in flight and not yet called back: what each gives back. */
  private readonly held = new Map<FrameWriter, Set<{ bytes: number }>>();
  constructor(private readonly limit: { readonly maxWrites?: number; readonly maxBytes?: number }) {}

  write(writer: FrameWriter, bytes: Buffer, done?: () => void): void {
    const go = (): void => {
      const entry = { bytes: bytes.byteLength };
      let mine = this.held.get(writer);
      if (mine === undefined) this.held.set(writer, (mine = new Set()));
      mine.add(entry);
      this.inFlight++;
      this.bytesInFlight += entry.bytes;
      writer([bytes], bytes.byteLength, () => {
        if (!this.release(writer, entry)) return;
        done?.();
        this.drain();
      });
    };
    if (this.queue.length === 0 && this.fits(bytes.byteLength)) go();
    else this.queue.push({ writer, bytes: bytes.byteLength, go });
  }

  /** The stream behind `writer` is gone: its writes in flight are given back, its queued ones dropped. */
  forget(writer: FrameWriter): void {
    for (const entry of this.held.get(writer) ?? []) this.release(writer, entry);
    this.held.delete(writer);
    for (let i = this.queue.length - 1; i >= 0; i--)
      if (this.queue[i]?.writer === writer) this.queue.splice(i, 1);
    this.drain();
  }

  /** Gives back one write's share; false when it was given back already. */
  private release(writer: FrameWriter, entry: { bytes: number }): boolean {
    const mine = this.held.get(writer);
    if (mine?.delete(entry) !== true) return false;
    this.inFlight--;
    this.bytesInFlight -= entry.bytes;
    return true;
  }

  private fits(bytes: number): boolean {
    if (this.inFlight === 0) return true;
    if (this.limit.maxWrites !== undefined && this.inFlight >= this.limit.maxWrites) return false;
    return this.limit.maxBytes === undefined || this.bytesInFlight + bytes <= this.limit.maxBytes;
  }

  private drain(): void {
    while (this.queue.length > 0 && this.fits((this.queue[0] as { bytes: number }).bytes)) {
      this.queue.shift()?.go();
    }
  }
}

/** The raw fan-out limit: pre-encoded responses, nothing else. */
function zeroCounters(): BaselineCounters {
  return { encodes: 0, assemblies: 0, pushes: 0, bytesSent: 0, wastedPushes: 0, streams: 0 };
}

export class RawFanout {
  private readonly server = adsServer((call) => this.onStream(call));
  private readonly streams = new Map<Call, { policy: PolicyName; writer: FrameWriter }>();
  private readonly bodies = new Map<string, Buffer>();
  private readonly initial = new Map<string, Buffer>();
  /** Bounded by bytes as meshmux is; the count-bounded queue is kept for a reference figure. */
  private readonly byBytes = new WriteQueue({ maxBytes: DEFAULT_WRITE_BUDGET.maxBytes });
  private readonly byCount = new WriteQueue({ maxWrites: 16 });
  readonly counters: BaselineCounters = zeroCounters();
  private nonce = 0;

  constructor(model: MeshModel) {
    for (const policy of POLICIES) {
      for (const url of CONFIG_TYPE_URLS) {
        const body = model.expectedBytes(policy, url);
        this.bodies.set(`${policy}|${url}`, body);
        this.initial.set(`${policy}|${url}`, assembleResponse('raw~u9-0', body, url, 'raw-0'));
      }
    }
  }

  async listen(): Promise<number> {
    return bind(this.server);
  }

  /**
   * Writes a new ServiceEntry response (`version_info` naming `u9-<seq>`) to every client of
   * `policy`, within meshmux's byte budget, or (`byCount`) at most 16 writes at a time.
   */
  push(policy: PolicyName | 'all', seq: number, byCount = false): void {
    const built = new Map<PolicyName, Buffer>();
    for (const { policy: p, writer } of this.streams.values()) {
      if (policy !== 'all' && p !== policy) continue;
      let bytes = built.get(p);
      if (bytes === undefined) {
        bytes = assembleResponse(
          `raw~u9-${seq}`,
          this.bodies.get(`${p}|${SE_URL}`) ?? Buffer.alloc(0),
          SE_URL,
          `raw-${++this.nonce}`,
        );
        built.set(p, bytes);
      }
      this.send(writer, bytes, byCount);
    }
  }

  async close(): Promise<void> {
    this.server.forceShutdown();
    await Promise.resolve();
  }

  private send(writer: FrameWriter, bytes: Buffer, byCount = false): void {
    this.counters.pushes++;
    this.counters.bytesSent += bytes.length;
    (byCount ? this.byCount : this.byBytes).write(writer, bytes);
  }

  private onStream(call: Call): void {
    const subscribed = new Set<string>();
    let policy: PolicyName | undefined;
    const writer = frameWriterFor(call);
    this.counters.streams++;
    call.on('data', (bytes: Buffer) => {
      const request = decodeDiscoveryRequest(bytes);
      if (policy === undefined) {
        policy = policyOfNode(request.node?.id ?? '');
        this.streams.set(call, { policy, writer });
      }
      if (subscribed.has(request.typeUrl)) return;
      subscribed.add(request.typeUrl);
      const response = this.initial.get(`${policy}|${request.typeUrl}`);
      if (response !== undefined) this.send(writer, response);
    });
    const drop = (): void => {
      if (this.streams.delete(call)) this.counters.streams--;
      this.byBytes.forget(writer);
      this.byCount.forget(writer);
    };
    call.on('error', drop);
    call.on('cancelled', drop);
    call.on('end', drop);
  }
}

/** How an emulated peer serves. */
export interface EmulatedStrategy {
  readonly name: 'naive' | 'istiod' | 'nacos';
  /** Times each object is encoded per client per push. */
  readonly marshals: number;
  /** Quiet period and upper bound of the debounce; none pushes on every snapshot. */
  readonly debounce?: { readonly quietMs: number; readonly maxMs: number };
  /** Clients pushed at once; unbounded when absent. */
  readonly concurrency?: number;
}

export const STRATEGIES: Readonly<Record<EmulatedStrategy['name'], EmulatedStrategy>> = {
  naive: { name: 'naive', marshals: 1 },
  istiod: { name: 'istiod', marshals: 2, debounce: { quietMs: 100, maxMs: 10_000 }, concurrency: 25 },
  nacos: { name: 'nacos', marshals: 1, debounce: { quietMs: 100, maxMs: 5_000 } },
};

interface EmulatedStream {
  readonly call: Call;
  view: ClientView | undefined;
  readonly subscribed: Set<string>;
  /** Per type URL, the kind generation last pushed (-1: never). */
  readonly pushed: Map<string, number>;
  queued: boolean;
}

/** meshmux's sources and merge behind a peer's serving strategy. */
export class EmulatedServer {
  private readonly server = adsServer((call) => this.onStream(call));
  private readonly streams = new Set<EmulatedStream>();
  private readonly policies: PolicySet;
  private readonly subscription = new Subscription();
  private firstPending: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly pushQueue: EmulatedStream[] = [];
  private pushing = 0;
  private nonce = 0;
  private streamId = 0;
  readonly counters: BaselineCounters = zeroCounters();

  constructor(
    private readonly engine: MergeEngine,
    config: MeshmuxConfig,
    private readonly strategy: EmulatedStrategy,
  ) {
    this.policies = new PolicySet(config.policies);
  }

  async listen(): Promise<number> {
    const port = await bind(this.server);
    this.subscription.add(this.engine.snapshots$.subscribe((s) => this.onSnapshot(s)));
    return port;
  }

  async close(): Promise<void> {
    this.subscription.unsubscribe();
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.server.forceShutdown();
    await Promise.resolve();
  }

  private onSnapshot(snapshot: ConfigSnapshot): void {
    if (!snapshot.ready) return;
    const debounce = this.strategy.debounce;
    if (debounce === undefined) {
      for (const s of this.streams) this.pushChanged(s, snapshot);
      return;
    }
    const now = performance.now();
    this.firstPending ??= now;
    if (this.timer !== undefined) clearTimeout(this.timer);
    const wait = Math.min(debounce.quietMs, this.firstPending + debounce.maxMs - now);
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.firstPending = undefined;
        for (const s of this.streams) this.enqueue(s);
      },
      Math.max(0, wait),
    );
  }

  private enqueue(s: EmulatedStream): void {
    if (s.queued) return;
    s.queued = true;
    this.pushQueue.push(s);
    this.pump();
  }

  private pump(): void {
    const limit = this.strategy.concurrency ?? Number.POSITIVE_INFINITY;
    while (this.pushing < limit && this.pushQueue.length > 0) {
      const s = this.pushQueue.shift() as EmulatedStream;
      s.queued = false;
      this.pushing++;
      this.pushChanged(s, this.engine.current(), () => {
        this.pushing--;
        this.pump();
      });
    }
  }

  /** Pushes every subscribed type whose kind changed since it was last pushed to `s`; `done` when flushed. */
  private pushChanged(s: EmulatedStream, snapshot: ConfigSnapshot, done?: () => void): void {
    let outstanding = 1;
    const finish = (): void => {
      if (--outstanding === 0) done?.();
    };
    if (s.view !== undefined) {
      for (const url of s.subscribed) {
        const kind = KINDS.resolveTypeUrl(url)?.kind;
        const k = kind === undefined ? undefined : snapshot.kinds.get(kind.key);
        const generation = k?.generation ?? 0;
        if (s.pushed.get(url) === generation) continue;
        s.pushed.set(url, generation);
        const bytes = this.build(
          url,
          s.view,
          k?.resources ?? [],
          `${k?.version ?? 'empty'}~${(k?.sourceRevisions ?? []).join(',')}`,
        );
        outstanding++;
        this.counters.pushes++;
        this.counters.bytesSent += bytes.length;
        s.call.write(bytes, finish);
      }
    }
    finish();
  }

  /** One response built the peer's way: every object encoded for this client, `marshals` times. */
  private build(
    url: string,
    view: ClientView,
    resources: readonly ConfigResource[],
    version: string,
  ): Buffer {
    const admitted = view.admitsAll ? resources : resources.filter((r) => view.admits(r));
    let frames: Uint8Array[] = [];
    for (let m = 0; m < this.strategy.marshals; m++) {
      // A cache of one byte keeps nothing: every object is encoded again.
      const encoder = new ResourceEncoder(KINDS, { maxCacheBytes: 1 });
      frames = admitted.map((r) => encoder.framed(r));
      this.counters.encodes += admitted.length;
    }
    this.counters.assemblies++;
    return assembleResponse(version, frames, url, `e-${++this.nonce}`);
  }

  private onStream(call: Call): void {
    const s: EmulatedStream = {
      call,
      view: undefined,
      subscribed: new Set(),
      pushed: new Map(),
      queued: false,
    };
    this.streams.add(s);
    this.counters.streams++;
    call.on('data', (bytes: Buffer) => {
      const request = decodeDiscoveryRequest(bytes);
      if (s.view === undefined) {
        const client = withNode(
          anonymousIdentity(++this.streamId, call.getPeer(), []),
          request.node?.id ?? '',
          request.node?.metadata ?? {},
        );
        const admission = this.policies.admit(client);
        if (!admission.admitted) {
          call.emit('error', { code: grpc.status.PERMISSION_DENIED, details: admission.reason });
          return;
        }
        s.view = admission.view;
      }
      if (s.subscribed.has(request.typeUrl) || !CONFIG_TYPE_URLS.includes(request.typeUrl)) return;
      s.subscribed.add(request.typeUrl);
      const snapshot = this.engine.current();
      if (snapshot.ready) this.pushChanged(s, snapshot);
    });
    const drop = (): void => {
      if (this.streams.delete(s)) this.counters.streams--;
    };
    call.on('error', drop);
    call.on('cancelled', drop);
    call.on('end', drop);
  }
}
