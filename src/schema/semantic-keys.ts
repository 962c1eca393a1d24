import type protobuf from 'protobufjs';
import { compactString } from '../core/compact-string.js';
import type { ConfigResource } from '../core/resource.js';
import { KINDS } from './kinds.js';
import { messageType } from './proto-root.js';
import { utf8Text } from '../wire/strict-reader.js';
import { WireCursor } from '../wire/wire-cursor.js';
import { WIRE_LENGTH_DELIMITED } from '../wire/wire-types.js';

interface Body {
  hosts?: string[];
  host?: string;
  gateways?: string[];
  workload_selector?: unknown;
}

const NONE: readonly string[] = Object.freeze([]);

type Extractor = (namespace: string, body: Body) => readonly string[];

/** The kinds of clash a body's fields can make (see `Conflict` in the merge). */
export type SemanticConflictType =
  'service-entry-host' | 'gateway-host' | 'destination-rule-host' | 'sidecar-default';

/**
 * Clashes istiod resolves silently, per kind (one type of clash per kind), and the subject each
 * object claims:
 * - two ServiceEntries for one host (the host);
 * - two VirtualServices binding one host on one gateway, `mesh` for sidecars (`gateway host`);
 * - two DestinationRules without workload selector for one host in one namespace (`namespace host`);
 * - two Sidecars without workload selector in one namespace (the namespace).
 * A subject is the string a table of 50k objects keeps per object: the host as decoded, not a
 * string built around it.
 */
const EXTRACTORS: ReadonlyMap<string, { readonly type: SemanticConflictType; readonly extract: Extractor }> =
  new Map([
    [
      'networking.istio.io/ServiceEntry',
      { type: 'service-entry-host', extract: (_ns, b) => b.hosts ?? NONE },
    ],
    [
      'networking.istio.io/VirtualService',
      {
        type: 'gateway-host',
        extract: (ns, b) => {
          const gateways = b.gateways === undefined || b.gateways.length === 0 ? ['mesh'] : b.gateways;
          return gateways.flatMap((g) => {
            const gateway = g === 'mesh' || g.includes('/') ? g : `${ns}/${g}`;
            return (b.hosts ?? []).map((h) => compactString(`${gateway} ${h}`));
          });
        },
      },
    ],
    [
      'networking.istio.io/DestinationRule',
      {
        type: 'destination-rule-host',
        extract: (ns, b) =>
          b.host === undefined || (b.workload_selector !== undefined && b.workload_selector !== null)
            ? NONE
            : [compactString(`${ns} ${b.host}`)],
      },
    ],
    [
      'networking.istio.io/Sidecar',
      {
        type: 'sidecar-default',
        extract: (ns, b) => (b.workload_selector === undefined || b.workload_selector === null ? [ns] : NONE),
      },
    ],
  ]);

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
 * The subjects of an object (none for kinds without clash rules, or a body whose top level is not
 * well-formed), read from the top level of its body's bytes each time they are asked for. The
 * merge asks when an object starts or stops being a key's winner, once per change of it; keeping
 * them per body instead was a weak-map entry, an object and a list per object, for as long as it
 * is served.
 */
export function semanticSubjectsOf(resource: ConfigResource): readonly string[] {
  const rule = EXTRACTORS.get(resource.kind);
  const kind = KINDS.get(resource.kind);
  if (rule === undefined || kind === undefined) return NONE;
  let fields: Body;
  try {
    fields = topLevelFields(messageType(kind.bodyType), resource.body);
  } catch {
    return NONE;
  }
  const keys = rule.extract(resource.namespace, fields);
  return keys.length === 0 ? NONE : keys;
}

/**
 * How objects of one kind clash: what the clash is called, and the subjects each object claims,
 * read from its body's bytes each time they are asked for (objects claiming one subject clash).
 */
type Rule = {
  readonly type: SemanticConflictType;
  readonly subjects: (resource: ConfigResource) => readonly string[];
};

const RULES = new Map<string, Rule>(
  [...EXTRACTORS].map(([kind, { type }]) => [kind, { type, subjects: semanticSubjectsOf }]),
);

/** The clash rule of a kind (by its key, `<group>/<Kind>`), or undefined for a kind without one. */
export function semanticRuleOf(kind: string): Rule | undefined {
  return RULES.get(kind);
}

/**
 * The subjects of a body of `kind` in `namespace` already decoded into `message`: what
 * {@link semanticSubjectsOf} reads from the body's bytes, for a body that decodes.
 */
export function semanticSubjectsOfMessage(
  kind: string,
  namespace: string,
  message: object,
): readonly string[] {
  const rule = EXTRACTORS.get(kind);
  return rule === undefined ? NONE : rule.extract(namespace, bodyFields(message));
}

/**
 * {@link bodyFields} of a body read from its bytes: the last `host` sent wins and `hosts` and
 * `gateways` keep every element, as decoding gives them; `workload_selector` is only told present.
 */
function topLevelFields(type: protobuf.Type, body: Uint8Array): Body {
  try {
    return readTopLevelFields(fieldIds(type), bodyCursor.reset(body, 0), body);
  } finally {
    // The last body read is not held on to.
    bodyCursor.reset(NO_BYTES, 0);
  }
}

const NO_BYTES = new Uint8Array(0);
/** The cursor {@link topLevelFields} reads with: one for every body read, not one made per body. */
const bodyCursor = new WireCursor(NO_BYTES);

function readTopLevelFields(ids: FieldIds, cursor: WireCursor, body: Uint8Array): Body {
  const out: { hosts?: string[]; gateways?: string[]; host?: string; workload_selector?: unknown } = {};
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
    const value = utf8Text(body, cursor.start, cursor.end);
    // A list made with its first element, not grown from empty: nearly every object has one host.
    if (id === ids.hosts) {
      if (out.hosts === undefined) out.hosts = [value];
      else out.hosts.push(value);
    } else if (id === ids.gateways) {
      if (out.gateways === undefined) out.gateways = [value];
      else out.gateways.push(value);
    } else out.host = value;
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
