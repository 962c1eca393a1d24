import type protobuf from 'protobufjs';
import { messageType } from '../schema/proto-root.js';

const DISCOVERY_REQUEST = messageType('envoy.service.discovery.v3.DiscoveryRequest');

/** The parts of a DiscoveryRequest the server acts on. */
export interface DiscoveryRequest {
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly responseNonce: string;
  readonly resourceNames: readonly string[];
  /** Present only on the requests that carry a node. */
  readonly node?: NodeInfo;
  /** Set on a NACK. */
  readonly errorDetail?: { readonly code: number; readonly message: string };
}

/** What a client says about itself. `metadata` is the node's Struct as plain JSON. */
export interface NodeInfo {
  readonly id: string;
  readonly cluster: string;
  readonly metadata: Readonly<Record<string, unknown>>;
}

/** protobufjs defines the Struct family itself, with camelCase field names whatever `keepCase` says. */
interface RawValue {
  nullValue?: number;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: RawStruct;
  listValue?: { values?: RawValue[] };
}
interface RawStruct {
  fields?: Record<string, RawValue>;
}
interface RawRequest {
  version_info?: string;
  type_url?: string;
  response_nonce?: string;
  resource_names?: string[];
  node?: { id?: string; cluster?: string; metadata?: RawStruct };
  error_detail?: { code?: number; message?: string };
}

/** Decodes a DiscoveryRequest; throws (a protobufjs error) on malformed bytes. Unknown fields are skipped. */
export function decodeDiscoveryRequest(bytes: Uint8Array): DiscoveryRequest {
  // protobufjs reads a Node Buffer leniently (a field overrunning the end is truncated, not an
  // error); a plain Uint8Array view makes malformed requests fail to decode.
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const raw = DISCOVERY_REQUEST.toObject(DISCOVERY_REQUEST.decode(view), {
    longs: Number,
    enums: String,
    defaults: false,
    oneofs: false,
  } satisfies protobuf.IConversionOptions) as RawRequest;
  const node = raw.node;
  const error = raw.error_detail;
  return {
    versionInfo: raw.version_info ?? '',
    typeUrl: raw.type_url ?? '',
    responseNonce: raw.response_nonce ?? '',
    resourceNames: raw.resource_names ?? [],
    ...(node === undefined
      ? {}
      : { node: { id: node.id ?? '', cluster: node.cluster ?? '', metadata: structToJson(node.metadata) } }),
    ...(error === undefined ? {} : { errorDetail: { code: error.code ?? 0, message: error.message ?? '' } }),
  };
}

function structToJson(struct: RawStruct | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(struct?.fields ?? {})) out[k] = valueToJson(v);
  return out;
}

function valueToJson(v: RawValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.numberValue !== undefined) return v.numberValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.structValue !== undefined) return structToJson(v.structValue);
  if (v.listValue !== undefined) return (v.listValue.values ?? []).map(valueToJson);
  return null;
}
