/**
 * The SotW ADS method on the wire, shared by the istiod-like test client and the fake servers
 * in tests: message shapes (snake_case, as protobufjs decodes them with `keepCase`), codecs and a
 * hand-made gRPC service definition. Nothing here interprets a message.
 */
import type * as grpc from '@grpc/grpc-js';
import { messageType } from '../../src/schema/proto-root.js';

/** gRPC path of `AggregatedDiscoveryService.StreamAggregatedResources`. */
export const ADS_STREAM_PATH =
  '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';

/** `google.protobuf.Any`. */
export interface AnyMessage {
  readonly type_url: string;
  readonly value: Uint8Array;
}

/** `google.protobuf.Value`, restricted to the string case istiod's node metadata uses. */
export interface StringValueMessage {
  readonly stringValue?: string;
}

/** `google.protobuf.Struct`. Its well-known-type fields are camelCase in protobufjs. */
export interface StructMessage {
  readonly fields?: Readonly<Record<string, StringValueMessage>>;
}

/** `envoy.config.core.v3.Node`, restricted to the fields an istiod sets. */
export interface NodeMessage {
  readonly id?: string;
  readonly metadata?: StructMessage;
}

/** `google.rpc.Status`, as carried by a NACK. */
export interface StatusMessage {
  readonly code?: number;
  readonly message?: string;
}

/** A decoded `DiscoveryRequest`: every scalar present (proto3 default when unset), absent messages `null`. */
export interface DiscoveryRequest {
  readonly version_info: string;
  readonly node: NodeMessage | null;
  readonly resource_names: readonly string[];
  readonly type_url: string;
  readonly response_nonce: string;
  readonly error_detail: StatusMessage | null;
}

/** A decoded `DiscoveryResponse`, same conventions as {@link DiscoveryRequest}. */
export interface DiscoveryResponse {
  readonly version_info: string;
  readonly resources: readonly AnyMessage[];
  readonly canary: boolean;
  readonly type_url: string;
  readonly nonce: string;
  readonly control_plane: { readonly identifier?: string } | null;
}

/** What an encoder accepts: any subset of the fields, unset ones go out as proto3 defaults. */
export type MessageInit<T> = { readonly [K in keyof T]?: T[K] };

const DISCOVERY_REQUEST = messageType('envoy.service.discovery.v3.DiscoveryRequest');
const DISCOVERY_RESPONSE = messageType('envoy.service.discovery.v3.DiscoveryResponse');

// Scalars and repeated fields always present, messages null when absent: callers never guess.
const DECODE_OPTIONS = { defaults: true, arrays: true, longs: Number } as const;

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Encodes a DiscoveryRequest; throws if a field has the wrong type. */
export function encodeDiscoveryRequest(req: MessageInit<DiscoveryRequest>): Buffer {
  return toBuffer(DISCOVERY_REQUEST.encode(DISCOVERY_REQUEST.fromObject(req)).finish());
}

/** Decodes a DiscoveryRequest; throws on malformed bytes. */
export function decodeDiscoveryRequest(bytes: Uint8Array): DiscoveryRequest {
  return DISCOVERY_REQUEST.toObject(DISCOVERY_REQUEST.decode(bytes), DECODE_OPTIONS) as DiscoveryRequest;
}

/** Encodes a DiscoveryResponse; throws if a field has the wrong type. */
export function encodeDiscoveryResponse(res: MessageInit<DiscoveryResponse>): Buffer {
  return toBuffer(DISCOVERY_RESPONSE.encode(DISCOVERY_RESPONSE.fromObject(res)).finish());
}

/** Decodes a DiscoveryResponse; throws on malformed bytes. */
export function decodeDiscoveryResponse(bytes: Uint8Array): DiscoveryResponse {
  return DISCOVERY_RESPONSE.toObject(DISCOVERY_RESPONSE.decode(bytes), DECODE_OPTIONS) as DiscoveryResponse;
}

/** The string entries of a node's metadata Struct (non-string values are left out). */
export function nodeMetadataStrings(node: NodeMessage | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(node?.metadata?.fields ?? {})) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
  }
  return out;
}

/** A Struct holding only string values, as istiod marshals its node metadata. */
export function stringStruct(entries: Readonly<Record<string, string>>): StructMessage {
  const fields: Record<string, StringValueMessage> = {};
  for (const [key, value] of Object.entries(entries)) fields[key] = { stringValue: value };
  return { fields };
}

/**
 * The ADS service with only the SotW method, for `grpc.Server.addService` in fake servers. The
 * handler reads decoded requests and writes {@link MessageInit} responses.
 */
export const ADS_SERVICE = {
  StreamAggregatedResources: {
    path: ADS_STREAM_PATH,
    requestStream: true,
    responseStream: true,
    requestSerialize: encodeDiscoveryRequest,
    requestDeserialize: decodeDiscoveryRequest,
    responseSerialize: encodeDiscoveryResponse,
    responseDeserialize: decodeDiscoveryResponse,
  },
} satisfies grpc.ServiceDefinition;

/** The server-side stream type of {@link ADS_SERVICE}. */
export type AdsServerStream = grpc.ServerDuplexStream<DiscoveryRequest, MessageInit<DiscoveryResponse>>;
