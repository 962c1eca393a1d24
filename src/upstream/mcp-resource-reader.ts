import protobuf from 'protobufjs';
import { compactString } from '../core/compact-string.js';
import { MeshmuxError } from '../core/errors.js';
import {
  makeResource,
  makeResourceFrom,
  nameKey,
  resourceKey,
  SOURCE_ANNOTATION,
  timestampFromDate,
  type ConfigResource,
  type ResourceFields,
  type ResourceOrigin,
  type Timestamp,
} from '../core/resource.js';
import { type BodyParts, decodeBodyParts } from '../schema/body-parts.js';
import type { KindDescriptor } from '../schema/kinds.js';
import { checkUpstreamObject } from '../schema/object-checks.js';
import { messageType } from '../schema/proto-root.js';
import { findUnknownFields, isPlainBody, PLAIN_BODY } from '../schema/unknown-fields.js';
import { StrictReader } from '../wire/strict-reader.js';
import { sameBytes, unknownFieldNumbers } from '../wire/wire-fields.js';
import { readPlainEnvelope, type McpEnvelope } from './mcp-envelope.js';
import { ReadCache } from './read-cache.js';

/** What one upstream object became: a resource, or the reason it was dropped. */
export type ReadResult =
  | {
      readonly ok: true;
      /** `<namespace>/<name>`. */
      readonly name: string;
      readonly resource: ConfigResource;
      /** Field numbers of `istio.mcp.v1alpha1.Resource` our proto does not define (Higress's 100). */
      readonly unknownEnvelopeFields: readonly number[];
      /** Paths of body fields the kind's message does not define; they are kept as sent. */
      readonly unknownBodyFields: readonly string[];
      /** Oddities tolerated, as for file objects (an upper-case name). */
      readonly warnings?: readonly MeshmuxError[];
    }
  | {
      readonly ok: false;
      /** `<namespace>/<name>` when the envelope was readable enough to tell. */
      readonly name?: string;
      readonly error: MeshmuxError;
    };

/**
 * `result` as read from the entry at `index` of its response: a failure that names no object
 * names its place instead, so the NACK and the source's error say which entry it was.
 */
export function atEntry(result: ReadResult, index: number): ReadResult {
  if (result.ok || result.name !== undefined) return result;
  const { error } = result;
  return {
    ok: false,
    error: new MeshmuxError(
      error.code,
      `resources[${index}]: ${error.message}`,
      { ...error.location, field: `resources[${index}]` },
      { cause: error },
    ),
  };
}

export interface McpResourceReaderOptions {
  /** Namespace of objects whose name carries none. */
  readonly defaultNamespace: string;
  /** Where objects come from, for provenance (`xds://host:port`, `mcp://host:port`). */
  readonly origin: string;
  /** Clock for the creation time of objects the upstream sends without one. */
  readonly now?: () => Date;
  /**
   * The source's name: objects are read with its provenance annotations, as the merge serves them
   * (see `Provenance`), so one object stands for each. Unset, they are read as sent.
   */
  readonly source?: string;
  /** Bytes of decoded objects kept to skip re-reading unchanged ones. Default 256 MiB. */
  readonly cacheBytes?: number;
  /**
   * Whether each result is kept under its name, to be handed back when the same bytes come again
   * (default true). A caller that keeps what it read and recognises objects sent again itself (the
   * state-of-the-world client, in the responses it keeps: see {@link sentNameOf}) says false: the
   * reader then keeps nothing per object.
   */
  readonly remember?: boolean;
}

/**
 * A result as the reader keeps it, the one `read` hands out: with the envelope it was read from
 * (to recognise the same bytes sent again) and its cache key (for {@link McpResourceReader.forget}).
 * One object per upstream object, where a cache entry beside the result would be a second one for
 * every marking of the heap to walk. The envelope of a resource whose body lies in it (nearly
 * all) is not kept beside it: `envelopeAt` and `envelopeEnd` say where it lies in the body's
 * buffer: the bytes of the response that brought it, a slab or a buffer of its own (see
 * {@link envelopeOf}).
 */
type KeptRead = ReadResult & {
  /** The envelope, when the body does not lie in it. */
  readonly raw?: Uint8Array;
  /** Where the envelope lies in the body's buffer, when it does. */
  readonly envelopeAt?: number;
  readonly envelopeEnd?: number;
  /** The kind's registry key and the name as sent: where the cache keeps the result. */
  readonly cacheKind: string;
  readonly cacheName: string;
};

/** `bytes` as a plain `Uint8Array`: itself when it is one (a response's entry), else a view of its memory. */
function plainView(bytes: Uint8Array): Uint8Array {
  return Object.getPrototypeOf(bytes) === Uint8Array.prototype
    ? bytes
    : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The envelope a kept result was read from. */
function envelopeOf(kept: KeptRead): Uint8Array {
  if (kept.raw !== undefined) return kept.raw;
  if (!kept.ok) throw new Error('a failed read keeps its envelope');
  const at = kept.envelopeAt as number;
  return new Uint8Array(kept.resource.body.buffer, at, (kept.envelopeEnd as number) - at);
}

const MCP_RESOURCE = messageType('istio.mcp.v1alpha1.Resource');
/** Strings shared between objects (namespaces, label values): at most this many, this long. */
const MAX_SHARED_STRINGS = 4096;
const MAX_SHARED_CHARS = 64;
/** Creation times shared between objects (see {@link McpResourceReader.timeOf}): at most this many seconds. */
const MAX_SHARED_TIMES = 4096;
const MCP_RESOURCE_FIELDS: ReadonlySet<number> = new Set([1, 2]);

/** Annotations istiod's metadata validation refuses on every kind; it would drop the object. */
const REFUSED_ANNOTATIONS: readonly string[] = [
  'internal.istio.io/webhook-always-reject',
  'internal.istio.io/parents',
  'internal.istio.io/parent-namespace',
];
/** Allowed only where istiod implements dry-run, which is AuthorizationPolicy. */
const DRY_RUN_ANNOTATION = 'istio.io/dry-run';
const DRY_RUN_KINDS: ReadonlySet<string> = new Set(['security.istio.io/AuthorizationPolicy']);

/**
 * Turns upstream `istio.mcp.v1alpha1.Resource`s into resources, one at a time, so a bad object is
 * a value (dropped and reported) and never fails its neighbours. An object is dropped when its
 * envelope or body does not decode, its name is not `[<namespace>/]<name>`, its body is not the
 * kind's message, it fails the checks a file object fails (DNS-1123 name and namespace, label and
 * annotation rules, the kind's schema: see `checkUpstreamObject`), or istiod would refuse its
 * metadata. Only the first three leave it without a name (see `ChannelUpdateBuilder`).
 *
 * Bodies are kept byte for byte (unknown fields survive, as they do through istiod, and are
 * reported as warnings), so an
 * object read from another meshmux keeps the content version it had there, and versions stay
 * identical along a chain. Unknown envelope fields are dropped: the envelope is rebuilt downstream.
 * Objects without `create_time` get the time this reader first saw them, stable for its lifetime,
 * so a reconnect bringing the same content yields identical resources.
 */
export class McpResourceReader {
  private readonly firstSeen = new Map<string, Timestamp>();
  /** See {@link shared}. */
  private readonly repeated = new Map<string, string>();
  /** See {@link timeOf}. */
  private readonly times = new Map<number, Timestamp>();
  /** The unknown envelope field numbers last read (see {@link sharedNumbers}). */
  private lastUnknown: readonly number[] = NONE;
  private readonly cache: ReadCache<KeptRead>;
  private readonly remembering: boolean;
  private readonly slabs = new SlabCopier();
  private readonly now: () => Date;
  private readonly origin: ResourceOrigin;

  constructor(private readonly options: McpResourceReaderOptions) {
    this.now = options.now ?? (() => new Date());
    this.origin = { file: options.origin };
    this.cache = new ReadCache(options.cacheBytes ?? 256 * 1024 * 1024, keptSize);
    this.remembering = options.remember ?? true;
  }

  /**
   * Whether objects of `kind` read before are remembered: a caller reading a whole response asks
   * once, before its first entry, and passes the answer to each {@link read}.
   */
  remembers(kind: KindDescriptor): boolean {
    return this.remembering && this.cache.holds(kind.key);
  }

  /**
   * Reads one encoded `istio.mcp.v1alpha1.Resource` of `kind`. `where` names the stream and type
   * (for error locations). The bytes are copied, and the caller may reuse its buffer, unless
   * `view` says they lie in memory never written again that the object may keep a view of (held
   * as long as the object is). `lookUp` false says the caller's response is a first state of the
   * kind, nothing of it read before (see {@link remembers}): its objects are read without a
   * look-up that cannot find them, and copied into slabs they share.
   */
  read(kind: KindDescriptor, bytes: Uint8Array, where: string, lookUp = true, view = false): ReadResult {
    // Unchanged objects are recognised by their bytes before anything is decoded or copied: a
    // state-of-the-world response of 50k objects with one change decodes one. Nothing of a kind
    // kept yet (the first state, a start): the name is not read out twice.
    const sentName = lookUp && this.cache.holds(kind.key) ? sentNameOf(bytes) : undefined;
    if (sentName !== undefined) {
      const seen = this.cache.get(kind.key, sentName);
      if (seen !== undefined && sameBytes(envelopeOf(seen), bytes)) return seen;
    }
    // A copy detaches the object from the (possibly huge) response buffer it arrived in, unless the
    // caller keeps that buffer as it is anyway (`view`); a plain Uint8Array (not a Buffer) also
    // makes protobufjs fail on overruns instead of truncating. Otherwise the objects of a first
    // state share slabs (see {@link SlabCopier}); any other is a buffer of its own.
    const raw = view ? plainView(bytes) : lookUp ? new Uint8Array(bytes) : this.slabs.copy(bytes);
    // Envelopes in the plain shape (nearly all) are read from their bytes; any other through the
    // schema, which names what is wrong with it.
    const plain = readPlainEnvelope(raw, UNKNOWN_FIELDS);
    let decoded: McpEnvelope;
    try {
      decoded = plain ?? MCP_RESOURCE.toObject(MCP_RESOURCE.decode(new StrictReader(raw)), { longs: Number });
    } catch (err) {
      return {
        ok: false,
        error: new MeshmuxError(
          'DECODE',
          `an envelope of ${raw.byteLength} bytes does not decode as an MCP Resource: ${(err as Error).message}`,
          { file: where, field: 'resources' },
          { cause: err },
        ),
      };
    }
    const metadata = decoded.metadata ?? {};
    const named = this.parseName(metadata.name ?? '', kind, where);
    if (!named.ok) return named;

    const result = this.build(kind, named.namespace, named.shortName, where, {
      sentName: metadata.name,
      bodyTypeUrl: decoded.body?.type_url,
      body: decoded.body?.value,
      labels: this.sharedValues(metadata.labels ?? {}, named.shortName),
      annotations: metadata.annotations ?? {},
      createTime: metadata.create_time,
      // The upstream's metadata.version is not carried: behind istiod it is a Kubernetes resourceVersion,
      // which moves on status writes too, and would re-push unchanged objects to every istiod.
      upstreamVersion: '',
      unknownEnvelopeFields: this.sharedNumbers(
        plain === undefined ? unknownFieldNumbers(raw, MCP_RESOURCE_FIELDS) : UNKNOWN_FIELDS,
      ),
    });
    // The name as sent is the result's own `namespace/name` string nearly always: shared, not built again.
    const sent = metadata.name ?? '';
    const cacheName = result.name === sent ? result.name : compactString(sent);
    const kept = keptRead(result, raw, kind.key, cacheName);
    if (this.remembering) this.cache.set(kind.key, cacheName, kept);
    return kept;
  }

  /**
   * Whether `bytes` are, byte for byte, the envelope `result` was read from by this reader: the
   * same object sent again, to be taken as `result` without a look-up. False for anything else.
   */
  readsAs(result: ReadResult, bytes: Uint8Array): boolean {
    const kept = result as Partial<KeptRead>;
    if (kept.cacheKind === undefined) return false;
    const size =
      kept.raw !== undefined ? kept.raw.byteLength : (kept.envelopeEnd ?? 0) - (kept.envelopeAt ?? 0);
    return size === bytes.byteLength && sameBytes(envelopeOf(kept as KeptRead), bytes);
  }

  /**
   * Stops remembering `result` (an object the upstream's full state no longer holds), so its
   * bytes and resource are not kept for a comeback that may never happen. Does nothing when the
   * reader has since read a newer version of the object under the same name.
   */
  forget(result: ReadResult): void {
    const { cacheKind, cacheName } = result as Partial<KeptRead>;
    if (cacheKind !== undefined && cacheName !== undefined)
      this.cache.deleteIf(cacheKind, cacheName, result as KeptRead);
  }

  /**
   * The name a bare body (no MCP envelope, no delta name) goes by: its first host, for messages
   * that have `hosts`, which is how Nacos names its ServiceEntries in delta removals. Empty when
   * there is none or the body does not decode.
   */
  bareBodyName(kind: KindDescriptor, body: Uint8Array): string {
    try {
      const decoded = messageType(kind.bodyType).decode(
        new StrictReader(new Uint8Array(body)),
      ) as unknown as {
        hosts?: unknown;
      };
      const hosts = decoded.hosts;
      return Array.isArray(hosts) && typeof hosts[0] === 'string' ? hosts[0] : '';
    } catch {
      return '';
    }
  }

  /**
   * Reads a bare body (`Any` of the kind's message, no MCP envelope), as Nacos sends over delta
   * xDS, under `name` (`[<namespace>/]<name>`): it has no labels, annotations or creation time.
   */
  readBareBody(
    kind: KindDescriptor,
    bodyTypeUrl: string,
    body: Uint8Array,
    name: string,
    where: string,
  ): ReadResult {
    const named = this.parseName(name, kind, where);
    if (!named.ok) return named;
    return this.build(kind, named.namespace, named.shortName, where, {
      sentName: name,
      bodyTypeUrl,
      body: new Uint8Array(body),
      labels: {},
      annotations: {},
      createTime: undefined,
      upstreamVersion: '',
      unknownEnvelopeFields: [],
    });
  }

  private parseName(
    full: string,
    kind: KindDescriptor,
    where: string,
  ): { ok: true; namespace: string; shortName: string } | { ok: false; name?: string; error: MeshmuxError } {
    // Cut at the slash, not split: no list per object read.
    const slash = full.indexOf('/');
    let namespace: string;
    let shortName: string;
    if (slash < 0) {
      namespace = this.options.defaultNamespace;
      shortName = full;
    } else if (full.indexOf('/', slash + 1) < 0) {
      namespace = slash === 0 ? this.options.defaultNamespace : full.slice(0, slash);
      shortName = full.slice(slash + 1);
    } else {
      namespace = '';
      shortName = '';
    }
    if (shortName === '') {
      return {
        ok: false,
        error: new MeshmuxError('METADATA', `${kind.kind} "${full}": the name is not [<namespace>/]<name>`, {
          file: where,
          field: 'metadata.name',
        }),
      };
    }
    return { ok: true, namespace: this.shared(namespace), shortName };
  }

  /**
   * One instance of a string many objects repeat (a namespace, a label value such as a zone),
   * instead of one per object as each is decoded. Bounded: once the table is full, strings not in
   * it stay as decoded.
   */
  private shared(text: string): string {
    if (text.length > MAX_SHARED_CHARS) return text;
    const known = this.repeated.get(text);
    if (known !== undefined) return known;
    if (this.repeated.size < MAX_SHARED_STRINGS) this.repeated.set(text, text);
    return text;
  }

  /**
   * Unknown envelope field numbers as a result keeps them: the last list handed out when they are
   * the same (an upstream that adds a field adds it to every object), else a copy of `numbers`.
   */
  private sharedNumbers(numbers: readonly number[]): readonly number[] {
    if (numbers.length === 0) return NONE;
    const last = this.lastUnknown;
    if (last.length === numbers.length && last.every((n, i) => n === numbers[i])) return last;
    return (this.lastUnknown = Object.freeze([...numbers]));
  }

  /**
   * `labels` (decoded for this object alone) with its values shared: a value that is the object's
   * own `name` (as `app` so often is) is that string, any other the table's.
   */
  private sharedValues(labels: Record<string, string>, name: string): Record<string, string> {
    for (const key of Object.keys(labels)) {
      const value = labels[key] as string;
      labels[key] = value === name ? name : this.shared(value);
    }
    return labels;
  }

  private build(
    kind: KindDescriptor,
    namespace: string,
    name: string,
    where: string,
    parts: {
      /** The name as sent, `namespace/name` nearly always: then the object's key is that string. */
      sentName: string | undefined;
      bodyTypeUrl: string | undefined;
      body: Uint8Array | undefined;
      labels: Record<string, string>;
      annotations: Record<string, string>;
      createTime: { seconds?: number; nanos?: number } | undefined;
      upstreamVersion: string;
      unknownEnvelopeFields: readonly number[];
    },
  ): ReadResult {
    const full = nameKey(namespace, name, parts.sentName);
    if (parts.bodyTypeUrl === undefined || parts.body === undefined)
      return refusal(kind, full, where, 'SCHEMA', 'no body', 'body');
    const bodyType = parts.bodyTypeUrl.slice(parts.bodyTypeUrl.lastIndexOf('/') + 1);
    if (bodyType !== kind.bodyType) {
      // Not an object of this kind at all (a response with swapped type URLs, say): it cannot be
      // named as one, so it is reported without a name and its response is refused whole.
      return {
        ok: false,
        error: new MeshmuxError(
          'SCHEMA',
          `${full}: the body is ${bodyType || '(no type)'}, ${kind.kind} needs ${kind.bodyType}`,
          { file: where, field: 'body' },
        ),
      };
    }
    const bodyMessage = messageType(kind.bodyType);
    let unknownBodyFields: readonly string[] = NONE;
    let message: protobuf.Message | typeof PLAIN_BODY = PLAIN_BODY;
    let lists: BodyParts['lists'] | undefined;
    try {
      // A plain body (nearly all) holds nothing to report and nothing the checks could refuse:
      // nothing would read it decoded.
      if (!isPlainBody(bodyMessage, parts.body)) {
        // A large body is decoded a list element at a time; any other, or one that fails so, whole.
        const split = decodeBodyParts(bodyMessage, parts.body);
        message = split?.message ?? bodyMessage.decode(new StrictReader(parts.body));
        lists = split?.lists;
        unknownBodyFields = findUnknownFields(bodyMessage, parts.body);
      }
    } catch (err) {
      return refusal(
        kind,
        full,
        where,
        'DECODE',
        `the body does not decode as ${kind.bodyType}: ${(err as Error).message}`,
        'body',
      );
    }
    const checked = checkUpstreamObject(
      { namespace, name, labels: parts.labels, annotations: parts.annotations },
      bodyMessage,
      message,
      lists,
    );
    const first = checked.errors[0];
    if (first !== undefined) {
      const reasons = checked.errors.map((e) => `${e.location.field ?? 'spec'}: ${e.message}`);
      return refusal(
        kind,
        full,
        where,
        first.code === 'METADATA' ? 'METADATA' : 'SCHEMA',
        reasons.join('; '),
        first.location.field ?? 'spec',
      );
    }
    const refused = refusedAnnotation(kind, parts.annotations);
    if (refused !== undefined) {
      return refusal(
        kind,
        full,
        where,
        'METADATA',
        `istiod refuses the annotation ${refused}`,
        `metadata.annotations.${refused}`,
      );
    }
    const fields: ResourceFields = {
      kind: kind.key,
      namespace,
      name,
      key: full,
      labels: parts.labels,
      annotations: parts.annotations,
      createTime:
        parts.createTime === undefined
          ? this.firstSeenTime(kind.key, namespace, name)
          : this.timeOf(parts.createTime.seconds ?? 0, parts.createTime.nanos ?? 0),
      body: parts.body,
      // One origin object for every object of this upstream that carries no version of its own.
      origin:
        parts.upstreamVersion === ''
          ? this.origin
          : { file: this.options.origin, upstreamVersion: parts.upstreamVersion },
    };
    // Annotated here, as the merge would (an object that already names a source passes as it is):
    // the object as read would otherwise stay beside the one served for as long as it is.
    const source = this.options.source;
    const resource =
      source === undefined || parts.annotations[SOURCE_ANNOTATION] !== undefined
        ? makeResource(fields)
        : makeResourceFrom(source, fields);
    return {
      ok: true,
      name: full,
      resource,
      unknownEnvelopeFields: shared(parts.unknownEnvelopeFields),
      unknownBodyFields: shared(unknownBodyFields),
      warnings: checked.warnings.length === 0 ? NONE : checked.warnings.map((w) => w.at({ file: where })),
    };
  }

  /**
   * The creation time of an object that names one. A time of whole seconds (Kubernetes keeps no
   * finer one, and objects applied together share their second) is one object for every object
   * created in that second: a timestamp per object would be 40 bytes more each.
   */
  private timeOf(seconds: number, nanos: number): Timestamp {
    if (nanos !== 0) return { seconds, nanos };
    let time = this.times.get(seconds);
    if (time === undefined) {
      if (this.times.size >= MAX_SHARED_TIMES) this.times.clear();
      this.times.set(seconds, (time = { seconds, nanos: 0 }));
    }
    return time;
  }

  private firstSeenTime(kind: string, namespace: string, name: string): Timestamp {
    const key = resourceKey({ kind, namespace, name });
    let ts = this.firstSeen.get(key);
    if (ts === undefined) this.firstSeen.set(key, (ts = timestampFromDate(this.now())));
    return ts;
  }
}

const NONE: readonly never[] = Object.freeze([]);

/** Where the envelope reader puts the unknown field numbers of the envelope it read last. */
const UNKNOWN_FIELDS: number[] = [];

/**
 * A good read as nearly every object is: its envelope holds its body, nothing unusual was found in
 * it (no unknown field, no warning), and it is kept under its own name, its object's key. What all
 * of them share is its prototype's, not seven more fields of each: 48 bytes a read, where one with
 * every field takes 104.
 */
class PlainRead {
  declare readonly ok: true;
  declare readonly unknownEnvelopeFields: readonly number[];
  declare readonly unknownBodyFields: readonly string[];
  declare readonly warnings: readonly MeshmuxError[];

  constructor(
    readonly resource: ConfigResource,
    readonly envelopeAt: number,
    readonly envelopeEnd: number,
  ) {}

  /** The object's own key: it is kept under the name it was read as. */
  get name(): string {
    return this.resource.key;
  }

  get cacheKind(): string {
    return this.resource.kind;
  }

  get cacheName(): string {
    return this.resource.key;
  }
}
for (const [key, value] of [
  ['ok', true],
  ['unknownEnvelopeFields', NONE],
  ['unknownBodyFields', NONE],
  ['warnings', NONE],
] as const)
  Object.defineProperty(PlainRead.prototype, key, { value, enumerable: true });

/**
 * The name as sent (`metadata.name`) of the envelope a result handed out by a reader was read
 * from: what {@link sentNameOf} finds in those bytes. Undefined for a result read from none (a
 * bare body) or whose envelope could not be read.
 */
export function sentNameOfRead(result: ReadResult): string | undefined {
  return (result as Partial<KeptRead>).cacheName;
}

/**
 * `result` with its bytes and key, written out field by field: a spread copy of the result takes
 * a hidden class of its own per object in V8 (two heap objects more per object, measured).
 */
function keptRead(result: ReadResult, raw: Uint8Array, cacheKind: string, cacheName: string): KeptRead {
  if (result.ok) {
    const body = result.resource.body;
    const start = raw.byteOffset;
    const end = start + raw.byteLength;
    const inRaw =
      body.buffer === raw.buffer && body.byteOffset >= start && body.byteOffset + body.byteLength <= end;
    if (
      inRaw &&
      cacheName === result.name &&
      result.name === result.resource.key &&
      cacheKind === result.resource.kind &&
      result.unknownEnvelopeFields.length === 0 &&
      result.unknownBodyFields.length === 0 &&
      (result.warnings === undefined || result.warnings.length === 0)
    )
      return new PlainRead(result.resource, start, end);
    const kept: KeptRead = {
      ok: true,
      name: result.name,
      resource: result.resource,
      unknownEnvelopeFields: result.unknownEnvelopeFields,
      unknownBodyFields: result.unknownBodyFields,
      warnings: result.warnings ?? NONE,
      cacheKind,
      cacheName,
      envelopeAt: start,
      envelopeEnd: end,
    };
    // A field added to the literal's shape: one shared shape more, not one per object.
    return inRaw ? kept : Object.assign(kept, { raw });
  }
  // A refused object's bytes are kept to recognise them if sent again: in a buffer of their own,
  // not a view keeping a slab alive for them.
  const own = raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength ? raw : new Uint8Array(raw);
  return result.name === undefined
    ? { ok: false, error: result.error, raw: own, cacheKind, cacheName }
    : { ok: false, name: result.name, error: result.error, raw: own, cacheKind, cacheName };
}

/**
 * Bytes of one slab of {@link SlabCopier}: below glibc's threshold for giving an allocation pages
 * of its own (128 KiB by default, 1 MiB as shipped), so slabs come from malloc's heap, on huge
 * pages where it may use them (a slab of 256 KiB cost three times the page faults of a buffer per
 * object).
 */
const SLAB_BYTES = 32 * 1024;
/** Envelopes from this size on are copied into a buffer of their own. */
const SLAB_MAX_ENTRY = SLAB_BYTES / 8;

/**
 * Copies of the objects of a first state, side by side in slabs: one allocation per 32 KiB
 * instead of one per object, which at a start of 100k objects cost more than the copies (a
 * buffer of its own is an allocation outside V8's heap and an object more for every collection
 * to sweep). A slab lives as long as any object in it, so the memory it can hold beyond the objects
 * served is bounded by one copy of each kind's first state; objects read later, a few at a time,
 * each get a buffer of their own, and keep no slab alive.
 */
class SlabCopier {
  private slab = new Uint8Array(0);
  private used = 0;

  copy(bytes: Uint8Array): Uint8Array {
    const size = bytes.byteLength;
    if (size >= SLAB_MAX_ENTRY) return new Uint8Array(bytes);
    if (this.used + size > this.slab.byteLength) {
      this.slab = new Uint8Array(SLAB_BYTES);
      this.used = 0;
    }
    const at = this.used;
    this.slab.set(bytes, at);
    this.used = at + size;
    return this.slab.subarray(at, at + size);
  }
}

/** What a kept result stands for in the cache's bound: its envelope and about as much again of objects. */
function keptSize(kept: KeptRead): number {
  if (kept.raw !== undefined) return kept.raw.byteLength + 256;
  return (kept.envelopeEnd ?? 0) - (kept.envelopeAt ?? 0) + 256;
}

/** `list`, or one shared empty list: a result is kept per object, and most of these lists are empty. */
/**
 * An object of `kind` named `full` refused, its reason told where it was read (a function of its
 * own, not a closure made for every object read).
 */
function refusal(
  kind: KindDescriptor,
  full: string,
  where: string,
  code: 'SCHEMA' | 'DECODE' | 'METADATA',
  reason: string,
  field: string,
): ReadResult {
  return {
    ok: false,
    name: full,
    error: new MeshmuxError(code, `${kind.kind} ${full}: ${reason}`, { file: where, field }),
  };
}

/**
 * An annotation of `annotations` istiod refuses on an object of `kind`: the first of
 * `REFUSED_ANNOTATIONS` the object wrote, else `DRY_RUN_ANNOTATION` where the kind has no dry run;
 * undefined when there is none, as nearly always (no array of the keys or closure is made).
 */
function refusedAnnotation(
  kind: KindDescriptor,
  annotations: Readonly<Record<string, string>>,
): string | undefined {
  for (const a in annotations) if (Object.hasOwn(annotations, a) && REFUSED_ANNOTATIONS.includes(a)) return a;
  return Object.hasOwn(annotations, DRY_RUN_ANNOTATION) && !DRY_RUN_KINDS.has(kind.key)
    ? DRY_RUN_ANNOTATION
    : undefined;
}

function shared<T>(list: readonly T[]): readonly T[] {
  return list.length === 0 ? NONE : list;
}

/**
 * `metadata.name` of an encoded Resource, read from the wire without decoding anything else;
 * undefined when the envelope is anything but the plain shape (then the full decode decides).
 */
export function sentNameOf(bytes: Uint8Array): string | undefined {
  const metadata = onlyLengthDelimited(bytes, 1);
  const name = metadata === undefined ? undefined : onlyLengthDelimited(metadata, 1);
  return name === undefined
    ? undefined
    : Buffer.from(name.buffer, name.byteOffset, name.byteLength).toString('utf8');
}

/** The payload of `field` when it occurs exactly once, length-delimited, in a well-formed message. */
function onlyLengthDelimited(bytes: Uint8Array, field: number): Uint8Array | undefined {
  const reader = protobuf.Reader.create(bytes);
  let found: Uint8Array | undefined;
  try {
    while (reader.pos < reader.len) {
      const tag = reader.uint32();
      if (tag >>> 3 !== field) {
        reader.skipType(tag & 7);
        continue;
      }
      if ((tag & 7) !== 2 || found !== undefined) return undefined;
      found = reader.bytes();
    }
  } catch {
    return undefined;
  }
  return found;
}
