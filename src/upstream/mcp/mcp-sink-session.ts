import { MeshmuxError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { ConfigResource } from '../../core/resource.js';
import { truncateForLog } from '../../core/truncate-for-log.js';
import { ChannelUpdateBuilder, outOfStep } from '../streaming/channel-update-builder.js';
import { atEntry, type McpResourceReader, type ReadResult } from '../mcp-resource-reader.js';
import type { KindDescriptor } from '../../schema/kinds.js';
import { channelPatchOf, statedPatch } from '../streaming/channel-patch.js';
import type { ChannelPatch, SubscriptionState } from '../streaming/subscription-state.js';
import { readTopLevelFields, salvageString } from '../../wire/wire-fields.js';
import { readResourcesMessage, type ResourcesMessage } from './resources-message.js';
import {
  encodeRequestResources,
  type NodeFields,
  type RequestResourcesFields,
} from '../../wire/discovery-requests.js';

/** `google.rpc.Code.INVALID_ARGUMENT`: objects that failed to decode or validate. */
const INVALID_ARGUMENT = 3;
/** `google.rpc.Code.UNIMPLEMENTED`: a collection not asked for, as Galley-era sinks answer it. */
const UNIMPLEMENTED = 12;

/** A full state as last read for one collection. */
interface PreviousState {
  /** What each entry was read as, by position. */
  readonly results: readonly ReadResult[];
  /** Applied as it was: not refused, nothing dropped, no name twice (the state holds exactly `results`). */
  readonly whole: boolean;
}

const NO_RESULTS: readonly ReadResult[] = [];

/** `istio.mcp.v1alpha1.SinkNode`: who meshmux says it is to a Galley. */
export interface SinkNode {
  /** Default empty, as pilot sent it. */
  readonly id?: string | undefined;
  readonly annotations?: Readonly<Record<string, string>> | undefined;
}

export interface McpSinkSessionContext {
  readonly state: SubscriptionState;
  readonly reader: McpResourceReader;
  readonly sinkNode: SinkNode;
  /** Ask for incremental `Resources`. Default false (full state), as pilot did. */
  readonly incremental: boolean;
  /** Namespace of names that carry none (removals are matched by full name). */
  readonly defaultNamespace: string;
  readonly log: Logger;
  /** `mcp://host:port`, for messages. */
  readonly describe: string;
  /** The source answered a subscribed collection. */
  readonly onAnswer: () => void;
}

/**
 * The sink side of Galley-era MCP (spec §4.5), the same whichever end dialed: on a new stream,
 * one `RequestResources` per configured collection, and only those (a Galley closes the whole
 * stream on a collection it does not serve); then every `Resources` is applied (full state, or
 * incremental: upserts and removals by name) and ACKed or NACKed by nonce. No
 * `initial_resource_versions` are sent, so the first answer for a collection on a stream is its
 * complete state even when marked incremental (a Galley ignores them anyway).
 */
export class McpSinkSession {
  private readonly node: NodeFields;
  /**
   * Per collection, its last full state as read, while no incremental answer followed it: the
   * next full state is read in step with it (an upstream lists its objects in a stable order).
   */
  private readonly previous = new Map<string, PreviousState>();
  /** Whether this stream has had a collection refused: only the first is logged at warn. */
  private refusedOnStream = false;

  constructor(private readonly ctx: McpSinkSessionContext) {
    this.node = { id: ctx.sinkNode.id ?? '', metadata: { ...ctx.sinkNode.annotations } };
  }

  /** A stream opened: asks for every collection. */
  open(send: (message: Uint8Array) => void): void {
    this.ctx.state.streamOpened();
    this.refusedOnStream = false;
    for (const collection of this.ctx.state.channelIds()) {
      send(this.encode({ sinkNode: this.node, collection, incremental: this.ctx.incremental }));
    }
  }

  /**
   * One `Resources` message: applies it and sends the ACK or NACK. `restart` ends the stream, for
   * a new one that begins with every collection's complete state (see {@link outOfStep}).
   */
  message(
    bytes: Uint8Array,
    send: (message: Uint8Array) => void,
    restart: (error: MeshmuxError) => void,
  ): void {
    let resources: ResourcesMessage;
    try {
      resources = readResourcesMessage(bytes);
    } catch (err) {
      const error = this.undecodable(bytes, err, send);
      this.outOfStep(error, restart);
      return;
    }
    const { collection, nonce } = resources;
    const kind = this.ctx.state.kindOf(collection);
    if (kind === undefined) {
      // The upstream picks the name and the pace: the name is cut in the log and the NACK's text
      // (the NACK names the collection in full), and a stream warns once.
      const named = truncateForLog(collection);
      // Also the answer to the empty "trigger" a Galley sends first when it dialed us.
      if (collection !== '') {
        const level = this.refusedOnStream ? 'debug' : 'warn';
        this.refusedOnStream = true;
        this.ctx.log[level]({ collection: named }, 'refused a collection not asked for');
      }
      send(this.nack(collection, nonce, UNIMPLEMENTED, `unsupported collection "${named}"`));
      return;
    }
    const where = `${this.ctx.describe} ${collection}`;
    const incremental = resources.incremental && this.ctx.state.answered(collection);
    const version = resources.systemVersionInfo;
    const ack = (): void =>
      send(
        this.encode({
          sinkNode: this.node,
          collection,
          responseNonce: nonce,
          incremental: this.ctx.incremental,
        }),
      );
    const before = this.previous.get(collection);
    // An incremental answer changes the state without a full list of what it holds.
    this.previous.delete(collection);
    let results: ReadResult[];
    if (!incremental) {
      const read = this.readFullState(kind, bytes, resources.resources, where, before);
      results = read.results;
      if (read.patch !== undefined && this.ctx.state.applyPatch(collection, read.patch, version)) {
        this.ctx.onAnswer();
        this.previous.set(collection, { results, whole: true });
        ack();
        return;
      }
    } else {
      const lookUp = this.ctx.reader.remembers(kind);
      const entries = resources.resources;
      results = [];
      for (let i = 0; i < entries.length; i += 2) {
        const entry = bytes.subarray(entries[i], entries[i + 1]);
        results.push(atEntry(this.ctx.reader.read(kind, entry, where, lookUp), i / 2));
      }
      // Good objects, each named once: applied to the state as it stands, not to a copy of every object.
      const removed = resources.removedResources.map((name) => this.fullName(name));
      const patch = statedPatch(removed, results);
      if (patch !== undefined && this.ctx.state.applyPatch(collection, patch, version)) {
        this.ctx.onAnswer();
        ack();
        return;
      }
    }
    const base = incremental
      ? new Map(this.ctx.state.resourcesOf(collection))
      : new Map<string, ConfigResource>();
    const update = new ChannelUpdateBuilder(
      where,
      base,
      !incremental || this.ctx.state.keyedByName(collection),
      incremental ? this.ctx.state.notesOf(collection) : undefined,
    );
    if (incremental) for (const name of resources.removedResources) update.remove(this.fullName(name));
    for (const result of results) update.add(result);
    const built = update.build(version);
    const kept = this.ctx.state.apply(collection, built);
    // Only an answer taken resets the reconnect backoff.
    if (built.refused === undefined) this.ctx.onAnswer();
    if (!incremental) {
      const whole = built.refused === undefined && update.dropped === 0 && built.warnings.length === 0;
      this.previous.set(collection, { results, whole });
    }
    if (update.dropped === 0) {
      ack();
      return;
    }
    const detail = update.nackMessage();
    this.ctx.log.warn({ collection, dropped: update.dropped, kept, refused: update.refused }, detail);
    send(this.nack(collection, nonce, INVALID_ARGUMENT, detail));
    if (built.refused !== undefined) this.outOfStep(built.refused, restart);
  }

  /** Ends a stream that asked for incremental answers (see `outOfStep`); full states need not. */
  private outOfStep(refused: MeshmuxError, restart: (error: MeshmuxError) => void): void {
    if (this.ctx.incremental) restart(outOfStep(refused, 'the MCP source'));
  }

  /**
   * Reads a full state's entries (`entries`: where each lies in `bytes`), walking the last full
   * state's results in step: an entry whose bytes are those the result at the walk's place (or
   * the next one, past an object removed or replaced) was read from is taken as that result
   * without a look-up; any other is read. With `before` applied whole, also the patch from it:
   * undefined when the state must be judged whole (see `channelPatchOf`).
   */
  private readFullState(
    kind: KindDescriptor,
    bytes: Uint8Array,
    entries: readonly number[],
    where: string,
    before: PreviousState | undefined,
  ): { results: ReadResult[]; patch: ChannelPatch | undefined } {
    const reader = this.ctx.reader;
    const lookUp = reader.remembers(kind);
    const count = entries.length / 2;
    const results = new Array<ReadResult>(count);
    const last = before?.results ?? NO_RESULTS;
    const reused = new Uint8Array(last.length);
    const sameAs = new Int32Array(count);
    let cursor = 0;
    for (let i = 0; i < count; i++) {
      const entry = bytes.subarray(entries[2 * i], entries[2 * i + 1]);
      let same = -1;
      for (let j = cursor; j < cursor + 2 && j < last.length; j++) {
        if (reader.readsAs(last[j] as ReadResult, entry)) {
          same = j;
          cursor = j + 1;
          break;
        }
      }
      sameAs[i] = same;
      if (same >= 0) {
        reused[same] = 1;
        results[i] = last[same] as ReadResult;
      } else results[i] = atEntry(reader.read(kind, entry, where, lookUp), i);
    }
    if (before?.whole !== true) return { results, patch: undefined };
    const removed: ReadResult[] = [];
    for (let j = 0; j < last.length; j++) if (reused[j] === 0) removed.push(last[j] as ReadResult);
    return { results, patch: channelPatchOf(removed, results, sameAs) };
  }

  private undecodable(bytes: Uint8Array, err: unknown, send: (message: Uint8Array) => void): MeshmuxError {
    const fields = readTopLevelFields(bytes).fields;
    const collection = salvageString(fields, 2);
    const nonce = salvageString(fields, 5);
    const error = new MeshmuxError(
      'DECODE',
      `an undecodable Resources message (${bytes.byteLength} bytes) was ignored: ${(err as Error).message}`,
      { file: this.ctx.describe },
      { cause: err },
    );
    this.ctx.log.warn({ err: error.message }, 'undecodable message');
    this.ctx.state.report(error);
    if (collection !== undefined && nonce !== undefined && this.ctx.state.has(collection)) {
      send(this.nack(collection, nonce, INVALID_ARGUMENT, error.message));
    }
    return error;
  }

  /** Removal names are `<namespace>/<name>`, or a bare name in the default namespace. */
  private fullName(name: string): string {
    const slash = name.indexOf('/');
    if (slash < 0) return `${this.ctx.defaultNamespace}/${name}`;
    return slash === 0 ? `${this.ctx.defaultNamespace}${name}` : name;
  }

  private nack(collection: string, nonce: string, code: number, message: string): Uint8Array {
    return this.encode({
      sinkNode: this.node,
      collection,
      responseNonce: nonce,
      errorDetail: { code, message },
    });
  }

  private encode(request: RequestResourcesFields): Uint8Array {
    return encodeRequestResources(request);
  }
}
