import protobuf from 'protobufjs';
import { messageType } from '../schema/proto-root.js';
import { plainBytes } from '../wire/wire-fields.js';

const DISCOVERY_REQUEST = messageType('envoy.service.discovery.v3.DiscoveryRequest');
const DELTA_DISCOVERY_REQUEST = messageType('envoy.service.discovery.v3.DeltaDiscoveryRequest');

/** What every ADS request says, whichever variant of the protocol carries it. */
export interface AdsRequest {
  readonly typeUrl: string;
  readonly responseNonce: string;
  /** Present only on the requests that carry a node. */
  readonly node?: NodeInfo;
  /** Set on a NACK. */
  readonly errorDetail?: { readonly code: number; readonly message: string };
}

/** The parts of a DiscoveryRequest the server acts on. */
export interface DiscoveryRequest extends AdsRequest {
  readonly versionInfo: string;
}

/** The parts of a DeltaDiscoveryRequest the server acts on. */
export interface DeltaDiscoveryRequest extends AdsRequest {
  /** Names to add to the subscription; `*` (or nothing, on the first request of a type) means every object. */
  readonly subscribe: readonly string[];
  readonly unsubscribe: readonly string[];
  /** Objects the client already holds (name → version), sent on the first request of a type after a reconnect. */
  readonly initialVersions: ReadonlyMap<string, string>;
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
interface RawCommon {
  type_url?: string;
  response_nonce?: string;
  node?: { id?: string; cluster?: string; metadata?: RawStruct };
  error_detail?: { code?: number; message?: string };
}
interface RawRequest extends RawCommon {
  version_info?: string;
}
interface RawDeltaRequest extends RawCommon {
  resource_names_subscribe?: string[];
  resource_names_unsubscribe?: string[];
  initial_resource_versions?: Record<string, string>;
}

const CONVERSION = {
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: false,
} satisfies protobuf.IConversionOptions;

/**
 * The message in `bytes`. protobufjs reads a Node Buffer leniently (a field overrunning the end is
 * truncated, not an error); a plain Uint8Array view makes malformed requests fail to decode.
 */
function decoded(type: protobuf.Type, bytes: Uint8Array): protobuf.Message {
  return type.decode(plainBytes(bytes));
}

function common(raw: RawCommon): AdsRequest {
  const node = raw.node;
  const error = raw.error_detail;
  return {
    typeUrl: raw.type_url ?? '',
    responseNonce: raw.response_nonce ?? '',
    ...(node === undefined
      ? {}
      : { node: { id: node.id ?? '', cluster: node.cluster ?? '', metadata: structToJson(node.metadata) } }),
    ...(error === undefined ? {} : { errorDetail: { code: error.code ?? 0, message: error.message ?? '' } }),
  };
}

/** `DiscoveryRequest.node` and `.resource_names`, `DeltaDiscoveryRequest.node`, `Node.metadata`. */
const NODE_FIELD = 2;
const RESOURCE_NAMES_FIELD = 3;
const DELTA_NODE_FIELD = 1;
const NODE_METADATA_FIELD = 3;

/**
 * `bytes` without the top-level fields numbered in `fields`: the same bytes when it has none, or
 * when they cannot be walked (decoding them then says what is wrong).
 */
function withoutFields(bytes: Uint8Array, fields: ReadonlySet<number>): Uint8Array {
  const reader = protobuf.Reader.create(bytes);
  const kept: Array<[number, number]> = [];
  let start = 0;
  try {
    while (reader.pos < reader.len) {
      const at = reader.pos;
      const tag = reader.uint32();
      reader.skipType(tag & 7);
      if (!fields.has(tag >>> 3)) continue;
      if (at > start) kept.push([start, at]);
      start = reader.pos;
    }
  } catch {
    return bytes;
  }
  if (start === 0) return bytes;
  if (start < bytes.byteLength) kept.push([start, bytes.byteLength]);
  const out = new Uint8Array(kept.reduce((n, [from, to]) => n + to - from, 0));
  let at = 0;
  for (const [from, to] of kept) {
    out.set(bytes.subarray(from, to), at);
    at += to - from;
  }
  return out;
}

/** The payloads of the length-delimited top-level fields numbered `field`; throws on bytes that cannot be walked. */
function payloadsOf(bytes: Uint8Array, field: number): Uint8Array[] {
  const reader = protobuf.Reader.create(bytes);
  const payloads: Uint8Array[] = [];
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    if (tag >>> 3 === field && (tag & 7) === 2) payloads.push(reader.bytes());
    else reader.skipType(tag & 7);
  }
  return payloads;
}

/**
 * Bytes of the node metadata as encoded in a request, every occurrence summed (decoding merges
 * them), read without decoding anything; throws (a protobufjs error) when the request or its node
 * cannot be walked, as decoding them would after reading all that comes before.
 */
function encodedMetadataBytes(bytes: Uint8Array, nodeField: number): number {
  let total = 0;
  for (const node of payloadsOf(plainBytes(bytes), nodeField))
    for (const metadata of payloadsOf(node, NODE_METADATA_FIELD)) total += metadata.byteLength;
  return total;
}

/** See {@link encodedMetadataBytes}. */
export function discoveryRequestMetadataBytes(bytes: Uint8Array): number {
  return encodedMetadataBytes(bytes, NODE_FIELD);
}

/** See {@link encodedMetadataBytes}. */
export function deltaDiscoveryRequestMetadataBytes(bytes: Uint8Array): number {
  return encodedMetadataBytes(bytes, DELTA_NODE_FIELD);
}

const WITHOUT_NAMES = new Set([RESOURCE_NAMES_FIELD]);
const WITHOUT_NAMES_OR_NODE = new Set([RESOURCE_NAMES_FIELD, NODE_FIELD]);
const WITHOUT_DELTA_NODE = new Set([DELTA_NODE_FIELD]);

/**
 * Decodes a DiscoveryRequest; throws (a protobufjs error) on malformed bytes. Unknown fields are
 * skipped. The node is skipped unread unless `withNode` (see `AdsProtocol.decode`): a node whose
 * metadata is a Struct of many small fields takes seconds to decode, and only a stream's first
 * request is read for it. So are the resource names: every config type is served whole (istiod
 * names none), and each name would be a string to allocate, millions of them in a request a
 * client may make as large as the server allows.
 */
export function decodeDiscoveryRequest(bytes: Uint8Array, withNode = true): DiscoveryRequest {
  const skipped = withNode ? WITHOUT_NAMES : WITHOUT_NAMES_OR_NODE;
  const raw = DISCOVERY_REQUEST.toObject(
    decoded(DISCOVERY_REQUEST, withoutFields(plainBytes(bytes), skipped)),
    CONVERSION,
  ) as RawRequest;
  return { ...common(raw), versionInfo: raw.version_info ?? '' };
}

/** Decodes a DeltaDiscoveryRequest as {@link decodeDiscoveryRequest} decodes a DiscoveryRequest. */
export function decodeDeltaDiscoveryRequest(bytes: Uint8Array, withNode = true): DeltaDiscoveryRequest {
  const plain = plainBytes(bytes);
  const raw = DELTA_DISCOVERY_REQUEST.toObject(
    decoded(DELTA_DISCOVERY_REQUEST, withNode ? plain : withoutFields(plain, WITHOUT_DELTA_NODE)),
    CONVERSION,
  ) as RawDeltaRequest;
  return {
    ...common(raw),
    subscribe: raw.resource_names_subscribe ?? [],
    unsubscribe: raw.resource_names_unsubscribe ?? [],
    initialVersions: new Map(Object.entries(raw.initial_resource_versions ?? {})),
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
