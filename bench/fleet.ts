/**
 * A fleet of istiod-like config-source clients, cheap enough to run 200 on one core: each opens its
 * own HTTP/2 connection (1 MiB stream and connection windows, as istiod dials) and one ADS stream,
 * asks for MeshConfig and the 15 config kinds as istiod does (node on the first request, a
 * timestamp nonce on each), reads only the top-level fields of each response and ACKs at once.
 *
 * The client speaks gRPC framing itself over `node:http2` instead of using grpc-js: a 40 MB
 * response then costs no reassembly copy. Each response is checked exactly: its chunks are
 * compared as they arrive with a recent response of the same length (clients of one view receive
 * identical bytes), and only new content is scanned, in the chunks it arrived in (never
 * assembled into one buffer), and hashed (SHA-256 of the resource entries).
 *
 * Change latency is read from `version_info`: meshmux names the upstream states a response was
 * built from (`<content>~u0-12,u1-7,...`); the {@link LatencyTracker} turns the first response that
 * names a change's upstream state into that change's arrival at that client.
 */
import http2 from 'node:http2';
import {
  CONFIG_TYPE_URLS,
  entriesDigest,
  nodeIdOfClient,
  policyOfClient,
  type PolicyName,
} from './fixtures.js';
import { ChunkedBytes, samePieces } from './chunked-bytes.js';
import { encodeNode, encodeRequest, scanResponse } from './wire-scan.js';

const ADS_PATH = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';
const MESH_CONFIG_URL = 'core/v1alpha1/MeshConfig';
/** istiod's windows (`InitialWindowSize`, `InitialConnWindowSize`). */
const WINDOW = 1024 * 1024;

/** What a client holds of one type URL. */
export interface HeldType {
  /** The response it came in (shared by every client that received the same bytes). */
  readonly response: object;
  readonly version: string;
  /** Size of the response, bytes. */
  readonly bytes: number;
  /** The digest of the resource entries as a set (`entriesDigest`), computed when first asked for (verification only). */
  readonly digest: () => string;
  readonly resources: number;
  readonly receivedAt: number;
}

/** What the fleet knows of one response's content. */
interface KnownResponse {
  /** The response as the chunks its first receiver got it in. */
  readonly bytes: ChunkedBytes;
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
  readonly resources: number;
  /** The resource entries (views of `bytes`), hashed only when a verification asks. */
  readonly resourcePieces: readonly Buffer[];
  readonly resourceLength: number;
  digestMemo?: string;
  /** Responses whose resource entries were compared with these: equal or not. */
  sameResourcesAs?: WeakMap<KnownResponse, boolean>;
}

/** Whether two responses carry the same resource entries, compared once per pair. */
function sameResources(a: KnownResponse, b: KnownResponse): boolean {
  if (a === b) return true;
  if (a.resourceLength !== b.resourceLength) return false;
  a.sameResourcesAs ??= new WeakMap();
  let same = a.sameResourcesAs.get(b);
  if (same === undefined) {
    same = samePieces(a.resourcePieces, b.resourcePieces);
    a.sameResourcesAs.set(b, same);
  }
  return same;
}

/** Recently seen responses, so identical ones are recognised by comparison instead of hashing. */
class ResponseCache {
  private readonly entries: KnownResponse[] = [];

  /** Candidates for a message of `length` bytes, most recent first. */
  candidates(length: number): KnownResponse[] {
    return this.entries.filter((e) => e.bytes.length === length);
  }

  /**
   * Scans a response not seen before and remembers it (hashing waits for a verification). Clients
   * of one view receive a response at the same time, before any of them has finished it: the
   * first to finish is remembered, and the others find its copy here, so the cache holds one copy
   * of a response however many clients received it.
   */
  learn(message: ChunkedBytes): KnownResponse {
    for (const e of this.entries) {
      if (e.bytes.length === message.length && e.bytes.equals(message)) {
        this.touch(e);
        return e;
      }
    }
    const scan = scanResponse(message);
    const known: KnownResponse = {
      bytes: message,
      versionInfo: scan.versionInfo,
      typeUrl: scan.typeUrl,
      nonce: scan.nonce,
      resources: scan.resources,
      resourcePieces: scan.resourcePieces,
      resourceLength: scan.resourceLength,
    };
    this.entries.unshift(known);
    let total = 0;
    const keep = this.entries.findIndex((e) => (total += e.bytes.length) > 512 * 1024 * 1024);
    if (keep > 0) this.entries.length = keep;
    if (this.entries.length > 32) this.entries.length = 32;
    return known;
  }

  touch(known: KnownResponse): void {
    const at = this.entries.indexOf(known);
    if (at > 0) this.entries.unshift(...this.entries.splice(at, 1));
  }
}

type Listener = (client: FleetClient, typeUrl: string, version: string, at: number) => void;

/** Frames one gRPC message: compressed flag, length, bytes. */
function grpcFrame(message: Buffer): Buffer {
  const header = Buffer.allocUnsafe(5);
  header.writeUInt8(0, 0);
  header.writeUInt32BE(message.length, 1);
  return Buffer.concat([header, message]);
}

/** One istiod-like client. */
export class FleetClient {
  readonly held = new Map<string, HeldType>();
  readonly nodeId: string;
  bytesReceived = 0;
  responses = 0;
  /** Responses that carried exactly the resource entries this client already held for the type. */
  wastedPushes = 0;
  ended: string | undefined;
  private session: http2.ClientHttp2Session | undefined;
  private stream: http2.ClientHttp2Stream | undefined;
  private readonly node: Uint8Array;
  /** The message being received: its length, the chunks so far, and the candidates still equal to it. */
  private header = Buffer.alloc(0);
  private length = -1;
  private received = 0;
  private chunks: Buffer[] = [];
  private candidates: KnownResponse[] = [];

  constructor(
    readonly index: number,
    readonly policy: PolicyName,
    private readonly address: string,
    private readonly fleet: Fleet,
  ) {
    this.nodeId = nodeIdOfClient(index, policy);
    this.node = encodeNode(this.nodeId, { GENERATOR: 'api', ISTIO_VERSION: '65536.65536.65536' });
  }

  /** Connects and sends istiod's initial requests. */
  start(): void {
    const session = http2.connect(`http://${this.address}`, { settings: { initialWindowSize: WINDOW } });
    session.on('connect', () => session.setLocalWindowSize(WINDOW));
    session.on('error', (err: Error) => {
      this.ended ??= err.message;
    });
    const stream = session.request({
      ':method': 'POST',
      ':path': ADS_PATH,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    this.session = session;
    this.stream = stream;
    stream.on('data', (chunk: Buffer) => this.onChunk(chunk));
    stream.on('error', (err: Error) => {
      this.ended ??= err.message;
    });
    stream.on('trailers', (trailers: http2.IncomingHttpHeaders) => {
      this.ended ??= `status ${String(trailers['grpc-status'])}: ${String(trailers['grpc-message'] ?? '')}`;
    });
    stream.on('close', () => {
      this.ended ??= 'closed';
    });
    // istiod's quirk: every initial request carries a timestamp as its nonce.
    const nonce = new Date().toISOString();
    [MESH_CONFIG_URL, ...CONFIG_TYPE_URLS].forEach((typeUrl, i) => {
      stream.write(
        grpcFrame(encodeRequest({ typeUrl, responseNonce: nonce, ...(i === 0 ? { node: this.node } : {}) })),
      );
    });
  }

  /** Every config kind answered at least once. */
  get synced(): boolean {
    return this.held.size >= CONFIG_TYPE_URLS.length;
  }

  close(): void {
    this.ended ??= 'closed by the fleet';
    this.stream?.close(http2.constants.NGHTTP2_CANCEL);
    this.session?.destroy();
  }

  private onChunk(data: Buffer): void {
    let chunk = data;
    while (chunk.length > 0) {
      if (this.length < 0) {
        const need = 5 - this.header.length;
        this.header = Buffer.concat([this.header, chunk.subarray(0, need)]);
        chunk = chunk.subarray(need);
        if (this.header.length < 5) return;
        this.length = this.header.readUInt32BE(1);
        this.header = Buffer.alloc(0);
        this.received = 0;
        this.chunks = [];
        this.candidates = this.fleet.responsesSeen.candidates(this.length);
      }
      const take = Math.min(chunk.length, this.length - this.received);
      const piece = chunk.subarray(0, take);
      chunk = chunk.subarray(take);
      if (this.candidates.length > 0) {
        const at = this.received;
        this.candidates = this.candidates.filter((c) => c.bytes.holds(at, piece));
      }
      this.chunks.push(piece);
      this.received += take;
      if (this.received === this.length) this.onMessage();
    }
  }

  private onMessage(): void {
    const at = performance.now();
    const same = this.candidates[0];
    let known: KnownResponse;
    if (same !== undefined) {
      known = same;
      this.fleet.responsesSeen.touch(same);
    } else {
      known = this.fleet.responsesSeen.learn(new ChunkedBytes(this.chunks));
    }
    this.chunks = [];
    this.candidates = [];
    this.bytesReceived += this.length;
    this.length = -1;
    this.responses++;
    const previous = this.held.get(known.typeUrl)?.response as KnownResponse | undefined;
    if (previous !== undefined && sameResources(previous, known)) this.wastedPushes++;
    this.held.set(known.typeUrl, {
      response: known,
      version: known.versionInfo,
      bytes: known.bytes.length,
      digest: () => (known.digestMemo ??= entriesDigest(known.resourcePieces)),
      resources: known.resources,
      receivedAt: at,
    });
    // MeshConfig with content is never ACKed by istiod; everything else is, at once.
    if (!(known.typeUrl === MESH_CONFIG_URL && known.resources > 0)) {
      this.stream?.write(
        grpcFrame(
          encodeRequest({
            typeUrl: known.typeUrl,
            responseNonce: known.nonce,
            versionInfo: known.versionInfo,
            node: this.node,
          }),
        ),
      );
    }
    this.fleet.notify(this, known.typeUrl, known.versionInfo, at);
  }
}

/** A group of clients against one server. */
export class Fleet {
  readonly members: FleetClient[] = [];
  readonly responsesSeen = new ResponseCache();
  private readonly listeners = new Set<Listener>();
  private waiters: Array<() => void> = [];

  /**
   * `count` clients numbered from `first`, their policies by number (even split over the three),
   * unless `policy` puts them all in one.
   */
  constructor(address: string, count: number, options: { first?: number; policy?: PolicyName } = {}) {
    const first = options.first ?? 0;
    for (let i = first; i < first + count; i++) {
      this.members.push(new FleetClient(i, options.policy ?? policyOfClient(i), address, this));
    }
  }

  start(): this {
    for (const m of this.members) m.start();
    return this;
  }

  /** Calls `listener` for every response until the returned function is called. */
  listen(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  notify(client: FleetClient, typeUrl: string, version: string, at: number): void {
    for (const l of this.listeners) l(client, typeUrl, version, at);
    if (this.waiters.length > 0) {
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w();
    }
  }

  /** Resolves once `check()` holds (checked after every response), or rejects after `timeoutMs`. */
  async until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!check()) {
      const ended = this.members.find((m) => m.ended !== undefined);
      if (ended !== undefined) throw new Error(`client ${ended.index} lost its stream: ${ended.ended}`);
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Resolves to the time (ms since `since`) when the last client synced. */
  async synced(since: number, timeoutMs: number): Promise<number> {
    await this.until(() => this.members.every((m) => m.synced), timeoutMs, 'the fleet to sync');
    let last = since;
    for (const m of this.members) for (const t of m.held.values()) last = Math.max(last, t.receivedAt);
    return last - since;
  }

  get bytesReceived(): number {
    return this.members.reduce((sum, m) => sum + m.bytesReceived, 0);
  }

  get responses(): number {
    return this.members.reduce((sum, m) => sum + m.responses, 0);
  }

  /** Clients whose digests differ from the expected ones, with the first differing type. */
  mismatches(expected: ReadonlyMap<PolicyName, ReadonlyMap<string, string>>): string[] {
    const out: string[] = [];
    for (const m of this.members) {
      for (const [url, digest] of expected.get(m.policy) ?? new Map<string, string>()) {
        const held = m.held.get(url);
        if (held?.digest() !== digest) {
          out.push(
            `client ${m.index} (${m.policy}) ${url}: ${held === undefined ? 'nothing' : `${held.resources} objects, other bytes`}`,
          );
          break;
        }
      }
    }
    return out;
  }

  close(): void {
    for (const m of this.members) m.close();
  }
}

/** A change the fleet must see: which upstream state carries it and which views it alters. */
export interface TrackedChange {
  readonly typeUrl: string;
  readonly upstream: number;
  readonly seq: number;
  readonly policies: ReadonlySet<PolicyName>;
  /** When the upstream wrote the state carrying it; set by `sent()`. */
  sentAt: number | undefined;
  /** Clients still to see it. */
  pending: number;
  /** When the last affected client saw it. */
  doneAt: number | undefined;
  /** When the last client of each policy saw it. */
  readonly policyDoneAt: Map<PolicyName, number>;
  readonly policyPending: Map<PolicyName, number>;
}

const REVISION = /^u(\d+)-(\d+)$/;

/**
 * Follows changes from the upstream write to every affected client. A client has seen a change
 * once a response of the change's type names the change's upstream at the change's sequence or
 * later (sequences only grow, and meshmux moves a view's revisions only with its content).
 */
export class LatencyTracker {
  private readonly byChannel = new Map<string, TrackedChange[]>();
  private readonly cursors = new Map<FleetClient, Map<string, number>>();
  private readonly counts = new Map<PolicyName, number>();
  private readonly stop: () => void;
  readonly changes: TrackedChange[] = [];

  constructor(private readonly fleet: Fleet) {
    for (const m of fleet.members) this.counts.set(m.policy, (this.counts.get(m.policy) ?? 0) + 1);
    this.stop = fleet.listen((client, typeUrl, version, at) => this.onResponse(client, typeUrl, version, at));
  }

  /** Registers a change before its upstream state is written. Changes no client sees are ignored. */
  expect(
    typeUrl: string,
    upstream: number,
    seq: number,
    policies: ReadonlySet<PolicyName>,
  ): TrackedChange | undefined {
    const present = [...policies].filter((p) => (this.counts.get(p) ?? 0) > 0);
    if (present.length === 0) return undefined;
    const change: TrackedChange = {
      typeUrl,
      upstream,
      seq,
      policies: new Set(present),
      sentAt: undefined,
      pending: present.reduce((n, p) => n + (this.counts.get(p) ?? 0), 0),
      doneAt: undefined,
      policyDoneAt: new Map(),
      policyPending: new Map(present.map((p) => [p, this.counts.get(p) ?? 0])),
    };
    const channel = `${typeUrl}|${upstream}`;
    let list = this.byChannel.get(channel);
    if (list === undefined) this.byChannel.set(channel, (list = []));
    list.push(change);
    this.changes.push(change);
    return change;
  }

  /** The upstream wrote state `seq`: every change it carries starts its clock now. */
  sent(upstream: number, seq: number, at: number): void {
    for (const c of this.changes)
      if (c.upstream === upstream && c.seq === seq && c.sentAt === undefined) c.sentAt = at;
  }

  /** Changes not yet seen by every affected client. */
  get unresolved(): number {
    return this.changes.filter((c) => c.doneAt === undefined).length;
  }

  /** Resolves when every change registered so far is resolved, or after `timeoutMs` (no error). */
  async settle(timeoutMs: number): Promise<boolean> {
    try {
      await this.fleet.until(() => this.unresolved === 0, timeoutMs, 'changes to arrive');
      return true;
    } catch {
      return false;
    }
  }

  /** Latency of each resolved change to every affected client, in ms. */
  latencies(): number[] {
    return this.changes
      .filter((c) => c.doneAt !== undefined && c.sentAt !== undefined)
      .map((c) => (c.doneAt as number) - (c.sentAt as number));
  }

  close(): void {
    this.stop();
  }

  private onResponse(client: FleetClient, typeUrl: string, version: string, at: number): void {
    const tilde = version.indexOf('~');
    if (tilde < 0) return;
    let cursors = this.cursors.get(client);
    if (cursors === undefined) this.cursors.set(client, (cursors = new Map<string, number>()));
    for (const token of version.slice(tilde + 1).split(',')) {
      const m = REVISION.exec(token);
      if (m === null) continue;
      const channel = `${typeUrl}|${m[1]}`;
      const list = this.byChannel.get(channel);
      if (list === undefined) continue;
      const seen = Number(m[2]);
      let i = cursors.get(channel) ?? 0;
      while (i < list.length && (list[i] as TrackedChange).seq <= seen) {
        const c = list[i] as TrackedChange;
        if (c.policies.has(client.policy)) {
          c.pending--;
          const left = (c.policyPending.get(client.policy) ?? 1) - 1;
          c.policyPending.set(client.policy, left);
          if (left === 0) c.policyDoneAt.set(client.policy, at);
          if (c.pending === 0) c.doneAt = at;
        }
        i++;
      }
      cursors.set(channel, i);
    }
  }
}

/** The p-th percentile (0–100) of values; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const at = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[at] as number;
}

/**
 * The cheapest receiver a sync can have: clients that ask for the config kinds as istiod does and only count
 * gRPC messages and bytes, reading a 5-byte frame header per message and nothing else (no ACK,
 * nothing compared, assembled or hashed). A sync to this fleet shows the server's own floor, apart
 * from what the checking fleet costs on its core.
 */
export async function discardingSync(
  address: string,
  count: number,
  timeoutMs: number,
): Promise<{ readonly ms: number; readonly bytes: number }> {
  // Only the config kinds are asked for (not MeshConfig, which not every server answers): one
  // response each completes the sync.
  const expected = CONFIG_TYPE_URLS.length;
  const sessions: http2.ClientHttp2Session[] = [];
  let bytes = 0;
  const started = performance.now();
  try {
    const done = Array.from({ length: count }, (_, i) => {
      const session = http2.connect(`http://${address}`, { settings: { initialWindowSize: WINDOW } });
      sessions.push(session);
      session.on('connect', () => session.setLocalWindowSize(WINDOW));
      const stream = session.request({
        ':method': 'POST',
        ':path': ADS_PATH,
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      const node = encodeNode(nodeIdOfClient(i), { GENERATOR: 'api', ISTIO_VERSION: '65536.65536.65536' });
      const nonce = new Date().toISOString();
      CONFIG_TYPE_URLS.forEach((typeUrl, n) => {
        stream.write(
          grpcFrame(encodeRequest({ typeUrl, responseNonce: nonce, ...(n === 0 ? { node } : {}) })),
        );
      });
      return new Promise<void>((resolve, reject) => {
        let messages = 0;
        let header = Buffer.alloc(0);
        let left = -1;
        stream.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          let at = 0;
          while (at < chunk.length) {
            if (left < 0) {
              const take = Math.min(5 - header.length, chunk.length - at);
              header = Buffer.concat([header, chunk.subarray(at, at + take)]);
              at += take;
              if (header.length < 5) return;
              left = header.readUInt32BE(1);
              header = Buffer.alloc(0);
              if (left === 0) {
                left = -1;
                if (++messages === expected) resolve();
                continue;
              }
            }
            const skip = Math.min(left, chunk.length - at);
            at += skip;
            left -= skip;
            if (left === 0) {
              left = -1;
              if (++messages === expected) resolve();
            }
          }
        });
        stream.on('error', reject);
        stream.on('close', () => reject(new Error(`client ${i}: stream closed after ${messages} responses`)));
      });
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`discarding sync: not done in ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([Promise.all(done), timeout]);
    } finally {
      clearTimeout(timer);
    }
    return { ms: performance.now() - started, bytes };
  } finally {
    for (const s of sessions) s.destroy();
  }
}
