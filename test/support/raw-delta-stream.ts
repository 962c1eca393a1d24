/**
 * A bare delta ADS stream (`DeltaAggregatedResources`) for protocol tests, with the delta
 * messages as protobufjs decodes them (snake_case, every scalar present).
 */
import { messageType } from '../../src/schema/proto-root.js';
import type { AnyMessage, MessageInit, NodeMessage, StatusMessage } from './ads-wire.js';
import { RawBidiStream } from './raw-ads-stream.js';

/** gRPC path of `AggregatedDiscoveryService.DeltaAggregatedResources`. */
export const DELTA_STREAM_PATH =
  '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources';

/** A `DeltaDiscoveryRequest`, as far as tests fill it. */
export interface DeltaRequest {
  readonly node: NodeMessage | null;
  readonly type_url: string;
  readonly resource_names_subscribe: readonly string[];
  readonly resource_names_unsubscribe: readonly string[];
  readonly initial_resource_versions: Readonly<Record<string, string>>;
  readonly response_nonce: string;
  readonly error_detail: StatusMessage | null;
}

/** One `Resource` of a delta response. */
export interface DeltaResource {
  readonly version: string;
  readonly resource: AnyMessage | null;
  readonly name: string;
}

/** A decoded `DeltaDiscoveryResponse`. */
export interface DeltaResponse {
  readonly system_version_info: string;
  readonly resources: readonly DeltaResource[];
  readonly type_url: string;
  readonly nonce: string;
  readonly removed_resources: readonly string[];
}

const DELTA_REQUEST = messageType('envoy.service.discovery.v3.DeltaDiscoveryRequest');
const DELTA_RESPONSE = messageType('envoy.service.discovery.v3.DeltaDiscoveryResponse');

/** A bare delta ADS stream; `bytesReceived` counts the response messages' own bytes. */
export class RawDeltaStream extends RawBidiStream<MessageInit<DeltaRequest>, DeltaResponse> {
  /** Bytes of every response received (DeltaDiscoveryResponse bytes, without gRPC framing). */
  bytesReceived = 0;
  /** Bytes of each response received, in order. */
  readonly sizes: number[] = [];

  constructor(address: string) {
    super(
      address,
      DELTA_STREAM_PATH,
      (request) => Buffer.from(DELTA_REQUEST.encode(DELTA_REQUEST.fromObject(request)).finish()),
      (bytes) => {
        this.bytesReceived += bytes.byteLength;
        this.sizes.push(bytes.byteLength);
        return DELTA_RESPONSE.toObject(DELTA_RESPONSE.decode(bytes), {
          defaults: true,
          arrays: true,
          longs: Number,
        }) as DeltaResponse;
      },
    );
  }

  /** Acknowledges a response. */
  ack(response: DeltaResponse): void {
    this.send({ type_url: response.type_url, response_nonce: response.nonce });
  }
}
