import { MeshmuxError } from '../../core/errors.js';
import { truncateForLog } from '../../core/truncate-for-log.js';
import type { ConfigResource } from '../../core/resource.js';
import { messageType } from '../../schema/proto-root.js';
import { ChannelUpdateBuilder, outOfStep } from '../streaming/channel-update-builder.js';
import { statedPatch } from '../streaming/channel-patch.js';
import type { ChannelPatch } from '../streaming/subscription-state.js';
import { atEntry, type ReadResult } from '../mcp-resource-reader.js';
import type { OpenStream, StreamHandlers } from '../streaming/reconnecting-stream.js';
import { plainBytes } from '../../wire/wire-fields.js';
import {
  INVALID_ARGUMENT,
  MAX_RESPONSE_STRING_CHARS,
  overlongString,
  refuseUnsubscribed,
  reportUndecodable,
  type AdsClientContext,
} from './ads-client-context.js';
import { MCP_RESOURCE_SUFFIX } from '../../wire/type-urls.js';
import {
  encodeDeltaDiscoveryRequest,
  type DeltaDiscoveryRequestFields,
} from '../../wire/discovery-requests.js';

const DELTA_RESPONSE = messageType('envoy.service.discovery.v3.DeltaDiscoveryResponse');

interface DeltaResource {
  name: string;
  version: string;
  resource: { type_url: string; value: Uint8Array } | null;
}

interface DeltaResponse {
  system_version_info: string;
  resources: DeltaResource[];
  type_url: string;
  removed_resources: string[];
  removed_resource_names: Array<{ name: string }>;
  nonce: string;
}

/** One resource of a delta response, as read: a result under its key, a refusal, or a removal. */
type DeltaEntry =
  | { readonly result: ReadResult; readonly key: string | undefined; readonly rejected?: undefined }
  | { readonly result?: undefined; readonly rejected: MeshmuxError }
  | { readonly result?: undefined; readonly rejected?: undefined; readonly removed: string };

/**
 * A delta response as a patch of the state it changes, when every resource in it is a good
 * object under its own `namespace/name` (see `statedPatch`). Undefined otherwise, and when a name
 * is both sent and reported missing among its resources (what stands then depends on their order).
 */
function deltaPatch(removals: readonly string[], entries: readonly DeltaEntry[]): ChannelPatch | undefined {
  const results: ReadResult[] = [];
  const removed = [...removals];
  const sent = new Set<string>();
  for (const entry of entries) {
    if (entry.rejected !== undefined) return undefined;
    if (entry.result === undefined) {
      if (sent.has(entry.removed)) return undefined;
      removed.push(entry.removed);
      continue;
    }
    if (!entry.result.ok || (entry.key !== undefined && entry.key !== entry.result.name)) return undefined;
    // A name reported missing before it is sent is removed, then held: as a patch does it.
    sent.add(entry.result.name);
    results.push(entry.result);
  }
  return statedPatch(removed, results);
}

/**
 * The delta side of an `xds` source (`delta: true`), for upstreams that serve
 * `DeltaAggregatedResources` (Nacos, for ServiceEntry). Every type URL is subscribed as a
 * wildcard with an empty name list (Nacos reads names there as hosts, so `*` would not do) and
 * without `initial_resource_versions`: the first response of each type on a stream is therefore
 * the upstream's complete state and replaces what the type held; later responses add, update
 * and remove by resource name. Objects arrive in an MCP envelope, or bare (Nacos: the body alone,
 * no name), in which case they are named after the delta name or their first host. A response
 * refused whole ends the stream (see `outOfStep`).
 */
export class DeltaAdsClient implements StreamHandlers {
  /** Whether this stream has had a response for a type not subscribed: only the first is logged at warn. */
  private unsubscribedOnStream = false;

  constructor(private readonly ctx: AdsClientContext) {}

  onOpen(stream: OpenStream): void {
    this.unsubscribedOnStream = false;
    this.ctx.state.streamOpened();
    let first = true;
    for (const typeUrl of this.ctx.state.channelIds()) {
      this.send(stream, { typeUrl, ...(first ? { node: this.ctx.node } : {}) });
      first = false;
    }
  }

  onMessage(stream: OpenStream, message: Uint8Array): void {
    let response: DeltaResponse;
    try {
      response = DELTA_RESPONSE.toObject(DELTA_RESPONSE.decode(plainBytes(message)), {
        defaults: true,
        arrays: true,
      }) as DeltaResponse;
    } catch (err) {
      this.undecodable(stream, message, err);
      return;
    }
    const { type_url: typeUrl, nonce } = response;
    const overlong = overlongString(this.ctx, {
      type_url: typeUrl,
      nonce,
      system_version_info: response.system_version_info,
    });
    if (overlong !== undefined) {
      // Refused whole, so out of step; NACKed first when the NACK can echo its type URL and nonce.
      this.ctx.state.report(overlong);
      if (typeUrl.length <= MAX_RESPONSE_STRING_CHARS && nonce.length <= MAX_RESPONSE_STRING_CHARS) {
        this.send(stream, {
          typeUrl,
          responseNonce: nonce,
          errorDetail: { code: INVALID_ARGUMENT, message: overlong.message },
        });
      }
      stream.restart(outOfStep(overlong, 'the upstream'));
      return;
    }
    const kind = this.ctx.state.kindOf(typeUrl);
    if (kind === undefined) {
      // Not ours to apply, and a sign the upstream mixed its streams up: refused, so it can tell.
      const detail = refuseUnsubscribed(this.ctx, typeUrl, this.unsubscribedOnStream);
      this.unsubscribedOnStream = true;
      this.send(stream, {
        typeUrl,
        responseNonce: nonce,
        errorDetail: { code: INVALID_ARGUMENT, message: detail },
      });
      return;
    }
    const where = `${this.ctx.describe} ${typeUrl}`;
    // The first answer on a stream is the whole state; after it, changes to what the type holds.
    const answered = this.ctx.state.answered(typeUrl);
    const removals: string[] = [...response.removed_resources];
    for (const { name } of response.removed_resource_names) removals.push(name);
    const entries: DeltaEntry[] = [];
    const lookUp = this.ctx.reader.remembers(kind);
    response.resources.forEach((r, i) => {
      const any = r.resource;
      if (any === null) {
        // A subscribed name the upstream does not have: removed where it stands among the others.
        if (r.name !== '') entries.push({ removed: r.name });
        return;
      }
      if (any.type_url.endsWith(MCP_RESOURCE_SUFFIX)) {
        const result = atEntry(this.ctx.reader.read(kind, any.value, where, lookUp), i);
        entries.push({ result, key: r.name === '' ? undefined : r.name });
        return;
      }
      if (any.type_url.slice(any.type_url.lastIndexOf('/') + 1) === kind.bodyType) {
        // Removals name objects as the upstream does: by delta name, or (Nacos) by first host.
        const name = r.name !== '' ? r.name : this.ctx.reader.bareBodyName(kind, any.value);
        const result = this.ctx.reader.readBareBody(kind, any.type_url, any.value, name, where);
        entries.push({ result, key: name || undefined });
        return;
      }
      entries.push({
        rejected: new MeshmuxError(
          'SCHEMA',
          `resources[${i}] is a ${truncateForLog(any.type_url) || '(no type)'}, not a ${kind.kind}`,
          { file: where },
        ),
      });
    });
    // A change of good objects under their own names: applied to the state as it stands,
    // not to a copy of every object the type holds.
    const patch = answered ? deltaPatch(removals, entries) : undefined;
    if (patch !== undefined && this.ctx.state.applyPatch(typeUrl, patch, response.system_version_info)) {
      this.ctx.onAnswer();
      this.send(stream, { typeUrl, responseNonce: nonce });
      return;
    }
    const base = answered ? new Map(this.ctx.state.resourcesOf(typeUrl)) : new Map<string, ConfigResource>();
    const update = new ChannelUpdateBuilder(
      where,
      base,
      !answered || this.ctx.state.keyedByName(typeUrl),
      answered ? this.ctx.state.notesOf(typeUrl) : undefined,
    );
    for (const name of removals) update.remove(name);
    for (const entry of entries) {
      if (entry.result !== undefined) update.add(entry.result, entry.key);
      else if (entry.rejected !== undefined) update.reject(entry.rejected);
      else update.remove(entry.removed);
    }
    const built = update.build(response.system_version_info);
    const kept = this.ctx.state.apply(typeUrl, built);
    // Only an answer taken resets the reconnect backoff.
    if (built.refused === undefined) this.ctx.onAnswer();
    if (update.dropped === 0) {
      this.send(stream, { typeUrl, responseNonce: nonce });
      return;
    }
    const detail = update.nackMessage();
    this.ctx.log.warn({ typeUrl, dropped: update.dropped, kept, refused: update.refused }, detail);
    this.send(stream, {
      typeUrl,
      responseNonce: nonce,
      errorDetail: { code: INVALID_ARGUMENT, message: detail },
    });
    if (built.refused !== undefined) stream.restart(outOfStep(built.refused, 'the upstream'));
  }

  onClose(error: MeshmuxError): void {
    this.ctx.state.streamClosed(error);
  }

  private undecodable(stream: OpenStream, message: Uint8Array, err: unknown): void {
    const { error, nack } = reportUndecodable(this.ctx, 'DeltaDiscoveryResponse', message, err);
    if (nack !== undefined) {
      this.send(stream, {
        typeUrl: nack.typeUrl,
        responseNonce: nack.nonce,
        errorDetail: { code: INVALID_ARGUMENT, message: error.message },
      });
    }
    stream.restart(outOfStep(error, 'the upstream'));
  }

  private send(stream: OpenStream, request: DeltaDiscoveryRequestFields): void {
    stream.send(encodeDeltaDiscoveryRequest(request));
  }
}
