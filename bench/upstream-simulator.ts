/**
 * An MCP-over-xDS upstream: state of the world per type URL, every object under the v1 spelling,
 * empty lists for any other type, its own 100 ms batching of changes. Like go-control-plane's SotW
 * server it answers a request once and sends the next state of a type only after the ACK of the
 * last one (latest state wins), so a slow client is never buried under a backlog: its slowness
 * shows as latency. Objects are encoded once per version and a kind's response once per state,
 * from blocks of entries each kept while its objects stay the same (a state with a few changes
 * joins a few hundred blocks rather than an entry per object), so the simulator stays cheap next to
 * the server it feeds. A state is still written as one buffer, as a real upstream's would arrive.
 *
 * `version_info` is `u<index>-<seq>`, one sequence per upstream; the fleet reads it back from
 * meshmux's `version_info` suffix to know which upstream states it has.
 */
import * as grpc from '@grpc/grpc-js';
import { SE, SE_URL, VS, VS_URL, type FixtureObject, type MeshModel } from './fixtures.js';
import type { KindDescriptor } from '../src/schema/kinds.js';
import { assembleResponse, RAW_SOTW_ADS } from './wire-scan.js';
import { frameWriterFor, type FrameWriter } from '../src/downstream/frame-writer.js';

/** The batching window of the simulated upstream. */
export const UPSTREAM_BATCH_MS = 100;

/** A state the upstream sent: its sequence and when it was written. */
export interface UpstreamFlush {
  readonly upstream: number;
  readonly seq: number;
  readonly sentAt: number;
}

/** What the benchmark drives an upstream simulator by, in this process or in one of its own. */
export interface SimulatedUpstream {
  readonly index: number;
  /** Called after each state written to the streams, `sentAt` on this process's `performance.now()`. */
  onFlush: (flush: UpstreamFlush) => void;
  /** Bytes of responses written to the streams so far. */
  readonly bytesSent: number;
  /** Streams currently open (meshmux's source). */
  readonly streams: number;
  /** Subscriptions answered and acknowledged on the open streams. */
  readonly answeredTypes: number;
  /** The sequence the next flush will carry. */
  readonly nextSeq: number;
  /** A kind changed in the model: it goes out with the next batch (at most 100 ms from now). */
  changed(kind: KindDescriptor): void;
  /** Sends the changed kinds now, without waiting for the batch window. */
  flush(): void;
  /** Ends every stream as a restart would; the state fetched again carries the next sequence. */
  dropStreams(): void;
}

interface Subscriber {
  readonly call: grpc.ServerDuplexStream<Buffer, Buffer>;
  /**
   * Writes a response as it is kept, behind its 5-byte gRPC prefix: grpc-js's own `write` copies
   * each message into a new buffer per stream (16 MB of fresh memory per upstream on a start at
   * 100k objects), work a real upstream does on machines of its own, which here delayed the
   * server's first bytes on the core the upstreams share with the fleet.
   */
  readonly write: FrameWriter;
  /** Per subscribed type URL: the nonce awaiting its ACK (none: free to send), and whether newer state waits. */
  readonly types: Map<string, { awaiting: string | undefined; stale: boolean }>;
}

const KIND_OF_URL: ReadonlyMap<string, KindDescriptor> = new Map([
  [SE_URL, SE],
  [VS_URL, VS],
]);

/** Reads the type URL (field 4) and response nonce (field 5) of a DiscoveryRequest. */
function requestFields(bytes: Buffer): { typeUrl: string; nonce: string } {
  let typeUrl = '';
  let nonce = '';
  let pos = 0;
  while (pos < bytes.length) {
    let tag = 0;
    let shift = 0;
    for (;;) {
      const b = bytes[pos++] ?? 0;
      tag |= (b & 0x7f) << shift;
      if (b < 0x80) break;
      shift += 7;
    }
    const wire = tag & 7;
    if (wire === 0) {
      while ((bytes[pos++] ?? 0) >= 0x80);
      continue;
    }
    let length = 0;
    shift = 0;
    for (;;) {
      const b = bytes[pos++] ?? 0;
      length += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
      shift += 7;
    }
    if (tag >>> 3 === 4) typeUrl = bytes.subarray(pos, pos + length).toString('utf8');
    if (tag >>> 3 === 5) nonce = bytes.subarray(pos, pos + length).toString('utf8');
    pos += length;
  }
  return { typeUrl, nonce };
}

/**
 * An upstream's batching and sequence: changed kinds wait up to {@link UPSTREAM_BATCH_MS} and go
 * out together under the next sequence; a restart drops what waits and takes a sequence of its own.
 */
export class ChangeBatch {
  /** The sequence of the last state decided. */
  seq = 1;
  private timer: NodeJS.Timeout | undefined;
  private readonly dirty = new Set<KindDescriptor>();

  constructor(private readonly send: (kinds: readonly KindDescriptor[], seq: number) => void) {}

  changed(kind: KindDescriptor): void {
    this.dirty.add(kind);
    this.timer ??= setTimeout(() => this.flush(), UPSTREAM_BATCH_MS);
  }

  /** Sends what waits now, if anything does. */
  flush(): void {
    this.cancel();
    if (this.dirty.size === 0) return;
    const kinds = [...this.dirty];
    this.dirty.clear();
    this.send(kinds, ++this.seq);
  }

  /** Drops what waits, as a restart does, and moves to `seq`. */
  restart(seq = this.seq + 1): void {
    this.cancel();
    this.dirty.clear();
    this.seq = seq;
  }

  cancel(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** What both hosts of a simulator share: its batching, driven through {@link SimulatedUpstream}. */
export abstract class BatchedUpstream {
  protected abstract readonly batch: ChangeBatch;

  /** The sequence the next flush will carry. */
  get nextSeq(): number {
    return this.batch.seq + 1;
  }

  /** A kind changed in the model: it goes out with the next batch (at most 100 ms from now). */
  changed(kind: KindDescriptor): void {
    this.batch.changed(kind);
  }

  /** Sends the changed kinds now, without waiting for the batch window. */
  flush(): void {
    this.batch.flush();
  }
}

export class UpstreamSimulator extends BatchedUpstream implements SimulatedUpstream {
  private readonly server = new grpc.Server({ 'grpc.max_send_message_length': -1 });
  private readonly subscribers = new Set<Subscriber>();
  protected readonly batch = new ChangeBatch((kinds, seq) => this.sendState(kinds, seq));
  private nonce = 0;
  /**
   * Per kind, the objects as of the last flush (what the current sequence means) and the response
   * that carries them under the current sequence, built on first use and written as it is to every
   * stream. Changes made to the model since are not served until the next flush.
   */
  private readonly published = new Map<KindDescriptor, Published>();
  /** Blocks of entries by their first object (see {@link entryBlocks}). */
  private readonly blocks = new WeakMap<FixtureObject, StateBlock>();
  /** Called after each state written to the streams. */
  onFlush: (flush: UpstreamFlush) => void = () => undefined;
  /** Called whenever `streams`, `answeredTypes` or `bytesSent` may have changed. */
  onStatus: () => void = () => undefined;
  /** Bytes of responses written to the streams so far: what meshmux, as this upstream's client, receives. */
  bytesSent = 0;

  constructor(
    readonly index: number,
    private readonly model: MeshModel,
  ) {
    super();
    this.server.addService(RAW_SOTW_ADS, {
      StreamAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => this.onStream(call),
    });
  }

  async listen(): Promise<string> {
    this.publish([SE, VS]);
    const port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    return `127.0.0.1:${port}`;
  }

  /**
   * Publishes `kinds` as they stand in the model under sequence `seq` and writes them to every
   * stream free to take them: what a flush does once it has its kinds and its sequence, for a
   * host whose batching runs elsewhere. `onFlush` reports the moment the writes began (the
   * responses built), or the state was published when no stream is free to take it yet: a client,
   * in this process or another, can only read it after that.
   */
  sendState(kinds: readonly KindDescriptor[], seq: number): void {
    this.batch.seq = seq;
    this.publish(kinds);
    const free: (readonly [Subscriber, string])[] = [];
    for (const s of this.subscribers) {
      for (const kind of kinds) {
        const url = kind === SE ? SE_URL : VS_URL;
        const t = s.types.get(url);
        if (t === undefined) continue;
        if (t.awaiting === undefined) free.push([s, url]);
        else t.stale = true;
      }
    }
    // Built only for a stream free to take it now: a state superseded before any ACK is never built.
    for (const [, url] of free) this.response(url);
    const sentAt = performance.now();
    for (const [s, url] of free) this.send(s, url);
    this.onFlush({ upstream: this.index, seq: this.batch.seq, sentAt });
    this.onStatus();
  }

  /**
   * Ends every stream as a restart would. The state fetched again carries the next sequence, or
   * `seq` (a restarted upstream has a new version even for the same content), and whatever the
   * model holds now, including changes never flushed; `onFlush` reports it when its first
   * ServiceEntry response goes out.
   */
  dropStreams(seq?: number): void {
    this.batch.restart(seq);
    this.resyncPending = true;
    this.publish([SE, VS]);
    for (const s of this.subscribers)
      s.call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'restart' });
    this.subscribers.clear();
    this.onStatus();
  }
  private resyncPending = false;

  /** Streams currently open (meshmux's source). */
  get streams(): number {
    return this.subscribers.size;
  }

  /** Subscriptions answered and acknowledged on the open streams (two per stream once a source has synced). */
  get answeredTypes(): number {
    let n = 0;
    for (const s of this.subscribers) for (const t of s.types.values()) if (t.awaiting === undefined) n++;
    return n;
  }

  async close(): Promise<void> {
    this.batch.cancel();
    this.server.forceShutdown();
    await Promise.resolve();
  }

  private onStream(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    const s: Subscriber = { call, write: frameWriterFor(call), types: new Map() };
    this.subscribers.add(s);
    call.on('data', (bytes: Buffer) => {
      const { typeUrl: url, nonce } = requestFields(bytes);
      const t = s.types.get(url);
      if (t !== undefined) {
        // An ACK (or NACK) of the response in flight frees the type; newer state goes now.
        if (nonce !== t.awaiting) return;
        t.awaiting = undefined;
        if (t.stale) this.send(s, url);
        this.onStatus();
        return;
      }
      s.types.set(url, { awaiting: undefined, stale: false });
      const restarted = url === SE_URL && this.resyncPending;
      if (restarted) this.response(url);
      const sentAt = performance.now();
      this.send(s, url);
      if (restarted) {
        this.resyncPending = false;
        this.onFlush({ upstream: this.index, seq: this.batch.seq, sentAt });
      }
      this.onStatus();
    });
    const drop = (): void => {
      if (this.subscribers.delete(s)) this.onStatus();
    };
    call.on('error', drop);
    call.on('cancelled', drop);
    call.on('end', () => {
      drop();
      call.end();
    });
  }

  private publish(kinds: readonly KindDescriptor[]): void {
    for (const kind of kinds)
      this.published.set(kind, { objects: [...this.model.objects(this.index, kind)], response: undefined });
  }

  private send(s: Subscriber, url: string): void {
    const t = s.types.get(url);
    if (t === undefined) return;
    const { bytes, nonce } = this.response(url);
    t.awaiting = nonce;
    t.stale = false;
    this.bytesSent += bytes.length;
    s.write([bytes], bytes.length, () => undefined);
  }

  /**
   * The response for `url` now. A kind's response is built once per sequence, under a nonce of its
   * own (`<version>-<kind>`): a state is sent once per stream, so the nonce still names one
   * response on each stream, and building it once spares a copy of the whole state per stream (a
   * copy of 12 MB per upstream on L, where the benchmark's upstreams share a core with its fleet).
   */
  private response(url: string): { readonly bytes: Buffer; readonly nonce: string } {
    const kind = KIND_OF_URL.get(url);
    const version = `u${this.index}-${this.batch.seq}`;
    if (kind === undefined) {
      const nonce = `n${++this.nonce}`;
      return { bytes: assembleResponse(version, [], url, nonce), nonce };
    }
    const published = this.published.get(kind) ?? { objects: [], response: undefined };
    if (published.response?.seq !== this.batch.seq) {
      const nonce = `${version}-${kind.kind}`;
      const body = this.entryBlocks(published.objects);
      published.response = { seq: this.batch.seq, nonce, bytes: assembleResponse(version, body, url, nonce) };
    }
    return published.response;
  }

  /**
   * The `resources` entries of `objects`, in order, as a few hundred buffers: a block ends after
   * an object whose name hashes to 0 modulo {@link BLOCK_OBJECTS} (so an added or removed object
   * changes one block, not every one after it), and a block whose objects are those of the last
   * state is the same buffer again.
   */
  private entryBlocks(objects: readonly FixtureObject[]): Buffer[] {
    const out: Buffer[] = [];
    let start = 0;
    for (let i = 0; i < objects.length; i++) {
      if (i + 1 < objects.length && !endsBlock(objects[i] as FixtureObject)) continue;
      const first = objects[start] as FixtureObject;
      const kept = this.blocks.get(first);
      if (
        kept !== undefined &&
        kept.members.length === i + 1 - start &&
        kept.members.every((m, k) => m === objects[start + k])
      ) {
        out.push(kept.bytes);
      } else {
        const members = objects.slice(start, i + 1);
        const bytes = Buffer.concat(members.map((o) => this.model.encodings.upstreamFrame(o)));
        this.blocks.set(first, { members, bytes });
        out.push(bytes);
      }
      start = i + 1;
    }
    return out;
  }
}

/** Objects per block of entries, on average. */
const BLOCK_OBJECTS = 64;

/** Whether a block of entries ends after `o`: an FNV-1a of its `namespace/name`, modulo {@link BLOCK_OBJECTS}. */
function endsBlock(o: FixtureObject): boolean {
  let h = 0x811c9dc5;
  // Hashed part by part: no string is built per object and state.
  for (let i = 0; i < o.namespace.length; i++) h = Math.imul(h ^ o.namespace.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ 0x2f, 0x01000193);
  for (let i = 0; i < o.name.length; i++) h = Math.imul(h ^ o.name.charCodeAt(i), 0x01000193);
  return (h >>> 0) % BLOCK_OBJECTS === 0;
}

/** A run of a kind's objects and their entries, concatenated. */
interface StateBlock {
  readonly members: readonly FixtureObject[];
  readonly bytes: Buffer;
}

/** A kind's objects as of the last flush, and its response under the latest sequence once built. */
interface Published {
  readonly objects: readonly FixtureObject[];
  response: { readonly seq: number; readonly nonce: string; readonly bytes: Buffer } | undefined;
}
