import { MeshmuxError } from '../../core/errors.js';
import { messageType } from '../../schema/proto-root.js';
import { ChannelUpdateBuilder } from '../channel-update-builder.js';
import { nodeMessage } from '../node-identity.js';
import type { OpenStream, StreamHandlers } from '../reconnecting-stream.js';
import { plainBytes, readTopLevelFields, salvageString } from '../wire-fields.js';
import { INVALID_ARGUMENT, MCP_RESOURCE_SUFFIX, type AdsClientContext } from './ads-client-context.js';

/** gRPC path of the state-of-the-world ADS stream. */
export const SOTW_ADS_METHOD =
  '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';

const DISCOVERY_REQUEST = messageType('envoy.service.discovery.v3.DiscoveryRequest');
const DISCOVERY_RESPONSE = messageType('envoy.service.discovery.v3.DiscoveryResponse');

interface DiscoveryResponse {
  version_info: string;
  resources: Array<{ type_url: string; value: Uint8Array }>;
  type_url: string;
  nonce: string;
}

/**
 * The state-of-the-world side of an `xds` source: one request per subscribed type URL (node on
 * the first), each response read object by object into that type's new state, then an ACK, or a
 * NACK naming the objects dropped (the rest is applied all the same, their previous versions kept).
 * A response that does not decode at all changes nothing; it is NACKed when its type URL and
 * nonce can be salvaged, and reported.
 */
export class SotwAdsClient implements StreamHandlers {
  /** Per type URL, the `version_info` last accepted whole on the current stream. */
  private accepted = new Map<string, string>();

  constructor(private readonly ctx: AdsClientContext) {}

  onOpen(stream: OpenStream): void {
    this.accepted = new Map();
    this.ctx.state.streamOpened();
    let first = true;
    for (const typeUrl of this.ctx.state.channelIds()) {
      this.send(stream, {
        type_url: typeUrl,
        version_info: '',
        response_nonce: '',
        resource_names: [],
        ...(first ? { node: nodeMessage(this.ctx.node) } : {}),
      });
      first = false;
    }
  }

  onMessage(stream: OpenStream, message: Uint8Array): void {
    let response: DiscoveryResponse;
    try {
      response = DISCOVERY_RESPONSE.toObject(DISCOVERY_RESPONSE.decode(plainBytes(message)), {
        defaults: true,
        arrays: true,
      }) as DiscoveryResponse;
    } catch (err) {
      this.undecodable(stream, message, err);
      return;
    }
    this.ctx.onAnswer();
    const { type_url: typeUrl, nonce, version_info: version } = response;
    const kind = this.ctx.state.kindOf(typeUrl);
    if (kind === undefined) {
      // Not subscribed: acknowledged so the upstream does not wait on it, otherwise ignored.
      this.ctx.log.debug({ typeUrl }, 'ignored a response for a type URL not subscribed');
      this.send(stream, { type_url: typeUrl, response_nonce: nonce, version_info: version });
      return;
    }
    const where = `${this.ctx.describe} ${typeUrl}`;
    const update = new ChannelUpdateBuilder(where);
    response.resources.forEach((any, i) => {
      if (!any.type_url.endsWith(MCP_RESOURCE_SUFFIX)) {
        update.reject(
          new MeshmuxError(
            'SCHEMA',
            `resources[${i}] is a ${any.type_url || '(no type)'}, not an MCP Resource`,
            {
              file: where,
            },
          ),
        );
        return;
      }
      update.add(this.ctx.reader.read(kind, any.value, where));
    });
    const kept = this.ctx.state.apply(typeUrl, update.build(version));
    if (update.dropped === 0) {
      this.accepted.set(typeUrl, version);
      this.send(stream, { type_url: typeUrl, response_nonce: nonce, version_info: version });
      return;
    }
    const detail = update.nackMessage();
    this.ctx.log.warn({ typeUrl, version, dropped: update.dropped, kept }, detail);
    this.send(stream, {
      type_url: typeUrl,
      response_nonce: nonce,
      version_info: this.accepted.get(typeUrl) ?? '',
      error_detail: { code: INVALID_ARGUMENT, message: detail },
    });
  }

  onClose(error: MeshmuxError): void {
    this.ctx.state.streamClosed(error);
  }

  private undecodable(stream: OpenStream, message: Uint8Array, err: unknown): void {
    const fields = readTopLevelFields(message).fields;
    const typeUrl = salvageString(fields, 4);
    const nonce = salvageString(fields, 5);
    const error = new MeshmuxError(
      'DECODE',
      `an undecodable DiscoveryResponse (${message.byteLength} bytes${typeUrl === undefined ? '' : ` for ${typeUrl}`}) was ignored: ${(err as Error).message}`,
      { file: this.ctx.describe },
      { cause: err },
    );
    this.ctx.log.warn({ err: error.message }, 'undecodable response');
    this.ctx.state.report(error);
    if (typeUrl !== undefined && nonce !== undefined && this.ctx.state.has(typeUrl)) {
      this.send(stream, {
        type_url: typeUrl,
        response_nonce: nonce,
        version_info: this.accepted.get(typeUrl) ?? '',
        error_detail: { code: INVALID_ARGUMENT, message: error.message },
      });
    }
  }

  private send(stream: OpenStream, request: Record<string, unknown>): void {
    stream.send(DISCOVERY_REQUEST.encode(DISCOVERY_REQUEST.fromObject(request)).finish());
  }
}
