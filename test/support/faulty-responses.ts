/**
 * Responses a misbehaving upstream sends, encoded by hand so that tests can put on the wire what
 * no well-behaved fake would: resources in the wrong `Any`, bodies of another kind than the
 * response's type URL, responses for type URLs nobody asked for. Send them with the fakes'
 * `sendRaw`.
 */
import protobuf from 'protobufjs';
import { CONFIG_KINDS, typeUrlOf, type KindDescriptor } from '../../src/schema/kinds.js';
import { anyTypeUrl } from '../../src/schema/proto-root.js';
import { encodeBody, encodeMcpResource, type FakeObject } from './fake-objects.js';

/** One `google.protobuf.Any`. */
export interface RawAny {
  readonly typeUrl: string;
  readonly value: Uint8Array;
  /** The entry's bytes as sent, in place of an `Any` of `typeUrl` and `value` (see {@link tornAny}). */
  readonly sent?: Uint8Array;
}

function encodeAny(any: RawAny): Uint8Array {
  if (any.sent !== undefined) return any.sent;
  return protobuf.Writer.create()
    .uint32((1 << 3) | 2)
    .string(any.typeUrl)
    .uint32((2 << 3) | 2)
    .bytes(any.value)
    .finish();
}

/**
 * An object in its MCP envelope, as every MCP-over-xDS upstream sends it (`extra100`: with the
 * envelope field 100 Higress appends).
 */
export function mcpAny(
  kind: KindDescriptor,
  object: FakeObject,
  options: { extra100?: boolean } = {},
): RawAny {
  return {
    typeUrl: anyTypeUrl('istio.mcp.v1alpha1.Resource'),
    value: encodeMcpResource(kind, object, {
      createTime: { seconds: 1_700_000_000, nanos: 0 },
      extra100: options.extra100 === true,
    }),
  };
}

/** An object's bare body, without the MCP envelope: the wrong `Any` for an MCP response. */
export function bareBodyAny(kind: KindDescriptor, object: FakeObject): RawAny {
  return { typeUrl: anyTypeUrl(kind.bodyType), value: encodeBody(kind, object.spec) };
}

/** An entry that is no `Any` at all: its type URL field (1) arrives as a varint. */
export function tornAny(): RawAny {
  return { typeUrl: '', value: new Uint8Array(0), sent: Uint8Array.of(0x08, 0x01) };
}

/** An encoded `envoy.service.discovery.v3.DiscoveryResponse`. */
export function discoveryResponse(
  typeUrl: string,
  resources: readonly RawAny[],
  nonce: string,
  version = nonce,
): Uint8Array {
  const w = protobuf.Writer.create();
  w.uint32((1 << 3) | 2).string(version);
  for (const r of resources) w.uint32((2 << 3) | 2).bytes(encodeAny(r));
  w.uint32((4 << 3) | 2).string(typeUrl);
  w.uint32((5 << 3) | 2).string(nonce);
  return w.finish();
}

/** An encoded `istio.mcp.v1alpha1.Resources` of a Galley: a full state, or marked incremental. */
export function galleyResources(
  collection: string,
  resources: readonly Uint8Array[],
  nonce: string,
  incremental = false,
): Uint8Array {
  const w = protobuf.Writer.create();
  w.uint32((1 << 3) | 2).string(nonce);
  w.uint32((2 << 3) | 2).string(collection);
  for (const r of resources) w.uint32((3 << 3) | 2).bytes(r);
  w.uint32((5 << 3) | 2).string(nonce);
  if (incremental) w.uint32(6 << 3).bool(true);
  return w.finish();
}

/** Every type URL an `xds` source subscribes by default (both spellings): mute them all for an upstream that never answers. */
export function everyConfigTypeUrl(): Set<string> {
  return new Set(
    CONFIG_KINDS.flatMap((k) => [typeUrlOf(k, k.currentVersion), typeUrlOf(k, k.legacyVersion)]),
  );
}
