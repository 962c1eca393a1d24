import { MeshmuxError } from '../../core/errors.js';
import type { ConfigResource } from '../../core/resource.js';
import { truncateForLog } from '../../core/truncate-for-log.js';
import type { ReadResult } from '../mcp-resource-reader.js';
import type { ChannelUpdate } from './subscription-state.js';
import { ChannelNotes } from './channel-notes.js';

/** At most this many dropped objects are named in a NACK; the count is always exact. */
const NACK_NAMES_LIMIT = 20;

/** The longest reason a NACK's text holds whole. */
const MAX_REASON_CHARS = 1024;

/**
 * Why a stream whose changes come once (delta, incremental MCP) is ended after `refused`, a
 * response refused whole or one that did not decode: none of its changes were taken, and
 * applied to what meshmux holds, the next answers would serve a state `peer` never had (after a
 * refused first answer, a change taken as the whole state deletes the rest of it downstream).
 * The stream's owner ends it, every object served kept, and the next begins with the complete
 * state; the refusal does not reset the reconnect backoff.
 */
export function outOfStep(refused: MeshmuxError, peer: string): MeshmuxError {
  return new MeshmuxError(
    'UNAVAILABLE',
    `${refused.message}; the stream is out of step with ${peer}, which sends each change once: ` +
      'a new stream is opened for the complete state',
    refused.location,
  );
}

/**
 * Collects the objects of one upstream response for one channel: good ones into the new state,
 * bad ones into rejections, and builds the update and the NACK text from them. Start from an
 * empty map for a full state, or from a copy of the channel's state for an incremental one.
 *
 * An object that cannot be named as an object of the channel's kind (its envelope or body does
 * not decode, it is not an MCP Resource, its body is another kind, its name is unusable) makes
 * the whole response refused: what such a response leaves out cannot be told from what it
 * deletes, so it is not applied at all (see `ChannelUpdate.refused`). An object that is named but
 * invalid is dropped alone and keeps its previous version.
 */
export class ChannelUpdateBuilder {
  private readonly rejected = new Map<string, MeshmuxError>();
  private readonly unnamed: MeshmuxError[] = [];
  /** Warnings of the response itself (names sent twice); the objects' own are in `notes`. */
  private readonly warnings: MeshmuxError[] = [];
  /** Keys added by this response, when it began from a copy of the state (else: `resources`). */
  private readonly seen = new Set<string>();
  private readonly notes: ChannelNotes;
  private total = 0;
  /** Some object was added under a key other than its `<namespace>/<name>`. */
  private renamed = false;

  constructor(
    /** Where the response came from (`xds://host:port <type URL>`), for messages. */
    private readonly where: string,
    private readonly resources = new Map<string, ConfigResource>(),
    /**
     * Whether `resources`, a copy of the channel's state, holds every object under its own
     * `namespace/name` (see `SubscriptionState.keyedByName`): then so does the update, unless an
     * object is added under another key. An empty start is.
     */
    private readonly baseKeyedByName = resources.size === 0,
    /** The notes of the objects of `resources`, when it is a copy of the state; owned from now on. */
    notes?: ChannelNotes,
  ) {
    this.startedEmpty = resources.size === 0;
    this.notes = notes ?? new ChannelNotes(where);
  }

  /** Began from an empty state, so every key was added here. */
  private readonly startedEmpty: boolean;

  /** Adds one read object under `key` (default: its `<namespace>/<name>`). */
  add(result: ReadResult, key?: string): void {
    this.total++;
    if (!result.ok) {
      const name = key ?? result.name;
      if (name === undefined) this.unnamed.push(result.error);
      else {
        this.rejected.set(name, result.error);
        // A bad later duplicate must not leave an earlier good copy of the same response in place.
        if (this.startedEmpty || this.seen.has(name)) {
          this.resources.delete(name);
          this.notes.drop(name);
        }
      }
      return;
    }
    const name = key ?? result.name;
    if (name !== result.name) this.renamed = true;
    let twice: boolean;
    if (this.startedEmpty) {
      // One map operation per object: a key set before leaves the size as it was.
      const size = this.resources.size;
      this.resources.set(name, result.resource);
      twice = this.resources.size === size || (this.rejected.size > 0 && this.rejected.has(name));
    } else {
      twice = this.seen.has(name);
      this.seen.add(name);
      this.resources.set(name, result.resource);
    }
    if (twice) {
      this.warnings.push(
        new MeshmuxError('METADATA', `${name} appears twice in one response; the later one is applied`, {
          file: this.where,
        }),
      );
    }
    if (this.rejected.size > 0) this.rejected.delete(name);
    this.notes.note(name, result);
  }

  /** Drops one object that could not be read at all (wrong envelope); `key` when its name is known. */
  reject(error: MeshmuxError, key?: string): void {
    this.add({ ok: false, error, ...(key === undefined ? {} : { name: key }) }, key);
  }

  /** Removes an object by key (incremental protocols). Removing an unknown key is harmless. */
  remove(key: string): void {
    this.resources.delete(key);
    this.notes.drop(key);
  }

  /** Objects dropped in this response. */
  get dropped(): number {
    return this.rejected.size + this.unnamed.length;
  }

  /** Whether the response is refused whole: some object could not be named. */
  get refused(): boolean {
    return this.unnamed.length > 0;
  }

  /** The error a refused response is reported with; undefined when it is applied. */
  private refusal(): MeshmuxError | undefined {
    if (!this.refused) return undefined;
    const reasons = this.unnamed.map((e) => e.message);
    const shown = reasons.slice(0, NACK_NAMES_LIMIT).join('; ');
    const more = reasons.length > NACK_NAMES_LIMIT ? `; and ${reasons.length - NACK_NAMES_LIMIT} more` : '';
    return new MeshmuxError(
      'SCHEMA',
      `meshmux rejected the whole response and kept the previous state: ${this.unnamed.length} of ` +
        `${this.total} objects cannot be named as objects of this type: ${shown}${more}`,
      { file: this.where },
    );
  }

  build(version: string): ChannelUpdate {
    return {
      resources: this.resources,
      keyedByName: !this.renamed && this.baseKeyedByName,
      rejected: this.rejected,
      unnamed: this.unnamed,
      warnings: [...this.warnings],
      notes: this.notes,
      version,
      refused: this.refusal(),
    };
  }

  /** The `error_detail.message` of the NACK for this response. */
  nackMessage(): string {
    const refusal = this.refusal();
    // Reasons quote what the upstream sent (names, type URLs): each is cut, so the NACK stays small.
    if (refusal !== undefined) return truncateForLog(refusal.message, MAX_REASON_CHARS);
    const reasons = [...this.rejected.values(), ...this.unnamed].map((e) =>
      truncateForLog(e.message, MAX_REASON_CHARS),
    );
    const shown = reasons.slice(0, NACK_NAMES_LIMIT).join('; ');
    const more = reasons.length > NACK_NAMES_LIMIT ? `; and ${reasons.length - NACK_NAMES_LIMIT} more` : '';
    return `meshmux dropped ${this.dropped} of ${this.total} objects and kept their previous versions: ${shown}${more}`;
  }
}
