import { MeshmuxError } from '../../core/errors.js';
import { truncateForLog } from '../../core/truncate-for-log.js';
import { ChannelUpdateBuilder } from '../streaming/channel-update-builder.js';
import { channelPatchOf } from '../streaming/channel-patch.js';
import type { OpenStream, StreamHandlers } from '../streaming/reconnecting-stream.js';
import { atEntry, type ReadResult } from '../mcp-resource-reader.js';
import { ResponseLayout, type ResponseSplice } from './discovery-response.js';
import { EarlierReads } from './earlier-reads.js';
import { ResentResponseMatcher, type ResponseHead } from './resent-response-matcher.js';
import type { MessageMatcher } from '../streaming/grpc-message-reader.js';
import {
  INVALID_ARGUMENT,
  MAX_RESPONSE_STRING_CHARS,
  overlongString,
  refuseUnsubscribed,
  reportUndecodable,
  type AdsClientContext,
} from './ads-client-context.js';
import { MCP_RESOURCE_SUFFIX } from '../../wire/type-urls.js';
import { encodeDiscoveryRequest, type DiscoveryRequestFields } from '../../wire/discovery-requests.js';

/** A response as last read for one type URL. */
interface PreviousResponse {
  readonly layout: ResponseLayout;
  /** What each entry was read as, by position. */
  readonly results: readonly ReadResult[];
  /**
   * Applied as it was: not refused, no name twice. The state holds exactly the good objects of
   * `results` and, for each entry dropped, the version its name held before.
   */
  readonly whole: boolean;
  /** The NACK's detail when entries were dropped; undefined when none was. */
  readonly dropped: string | undefined;
  /** Entries that were not MCP Resources (their errors name their position). */
  readonly wrongTypes: number;
}

/** The entries of a response between those it shares with the last one at either end. */
interface ChangedSpan {
  /** Entries from the start that are the last response's at the same places. */
  readonly prefix: number;
  /** Entries from the end that are the last response's at the same places from its end. */
  readonly suffix: number;
  /**
   * Per entry in between: the index of the last response's entry it re-sends as it was, or -1 for
   * an entry to read anew: checked well formed, and read only when applied (entries read up
   * front, an object and a view each, would outlive the young generation on a large state).
   */
  readonly sameAs: Int32Array;
}

/**
 * Responses at least this large, arriving when the transport would need a new buffer for them,
 * are first compared with the kept ones as they come (see {@link SotwAdsClient.expectMessage}).
 */
const MATCH_FROM_BYTES = 64 * 1024;

/** Errors of entries that are not MCP Resources, which name their position in the response. */
const WRONG_TYPE_RESULTS = new WeakSet<ReadResult>();

/**
 * The state-of-the-world side of an `xds` source: one request per subscribed type URL (node on
 * the first), each response read object by object into that type's new state, then an ACK, or a
 * NACK naming the objects dropped (the rest is applied all the same, their previous versions kept).
 * A response with an object that cannot be named as one of its type (not an MCP Resource, an
 * undecodable envelope, a body of another kind), or for a type URL not subscribed, is NACKed and
 * changes nothing. A response that does not decode at all changes nothing either; it is NACKed
 * when its type URL and nonce can be salvaged, and reported.
 */
export class SotwAdsClient implements StreamHandlers {
  /** Per type URL, the `version_info` last accepted whole on the current stream. */
  private accepted = new Map<string, string>();
  /**
   * Per type URL, the last response and what each of its entries was read as. Upstreams send
   * their state in a stable order, so the entries a response shares with the last one are found
   * by comparing runs of bytes from both ends, and only those in between are looked at one by one.
   */
  private readonly previous = new Map<string, PreviousResponse>();
  /** Per type URL, what objects served but left out of its last response were read as (see {@link keepServed}). */
  private readonly stillServed = new Map<string, readonly ReadResult[]>();
  /** An offsets array no kept layout uses, for the next response to be read into. */
  private spareOffsets: Int32Array<ArrayBuffer> | undefined;
  /** Whether this stream has had a response for a type not subscribed: only the first is logged at warn. */
  private unsubscribedOnStream = false;
  /** Whether this stream has had a response refused for a string too long: only the first is logged at warn. */
  private overlongOnStream = false;

  constructor(private readonly ctx: AdsClientContext) {}

  onOpen(stream: OpenStream): void {
    this.accepted = new Map();
    this.unsubscribedOnStream = false;
    this.overlongOnStream = false;
    this.ctx.state.streamOpened();
    let first = true;
    for (const typeUrl of this.ctx.state.channelIds()) {
      this.send(stream, {
        typeUrl,
        versionInfo: '',
        responseNonce: '',
        resourceNames: [],
        ...(first ? { node: this.ctx.node } : {}),
      });
      first = false;
    }
  }

  /**
   * A large response the transport has no buffer for (a stream just opened, quiet for a while, or
   * whose last kept response took the buffer over) is compared with the kept responses as it
   * arrives: one that repeats a kept response's entries needs no copy, nor the buffer a copy would
   * go in, and is judged as that response sent again; one that differs from the kept response of
   * its type in a few entries is made of that response's bytes and a copy of what changed, and
   * read as any other. The rest is copied and read as usual.
   */
  expectMessage(stream: OpenStream, size: number): MessageMatcher | undefined {
    if (size < MATCH_FROM_BYTES || this.previous.size === 0) return undefined;
    const kept: ResponseLayout[] = [];
    for (const previous of this.previous.values()) if (previous.layout.count > 0) kept.push(previous.layout);
    return new ResentResponseMatcher(
      kept,
      {
        isKept: (layout) =>
          this.previous.get(layout.typeUrl)?.layout === layout &&
          this.ctx.state.kindOf(layout.typeUrl) !== undefined,
        resent: (layout, head) =>
          this.onResponse(stream, layout, head, {
            prefix: layout.count,
            suffix: 0,
            sameAs: NO_ENTRIES,
          }),
        spliced: (layout, splice) => this.onSplice(stream, layout, splice),
      },
      size,
      this.spareOffsets,
    );
  }

  /**
   * A response that differs from `base`, the kept response of its type, in a few entries: made of
   * `base`'s bytes and its own, then read against `base` as any response, the entries it shares
   * with `base` known from the splice. Its entries were all read before or walked by the matcher,
   * so reading them cannot fail; were it to, the type would keep no response, and the next one
   * would be read whole (this one NACKed, as any undecodable response).
   */
  private onSplice(stream: OpenStream, base: ResponseLayout, splice: ResponseSplice): void {
    const layout = base.splice(splice);
    // The splice's offsets are the layout's now; the kept one's become spare once it is replaced.
    if (this.spareOffsets === splice.offsets) this.spareOffsets = undefined;
    let span: ChangedSpan;
    try {
      span = changedSpan(layout, this.previous.get(layout.typeUrl));
    } catch (err) {
      this.previous.delete(layout.typeUrl);
      this.undecodable(stream, layout.message, err);
      return;
    }
    this.onResponse(stream, layout, layout, span);
  }

  onMessage(stream: OpenStream, message: Uint8Array): void {
    let layout: ResponseLayout;
    let span: ChangedSpan;
    try {
      // The kept responses of every type: the one this answers is read from there where it agrees.
      const kept: ResponseLayout[] = [];
      for (const previous of this.previous.values()) kept.push(previous.layout);
      layout = new ResponseLayout(message, this.spareOffsets, kept);
      // Scratch until kept: a response that is not kept leaves its (maybe grown) array spare.
      this.spareOffsets = layout.offsets;
      span = changedSpan(layout, this.previous.get(layout.typeUrl));
    } catch (err) {
      this.undecodable(stream, message, err);
      return;
    }
    this.onResponse(stream, layout, layout, span);
  }

  /**
   * A response read: its top-level strings (`head`), the layout of its entries (a kept one's, for
   * a response that repeats them) and what it shares with the last one of its type.
   */
  private onResponse(
    stream: OpenStream,
    layout: ResponseLayout,
    head: ResponseHead,
    span: ChangedSpan,
  ): void {
    const { typeUrl, nonce, versionInfo: version } = head;
    const overlong = overlongString(this.ctx, { type_url: typeUrl, nonce, version_info: version });
    if (overlong !== undefined) {
      this.refuseOverlong(stream, typeUrl, nonce, overlong);
      return;
    }
    this.ctx.onAnswer();
    const kind = this.ctx.state.kindOf(typeUrl);
    if (kind === undefined) {
      // Not ours to apply, and a sign the upstream mixed its types up: refused, so it can tell.
      const detail = refuseUnsubscribed(this.ctx, typeUrl, this.unsubscribedOnStream, version);
      this.unsubscribedOnStream = true;
      this.send(stream, {
        typeUrl,
        responseNonce: nonce,
        versionInfo: '',
        errorDetail: { code: INVALID_ARGUMENT, message: detail },
      });
      return;
    }
    const where = `${this.ctx.describe} ${typeUrl}`;
    const before = this.previous.get(typeUrl);
    const { prefix, suffix, sameAs } = span;
    const beforeEnd = (before?.layout.count ?? 0) - suffix;
    // Every entry the last response's, at the same places: a state sent again as it was.
    const resent = before !== undefined && prefix === layout.count && before.layout.count === layout.count;
    // Which entries of the last response between the shared ends this one re-sent as they were.
    const reused = new Uint8Array(Math.max(0, beforeEnd - prefix));
    const middle: ReadResult[] = [];
    let wrongTypes = 0;
    // What was read before, where an entry not found in place may be: this type's last response
    // between the ends it shares with this one (the rest are in place), what is served though it
    // left it out, and the last response of each other spelling of the kind's type URL: searched
    // whole for this type's first state, else at the entry's own position (searching it by name
    // for every change would cost as much as the reader's map of every object this replaces).
    // Nothing at a start.
    const earlier = new EarlierReads(this.ctx.reader);
    if (before !== undefined) earlier.add(before.results, prefix, beforeEnd);
    const served = this.stillServed.get(typeUrl);
    if (served !== undefined) earlier.add(served);
    for (const [other, previous] of this.previous) {
      if (other === typeUrl || this.ctx.state.kindOf(other) !== kind) continue;
      if (before === undefined) earlier.add(previous.results);
      else earlier.addAligned(previous.results);
    }
    // Objects read after a first state are copies (see below), wherever they are found.
    const lookUp = earlier.any || (before !== undefined && before.results.length > 0);
    // The response is kept, unless it repeats the last one: its bytes are settled first, so that
    // the objects read from a first state, or from the bytes a splice changed, keep views of them.
    if (!resent) this.settle(stream, layout);
    for (let k = 0; k < sameAs.length; k++) {
      const j = sameAs[k] as number;
      if (j >= 0 && before !== undefined) {
        middle.push(before.results[j] as ReadResult);
        reused[j - prefix] = 1;
        continue;
      }
      const any = layout.entry(prefix + k);
      if (!any.typeUrl.endsWith(MCP_RESOURCE_SUFFIX)) {
        wrongTypes++;
        middle.push(wrongType(prefix + k, any.typeUrl, where));
      } else {
        // Elsewhere the object's bytes are copied: a view would keep a whole response alive for them.
        const view = !lookUp || layout.inOwnBytes(prefix + k);
        middle.push(
          earlier.find(any.value, prefix + k) ??
            atEntry(this.ctx.reader.read(kind, any.value, where, lookUp, view), prefix + k),
        );
      }
    }
    const removed: ReadResult[] = [];
    for (let j = prefix; j < beforeEnd; j++)
      if (reused[j - prefix] === 0) removed.push(before?.results[j] as ReadResult);
    const results = spliced(before, prefix, beforeEnd, middle);

    // Applied as a change of the last state when that state was this response's predecessor taken
    // whole and the changed entries are good objects, each named once: nothing else to re-judge.
    // Entries the last response had dropped, sent again as they were, are dropped again (their
    // previous versions stay, and the response is NACKed as the last one was).
    const dropped = before?.dropped;
    const patch = before?.whole === true ? channelPatchOf(removed, middle, sameAs) : undefined;
    if (patch !== undefined && this.ctx.state.applyPatch(typeUrl, patch, version, dropped !== undefined)) {
      this.keep(before, { layout, results, whole: true, dropped, wrongTypes: 0 }, resent);
      this.keepServed(typeUrl, removed, middle);
      if (dropped === undefined) {
        this.accepted.set(typeUrl, version);
        this.send(stream, { typeUrl, responseNonce: nonce, versionInfo: version });
      } else this.nack(stream, typeUrl, nonce, version, dropped);
      return;
    }

    const update = new ChannelUpdateBuilder(where);
    for (let k = 0; k < results.length; k++) update.add(results[k] as ReadResult);
    const built = update.build(version);
    const detail = update.dropped === 0 ? undefined : update.nackMessage();
    const kept = this.ctx.state.apply(typeUrl, built);
    this.keep(
      before,
      {
        layout,
        results,
        whole: built.refused === undefined && built.warnings.length === 0,
        dropped: detail,
        wrongTypes:
          (before !== undefined && before.wrongTypes > 0 ? countWrongTypes(before.results, prefix) : 0) +
          wrongTypes,
      },
      resent,
    );
    this.keepServed(typeUrl, removed, middle);
    if (detail === undefined) {
      this.accepted.set(typeUrl, version);
      this.send(stream, { typeUrl, responseNonce: nonce, versionInfo: version });
      return;
    }
    this.ctx.log.warn(
      { typeUrl, version: truncateForLog(version), dropped: update.dropped, kept, refused: update.refused },
      detail,
    );
    this.nack(stream, typeUrl, nonce, version, detail, false);
  }

  /**
   * Refuses a response with a string too long to echo or keep (see `overlongString`), reported on
   * the source: NACKed when its type URL and nonce can be echoed, else the stream is ended (the
   * upstream could not match an answer that does not echo them). Only a stream's first one is
   * logged at warn.
   */
  private refuseOverlong(stream: OpenStream, typeUrl: string, nonce: string, error: MeshmuxError): void {
    this.ctx.state.report(error);
    if (typeUrl.length > MAX_RESPONSE_STRING_CHARS || nonce.length > MAX_RESPONSE_STRING_CHARS) {
      stream.restart(error);
      return;
    }
    const named = truncateForLog(typeUrl);
    this.ctx.log[this.overlongOnStream ? 'debug' : 'warn']({ typeUrl: named }, error.message);
    this.overlongOnStream = true;
    this.nack(stream, typeUrl, nonce, '', error.message, false);
  }

  /** Refuses a response (its `version`), naming why in `detail`; logged unless said otherwise. */
  private nack(
    stream: OpenStream,
    typeUrl: string,
    nonce: string,
    version: string,
    detail: string,
    log = true,
  ): void {
    if (log) this.ctx.log.warn({ typeUrl, version: truncateForLog(version) }, detail);
    this.send(stream, {
      typeUrl,
      responseNonce: nonce,
      versionInfo: this.accepted.get(typeUrl) ?? '',
      errorDetail: { code: INVALID_ARGUMENT, message: detail },
    });
  }

  /**
   * Keeps `next` as its type's last response, in place of `before`; `before`'s offsets become the
   * spare ones. `before` is not used afterwards. `resent`: `next` holds exactly `before`'s entries,
   * byte for byte; otherwise `next`'s bytes were settled before its entries were read
   * (see {@link settle}).
   */
  private keep(before: PreviousResponse | undefined, next: PreviousResponse, resent: boolean): void {
    if (before !== undefined && resent) {
      // The same entries as the last response (a resent state): its bytes and offsets stay kept,
      // nothing is copied, and the new layout's offsets (if it has its own) become the spare ones.
      this.previous.set(next.layout.typeUrl, { ...next, layout: before.layout });
      if (next.layout !== before.layout) this.spareOffsets = next.layout.offsets;
      return;
    }
    this.previous.set(next.layout.typeUrl, next);
    this.spareOffsets = before?.layout.offsets;
  }

  /**
   * Makes `layout`'s bytes its own, once: the transport's reassembly buffer the response lies in is
   * taken over for good (the transport allocates another for its next large message, or compares
   * it with the kept responses as it arrives); a response that arrived whole in one chunk is
   * copied. A spliced layout owns its bytes already. Kept bytes are never written again, as the
   * objects read from them may hold views of them, so no buffer goes back to the transport.
   */
  private settle(stream: OpenStream, layout: ResponseLayout): void {
    if (!layout.kept) {
      const adopted = stream.adoptMessage();
      if (adopted !== undefined && layout.adoptBytes(adopted)) return;
    }
    layout.keepBytes();
  }

  /**
   * Keeps, apart from the kept responses, what the objects still served though the last response
   * of their type left them out were read as (a refused response keeps the state before it): to
   * be found when they are sent again. `middle`: what the response read anew or found elsewhere,
   * which its kept results hold (an object that only moved is not kept twice, nor looked for
   * among the kept ones at every response after). Costs a lookup per object the response did not
   * re-send in place.
   */
  private keepServed(typeUrl: string, removed: readonly ReadResult[], middle: readonly ReadResult[]): void {
    const earlier = this.stillServed.get(typeUrl);
    if (removed.length === 0 && earlier === undefined) return;
    const served = this.ctx.state.resourcesOf(typeUrl);
    const inResponse = new Set(middle);
    const kept = new Set<ReadResult>();
    const keepIfServed = (result: ReadResult): void => {
      if (result.ok && served.get(result.name) === result.resource && !inResponse.has(result))
        kept.add(result);
    };
    removed.forEach(keepIfServed);
    earlier?.forEach(keepIfServed);
    if (kept.size === 0) this.stillServed.delete(typeUrl);
    else this.stillServed.set(typeUrl, [...kept]);
  }

  onClose(error: MeshmuxError): void {
    this.ctx.state.streamClosed(error);
  }

  private undecodable(stream: OpenStream, message: Uint8Array, err: unknown): void {
    const { error, nack } = reportUndecodable(this.ctx, 'DiscoveryResponse', message, err);
    if (nack === undefined) return;
    const { typeUrl, nonce } = nack;
    this.send(stream, {
      typeUrl,
      responseNonce: nonce,
      versionInfo: this.accepted.get(typeUrl) ?? '',
      errorDetail: { code: INVALID_ARGUMENT, message: error.message },
    });
  }

  /**
   * An answer (ACK or NACK) supersedes the one before it of its type URL: while the upstream does
   * not read, only the latest waits. Subscriptions (no nonce) are all sent.
   */
  private send(stream: OpenStream, request: DiscoveryRequestFields): void {
    const answer = request.responseNonce !== undefined && request.responseNonce !== '';
    stream.send(encodeDiscoveryRequest(request), answer ? request.typeUrl : undefined);
  }
}

/**
 * Finds what `layout` shares with `before` at both ends, which entries in between re-send one of
 * `before`'s as it was (the one at a cursor moving through `before`'s, or the one after it), and
 * checks the others. Throws when one of those is not a well-formed `Any` (the shared ones were
 * read before). The shared end is not taken when the last response had entries whose errors name
 * their position, and then every entry in between is read to tell its type (a wrong type is never
 * taken as re-sent).
 *
 * A response with changes spread through a kind (an upstream batching its changes) re-sends most
 * entries between its first and its last change: those are recognised without being read (for a
 * response written over the last one, from where its pieces came), and only the changed ones
 * cost an object.
 */
function changedSpan(layout: ResponseLayout, before: PreviousResponse | undefined): ChangedSpan {
  let prefix = 0;
  let suffix = 0;
  if (before !== undefined) {
    const most = Math.min(layout.count, before.layout.count);
    prefix = layout.commonPrefix(before.layout, most);
    if (before.wrongTypes === 0) suffix = layout.commonSuffix(before.layout, most - prefix);
  }
  const end = layout.count - suffix;
  const beforeEnd = (before?.layout.count ?? 0) - suffix;
  const sameAs = new Int32Array(Math.max(0, end - prefix));
  // Entries re-sent as they were may be wrong types too: each is read to tell (which checks it).
  const wrongTypesBefore = before !== undefined && before.wrongTypes > 0;
  let cursor = prefix;
  for (let i = prefix; i < end; i++) {
    const mcp = !wrongTypesBefore || layout.entry(i).typeUrl.endsWith(MCP_RESOURCE_SUFFIX);
    let same = -1;
    if (before !== undefined && mcp) {
      for (let skip = 0; skip < 2; skip++) {
        const j = cursor + skip;
        if (j < beforeEnd && layout.sameEntry(i, before.layout, j)) {
          same = j;
          cursor = j + 1;
          break;
        }
      }
    }
    sameAs[i - prefix] = same;
    if (same < 0 && !wrongTypesBefore) layout.checkEntry(i);
  }
  return { prefix, suffix, sameAs };
}

/** The entries between the shared ends of a response that re-sends the last one whole: none. */
const NO_ENTRIES = new Int32Array(0);

/** Entries read anew up to which an added or removed one is spliced into the last response's array. */
const SPLICED_IN_PLACE = 1024;

/**
 * What each entry of a response was read as: the last response's results from `prefix` to
 * `beforeEnd` replaced by `middle`. The last response's array is reused (it is replaced by the new
 * response, and only its entries before `prefix` are read again), written over where the counts
 * match and spliced where a few entries came or went, so a change of a few objects among tens of
 * thousands allocates no array as large as the response: such arrays live in V8's large-object
 * space, which only a full collection of the heap frees.
 */
function spliced(
  before: PreviousResponse | undefined,
  prefix: number,
  beforeEnd: number,
  middle: ReadResult[],
): readonly ReadResult[] {
  if (before === undefined) return middle;
  const results = before.results as ReadResult[];
  if (middle.length === beforeEnd - prefix) {
    for (let k = 0; k < middle.length; k++) results[prefix + k] = middle[k] as ReadResult;
    return results;
  }
  if (middle.length <= SPLICED_IN_PLACE) {
    results.splice(prefix, beforeEnd - prefix, ...middle);
    return results;
  }
  return [...results.slice(0, prefix), ...middle, ...results.slice(beforeEnd)];
}

function wrongType(index: number, typeUrl: string, where: string): ReadResult {
  const result: ReadResult = {
    ok: false,
    error: new MeshmuxError(
      'SCHEMA',
      `resources[${index}] is a ${truncateForLog(typeUrl) || '(no type)'}, not an MCP Resource`,
      {
        file: where,
      },
    ),
  };
  WRONG_TYPE_RESULTS.add(result);
  return result;
}

function countWrongTypes(results: readonly ReadResult[], upTo: number): number {
  let n = 0;
  for (let i = 0; i < upTo; i++) if (WRONG_TYPE_RESULTS.has(results[i] as ReadResult)) n++;
  return n;
}
