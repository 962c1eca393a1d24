/**
 * Istio objects as a fake upstream holds them ({@link FakeObject}), how upstreams encode them
 * (bodies, `istio.mcp.v1alpha1.Resource` envelopes), and one builder per kind, so that tests of
 * different sources speak of the same `shop/reviews`. Each builder returns a new object that the
 * caller may alter.
 */
import protobuf from 'protobufjs';
import { KINDS, type KindDescriptor } from '../../src/schema/kinds.js';
import { anyTypeUrl, messageType } from '../../src/schema/proto-root.js';

/** One object an upstream holds. `spec` is protobufjs `fromObject` input of the body (snake_case). */
export interface FakeObject {
  readonly namespace: string;
  readonly name: string;
  readonly spec: Record<string, unknown>;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  /** Default: when the object was first set, in whole seconds. `null`: sent without create_time. */
  readonly createTime?: { seconds: number; nanos: number } | null;
  /** Raw body bytes to send instead of encoding `spec` (to send garbage). */
  readonly rawBody?: Uint8Array;
}
/** A registry kind by name (`VirtualService`) or key. */
export function kindNamed(name: string): KindDescriptor {
  const kind = KINDS.get(name) ?? KINDS.kinds.find((k) => k.kind === name);
  if (kind === undefined) throw new Error(`no kind ${name}`);
  return kind;
}

/** The encoded body message of a spec. */
export function encodeBody(kind: KindDescriptor, spec: Record<string, unknown>): Uint8Array {
  const type = messageType(kind.bodyType);
  return type.encode(type.fromObject(spec)).finish();
}

/** Field 100 of `istio.mcp.v1alpha1.Resource` as Higress appends it (its `config.Extra` as JSON). */
function higressExtra(): Uint8Array {
  return protobuf.Writer.create()
    .uint32((100 << 3) | 2)
    .string('{"source":"higress"}')
    .finish();
}

/** Encodes one `istio.mcp.v1alpha1.Resource`. */
export function encodeMcpResource(
  kind: KindDescriptor,
  object: FakeObject,
  options: {
    version?: string;
    createTime?: { seconds: number; nanos: number } | null;
    extra100?: boolean;
  } = {},
): Uint8Array {
  const w = protobuf.Writer.create();
  const meta = protobuf.Writer.create();
  meta.uint32((1 << 3) | 2).string(`${object.namespace}/${object.name}`);
  const ts = options.createTime;
  if (ts !== null && ts !== undefined) {
    const t = protobuf.Writer.create();
    if (ts.seconds !== 0) t.uint32(1 << 3).int64(ts.seconds);
    if (ts.nanos !== 0) t.uint32(2 << 3).int32(ts.nanos);
    meta.uint32((2 << 3) | 2).bytes(t.finish());
  }
  if (options.version !== undefined && options.version !== '')
    meta.uint32((3 << 3) | 2).string(options.version);
  for (const [field, map] of [
    [4, object.labels ?? {}],
    [5, object.annotations ?? {}],
  ] as const) {
    for (const [k, v] of Object.entries(map)) {
      const entry = protobuf.Writer.create()
        .uint32((1 << 3) | 2)
        .string(k)
        .uint32((2 << 3) | 2)
        .string(v)
        .finish();
      meta.uint32((field << 3) | 2).bytes(entry);
    }
  }
  w.uint32((1 << 3) | 2).bytes(meta.finish());
  const body = object.rawBody ?? encodeBody(kind, object.spec);
  w.uint32((2 << 3) | 2).bytes(encodeAny(anyTypeUrl(kind.bodyType), body));
  const bytes = w.finish();
  return options.extra100 === true ? Buffer.concat([bytes, higressExtra()]) : bytes;
}

/** Encodes a `google.protobuf.Any`. */
export function encodeAny(typeUrl: string, value: Uint8Array): Uint8Array {
  return protobuf.Writer.create()
    .uint32((1 << 3) | 2)
    .string(typeUrl)
    .uint32((2 << 3) | 2)
    .bytes(value)
    .finish();
}

/** A VirtualService `namespace/name` routing `host` (default: its name) to that host. */
export function fakeVirtualService(name: string, host = name, namespace = 'shop'): FakeObject {
  return { namespace, name, spec: { hosts: [host], http: [{ route: [{ destination: { host } }] }] } };
}

/** A DestinationRule `namespace/name` for `host` (default: its name) with Istio mutual TLS. */
export function fakeDestinationRule(name: string, host = name, namespace = 'shop'): FakeObject {
  return { namespace, name, spec: { host, traffic_policy: { tls: { mode: 'ISTIO_MUTUAL' } } } };
}

/** A DNS-resolved ServiceEntry `namespace/name` for `host` on port 443 (TLS). */
export function fakeServiceEntry(name: string, host: string, namespace = 'payments'): FakeObject {
  return {
    namespace,
    name,
    spec: { hosts: [host], ports: [{ number: 443, name: 'https', protocol: 'TLS' }], resolution: 'DNS' },
  };
}
