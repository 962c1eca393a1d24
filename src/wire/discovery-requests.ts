/**
 * The requests meshmux sends upstream, as typed values: state-of-the-world and delta ADS
 * (`envoy.service.discovery.v3`) and Galley-era MCP (`istio.mcp.v1alpha1.RequestResources`).
 * Each builder takes the fields by name, so a misspelt field is a compile error rather than a
 * field silently dropped by protobufjs.
 */
import { messageType } from '../schema/proto-root.js';

/** A `google.rpc.Status`: how a request NACKs a response. */
export interface RequestError {
  readonly code: number;
  readonly message: string;
}

/** `envoy.config.core.v3.Node`, as far as meshmux fills it. */
export interface NodeFields {
  readonly id: string;
  /** Flat string metadata (a `google.protobuf.Struct` of string values). */
  readonly metadata: Readonly<Record<string, string>>;
}

/** An `envoy.service.discovery.v3.DiscoveryRequest`. */
export interface DiscoveryRequestFields {
  readonly typeUrl: string;
  readonly versionInfo: string;
  readonly responseNonce: string;
  readonly resourceNames?: readonly string[];
  /** Sent on a stream's first request only. */
  readonly node?: NodeFields;
  /** Present on a NACK. */
  readonly errorDetail?: RequestError;
}

/** An `envoy.service.discovery.v3.DeltaDiscoveryRequest`, as far as meshmux fills it. */
export interface DeltaDiscoveryRequestFields {
  readonly typeUrl: string;
  /** Absent on a subscription; the nonce answered on an ACK or NACK. */
  readonly responseNonce?: string;
  readonly node?: NodeFields;
  readonly errorDetail?: RequestError;
}

/** An `istio.mcp.v1alpha1.RequestResources`. */
export interface RequestResourcesFields {
  readonly collection: string;
  readonly sinkNode: NodeFields;
  readonly responseNonce?: string;
  readonly incremental?: boolean;
  readonly errorDetail?: RequestError;
}

const DISCOVERY_REQUEST = messageType('envoy.service.discovery.v3.DiscoveryRequest');
const DELTA_DISCOVERY_REQUEST = messageType('envoy.service.discovery.v3.DeltaDiscoveryRequest');
const REQUEST_RESOURCES = messageType('istio.mcp.v1alpha1.RequestResources');

/** protobufjs `fromObject` input of a Node; the Struct family uses camelCase names in protobufjs. */
function node(fields: NodeFields): Record<string, unknown> {
  const values: Record<string, { stringValue: string }> = {};
  for (const [key, value] of Object.entries(fields.metadata)) values[key] = { stringValue: value };
  return { id: fields.id, metadata: { fields: values } };
}

/** `sink_node` of MCP: an id and string annotations. */
function sinkNode(fields: NodeFields): Record<string, unknown> {
  return { id: fields.id, annotations: { ...fields.metadata } };
}

/** Encodes a DiscoveryRequest. */
export function encodeDiscoveryRequest(r: DiscoveryRequestFields): Uint8Array {
  return DISCOVERY_REQUEST.encode(
    DISCOVERY_REQUEST.fromObject({
      type_url: r.typeUrl,
      version_info: r.versionInfo,
      response_nonce: r.responseNonce,
      resource_names: r.resourceNames ?? [],
      ...(r.node === undefined ? {} : { node: node(r.node) }),
      ...(r.errorDetail === undefined ? {} : { error_detail: r.errorDetail }),
    }),
  ).finish();
}

/** Encodes a DeltaDiscoveryRequest. */
export function encodeDeltaDiscoveryRequest(r: DeltaDiscoveryRequestFields): Uint8Array {
  return DELTA_DISCOVERY_REQUEST.encode(
    DELTA_DISCOVERY_REQUEST.fromObject({
      type_url: r.typeUrl,
      ...(r.responseNonce === undefined ? {} : { response_nonce: r.responseNonce }),
      ...(r.node === undefined ? {} : { node: node(r.node) }),
      ...(r.errorDetail === undefined ? {} : { error_detail: r.errorDetail }),
    }),
  ).finish();
}

/** Encodes a RequestResources. */
export function encodeRequestResources(r: RequestResourcesFields): Uint8Array {
  return REQUEST_RESOURCES.encode(
    REQUEST_RESOURCES.fromObject({
      sink_node: sinkNode(r.sinkNode),
      collection: r.collection,
      ...(r.responseNonce === undefined ? {} : { response_nonce: r.responseNonce }),
      ...(r.incremental === undefined ? {} : { incremental: r.incremental }),
      ...(r.errorDetail === undefined ? {} : { error_detail: r.errorDetail }),
    }),
  ).finish();
}
