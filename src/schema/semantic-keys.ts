import type protobuf from 'protobufjs';
import { compactString } from '../core/compact-string.js';
import type { ConfigResource } from '../core/resource.js';
import { KINDS } from './kinds.js';
import { messageType } from './proto-root.js';
import { WireCursor } from '../wire/wire-cursor.js';
import { WIRE_LENGTH_DELIMITED } from '../wire/wire-types.js';

interface Body {
  hosts?: string[];
  host?: string;
  gateways?: string[];
  workload_selector?: unknown;
}

type Extractor = (namespace: string, body: Body) => string[];

/**
 * Clashes istiod resolves silently, per kind: the keys objects share when they clash.
 * - two ServiceEntries for one host;
 * - two VirtualServices binding one host on one gateway (`mesh` for sidecars);
 * - two DestinationRules without workload selector for one host in one namespace;
 * - two Sidecars without workload selector in one namespace.
 */
const EXTRACTORS: ReadonlyMap<string, Extractor> = new Map<string, Extractor>([
  [
    'networking.istio.io/ServiceEntry',
    (_ns, b) => (b.hosts ?? []).map((h) => compactString(`service-entry-host|${h}`)),
  ],
  [
    'networking.istio.io/VirtualService',
    (ns, b) => {
      const gateways = b.gateways === undefined || b.gateways.length === 0 ? ['mesh'] : b.gateways;
      return gateways.flatMap((g) => {
        const gateway = g === 'mesh' || g.includes('/') ? g : `${ns}/${g}`;
        return (b.hosts ?? []).map((h) => compactString(`gateway-host|${gateway} ${h}`));
      });
    },
  ],
  [
    'networking.istio.io/DestinationRule',
    (ns, b) =>
      b.host === undefined || (b.workload_selector !== undefined && b.workload_selector !== null)
        ? []
        : [compactString(`destination-rule-host|${ns} ${b.host}`)],
  ],
  [
    'networking.istio.io/Sidecar',
    (ns, b) =>
      b.workload_selector === undefined || b.workload_selector === null ? [`sidecar-default|${ns}`] : [],
  ],
]);

const NONE: readonly string[] = Object.freeze([]);

/**
 * The fields the extractors read, from a decoded body message: proto3 leaves a string that was
 * not sent at its default, which reads here as absent.
 */
function bodyFields(message: object): Body {
  const m = message as Body;
  return {
    ...(m.hosts === undefined ? {} : { hosts: m.hosts }),
    ...(m.gateways === undefined ? {} : { gateways: m.gateways }),
    ...(m.host === undefined || m.host === '' ? {} : { host: m.host }),
    ...(m.workload_selector === undefined || m.workload_selector === null
      ? {}
      : { workload_selector: m.workload_selector }),
  };
}

/**
 * The semantic keys of an object (none for kinds without clash rules, or a body whose top level
 * is not well-formed), read from the top level of its body's bytes each time they are asked for.
 * The merge asks when an object starts or stops being a key's winner, once per change of it;
 * keeping them per body instead was a weak-map entry, an object and a list per object, for as
 * long as it is served.
 */
export function semanticKeysOf(resource: ConfigResource): readonly string[] {
  const extract = EXTRACTORS.get(resource.kind);
  const kind = KINDS.get(resource.kind);
  if (extract === undefined || kind === undefined) return NONE;
  let fields: Body;
  try {
    fields = topLevelFields(messageType(kind.bodyType), resource.body);
  } catch {
    return NONE;
  }
  const keys = extract(resource.namespace, fields);
  return keys.length === 0 ? NONE : keys;
}

/**
 * The semantic keys of a body of `kind` in `namespace` already decoded into `message`: what
 * {@link semanticKeysOf} reads from the body's bytes, for a body that decodes.
 */
export function semanticKeysOfMessage(kind: string, namespace: string, message: object): readonly string[] {
  const extract = EXTRACTORS.get(kind);
  return extract === undefined ? NONE : extract(namespace, bodyFields(message));
}

/**
 * {@link bodyFields} of a body read from its bytes: the last `host` sent wins and `hosts` and
 * `gateways` keep every element, as decoding gives them; `workload_selector` is only told present.
 */
function topLevelFields(type: protobuf.Type, body: Uint8Array): Body {
  const ids = fieldIds(type);
  const out: { hosts?: string[]; gateways?: string[]; host?: string; workload_selector?: unknown } = {};
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const cursor = new WireCursor(body);
  while (cursor.pos < body.length) {
    const tag = cursor.uint32(body.length);
    const id = tag >>> 3;
    const wire = tag & 7;
    const wanted = id === ids.hosts || id === ids.gateways || id === ids.host || id === ids.selector;
    if (wire !== WIRE_LENGTH_DELIMITED || !wanted) {
      cursor.skip(wire, body.length, id);
      continue;
    }
    cursor.lengthDelimited(body.length);
    if (id === ids.selector) {
      out.workload_selector = true;
      continue;
    }
    const value = text.toString('utf8', cursor.start, cursor.end);
    if (id === ids.hosts) (out.hosts ??= []).push(value);
    else if (id === ids.gateways) (out.gateways ??= []).push(value);
    else out.host = value;
  }
  if (out.host === '') delete out.host;
  return out;
}

interface FieldIds {
  readonly hosts: number;
  readonly gateways: number;
  readonly host: number;
  readonly selector: number;
}

const idsByType = new WeakMap<protobuf.Type, FieldIds>();

/** Field numbers of the fields the extractors read (0: the type has none of that name). */
function fieldIds(type: protobuf.Type): FieldIds {
  let ids = idsByType.get(type);
  if (ids === undefined) {
    const id = (name: string): number => type.fields[name]?.id ?? 0;
    ids = {
      hosts: id('hosts'),
      gateways: id('gateways'),
      host: id('host'),
      selector: id('workload_selector'),
    };
    idsByType.set(type, ids);
  }
  return ids;
}
