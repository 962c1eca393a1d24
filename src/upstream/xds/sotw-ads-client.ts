import { MeshmuxError } from '../../core/errors.js';
import { ChannelUpdateBuilder } from '../streaming/channel-update-builder.js';
import type { OpenStream, StreamHandlers } from '../streaming/reconnecting-stream.js';
import type { ReadResult } from '../mcp-resource-reader.js';
import { sameBytes } from '../../wire/wire-fields.js';
import { scanDiscoveryResponse, type ScannedResponse } from './discovery-response.js';
import { INVALID_ARGUMENT, reportUndecodable, type AdsClientContext } from './ads-client-context.js';
import { MCP_RESOURCE_SUFFIX } from '../../wire/type-urls.js';
import { encodeDiscoveryRequest, type DiscoveryRequestFields } from '../../wire/discovery-requests.js';

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
   * Per type URL, the objects of the last response and what each was read as. Upstreams send
   * their state in a stable order, so an object is usually recognised by comparing its bytes with
   * the one at the same place last time (a cursor that skips removed and changed objects), before
   * reading anything of it.
   */
  private readonly previous = new Map<string, { values: Uint8Array[]; results: ReadResult[] }>();

  constructor(private readonly ctx: AdsClientContext) {}

  onOpen(stream: OpenStream): void {
    this.accepted = new Map();
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

  onMessage(stream: OpenStream, message: Uint8Array): void {
    let response: ScannedResponse;
    try {
      response = scanDiscoveryResponse(message);
    } catch (err) {
      this.undecodable(stream, message, err);
      return;
    }
    this.ctx.onAnswer();
    const { typeUrl, nonce, versionInfo: version } = response;
    const kind = this.ctx.state.kindOf(typeUrl);
    if (kind === undefined) {
      // Not ours to apply, and a sign the upstream mixed its types up: refused, so it can tell.
      const detail = `meshmux rejected a response for ${typeUrl || '(no type URL)'}, which it did not subscribe`;
      this.ctx.log.warn({ typeUrl, version }, detail);
      this.send(stream, {
        typeUrl,
        responseNonce: nonce,
        versionInfo: '',
        errorDetail: { code: INVALID_ARGUMENT, message: detail },
      });
      return;
    }
    const where = `${this.ctx.describe} ${typeUrl}`;
    const update = new ChannelUpdateBuilder(where);
    const before = this.previous.get(typeUrl);
    const now: { values: Uint8Array[]; results: ReadResult[] } = { values: [], results: [] };
    let cursor = 0;
    // Which objects of the last response this one re-sent as they were: the others may be forgotten.
    const reused = new Uint8Array(before?.values.length ?? 0);
    response.resources.forEach((any, i) => {
      if (!any.typeUrl.endsWith(MCP_RESOURCE_SUFFIX)) {
        update.reject(
          new MeshmuxError(
            'SCHEMA',
            `resources[${i}] is a ${any.typeUrl || '(no type)'}, not an MCP Resource`,
            {
              file: where,
            },
          ),
        );
        return;
      }
      // The object at the cursor, or the one after it (the cursor's was removed or changed).
      let result: ReadResult | undefined;
      let value: Uint8Array | undefined;
      for (let skip = 0; skip < 2 && result === undefined && before !== undefined; skip++) {
        const last = before.values[cursor + skip];
        if (last !== undefined && sameBytes(last, any.value)) {
          result = before.results[cursor + skip];
          value = last;
          reused[cursor + skip] = 1;
          cursor += skip + 1;
        }
      }
      result ??= this.ctx.reader.read(kind, any.value, where);
      // Owned bytes, not a view: the response buffer is released once this response is read.
      now.values.push(value ?? this.ctx.reader.rawOf(result) ?? new Uint8Array(any.value));
      now.results.push(result);
      update.add(result);
    });
    this.previous.set(typeUrl, now);
    const kept = this.ctx.state.apply(typeUrl, update.build(version));
    if (before !== undefined) this.forgetGone(typeUrl, before.results, reused);
    if (update.dropped === 0) {
      this.accepted.set(typeUrl, version);
      this.send(stream, { typeUrl, responseNonce: nonce, versionInfo: version });
      return;
    }
    const detail = update.nackMessage();
    this.ctx.log.warn({ typeUrl, version, dropped: update.dropped, kept, refused: update.refused }, detail);
    this.send(stream, {
      typeUrl,
      responseNonce: nonce,
      versionInfo: this.accepted.get(typeUrl) ?? '',
      errorDetail: { code: INVALID_ARGUMENT, message: detail },
    });
  }

  /**
   * Lets the reader drop what it remembers of objects a full state removed or replaced: those of
   * the last response this one did not re-send as they were, unless still served (a refused
   * response keeps them served). Costs a walk of flags, and a lookup per object not re-sent.
   */
  private forgetGone(typeUrl: string, before: readonly ReadResult[], reused: Uint8Array): void {
    const served = this.ctx.state.resourcesOf(typeUrl);
    for (let i = 0; i < before.length; i++) {
      if (reused[i] === 1) continue;
      const result = before[i] as ReadResult;
      if (!(result.ok && served.get(result.name) === result.resource)) this.ctx.reader.forget(result);
    }
  }

  onClose(error: MeshmuxError): void {
    this.ctx.state.streamClosed(error);
  }

  private undecodable(stream: OpenStream, message: Uint8Array, err: unknown): void {
    const salvaged = reportUndecodable(this.ctx, 'DiscoveryResponse', message, err);
    if (salvaged === undefined) return;
    const { typeUrl, nonce, error } = salvaged;
    this.send(stream, {
      typeUrl,
      responseNonce: nonce,
      versionInfo: this.accepted.get(typeUrl) ?? '',
      errorDetail: { code: INVALID_ARGUMENT, message: error.message },
    });
  }

  private send(stream: OpenStream, request: DiscoveryRequestFields): void {
    stream.send(encodeDiscoveryRequest(request));
  }
}
