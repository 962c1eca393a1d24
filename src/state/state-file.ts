import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { ReadList } from '../core/chunked-list.js';
import { MeshmuxError } from '../core/errors.js';
import {
  isProvenanceAnnotation,
  makeResource,
  restoreResource,
  sentVersion,
  type ConfigResource,
} from '../core/resource.js';
import type { ListSplice } from '../merge/identity-diff.js';
import type { HeldRecord, RecordedRules, RecordOrigin, SourceRecord } from '../merge/source-record.js';
import type { Selector } from '../merge/source-rules.js';
import { HOLD_REASONS, type HoldReason } from '../merge/config-snapshot.js';
import { messageType } from '../schema/proto-root.js';
import { lengthDelimitedSize, SizedWriter, utf8Length, varintSize } from '../wire/sized-writer.js';

/**
 * A state file: a fixed header, then one `meshmux.state.v1.SourceRecord`.
 *
 *   bytes 0–7    `MMXSTATE`
 *   bytes 8–11   format version, big-endian (1)
 *   bytes 12–15  flags, zero
 *   bytes 16–23  payload length, big-endian
 *   bytes 24–55  SHA-256 of the payload
 *
 * The header makes a truncated, corrupt or foreign file recognisable before anything of it is
 * believed; the payload is one self-contained value, so a shared store can keep it under one key
 * (or in chunks) unchanged.
 */
export const STATE_FILE_MAGIC = Buffer.from('MMXSTATE', 'ascii');
export const STATE_FORMAT_VERSION = 1;
/** Bytes before the payload: magic, format version, reserved, payload length, SHA-256. */
export const STATE_HEADER_BYTES = 56;
/** Where the header's SHA-256 of the payload starts. */
const CHECKSUM_AT = 24;

/** The checksum a state file's header carries (a view of `file`, which may be the header alone). */
export function stateFileChecksum(file: Buffer): Buffer {
  return file.subarray(CHECKSUM_AT, STATE_HEADER_BYTES);
}
/**
 * Resources encoded between two turns of the event loop while a record is written: a few
 * milliseconds of work. Slices of 2,000 were among the longest tasks of the loop under churn.
 */
const ENCODE_SLICE = 250;

const RECORD = messageType('meshmux.state.v1.SourceRecord');
const RECORD_CHANGE = messageType('meshmux.state.v1.RecordChange');
/** Field 8 of SourceRecord (`resources`), length-delimited. */
const RESOURCES_TAG = (8 << 3) | 2;

const KNOWN_HOLD_REASONS: ReadonlySet<string> = new Set<string>(HOLD_REASONS);

/**
 * A record keeps each object as its source sent it: one a streaming source's reader read with the
 * source's provenance (as the merge serves it) is written without it, under the version it was
 * read with, and the merge adds it again when the record is restored. Records stay as large as
 * the objects sent, and read the same by every release.
 */
function resourceMessage(r: ConfigResource, source: string): Record<string, unknown> {
  const sent = sentVersion(r, source);
  return {
    kind: r.kind,
    namespace: r.namespace,
    name: r.name,
    labels: r.labels,
    annotations: sent === undefined ? r.annotations : withoutProvenance(r.annotations),
    create_seconds: r.createTime.seconds,
    create_nanos: r.createTime.nanos,
    body: r.body,
    origin_file: r.origin.file ?? '',
    origin_doc: r.origin.doc ?? 0,
    has_origin_doc: r.origin.doc !== undefined,
    origin_line: r.origin.line ?? 0,
    has_origin_line: r.origin.line !== undefined,
    upstream_version: r.origin.upstreamVersion ?? '',
    create_time_stamped: r.origin.createTimeStamped === true,
    version: sent ?? r.version,
  };
}

/** `annotations` but the two provenance annotations. */
function withoutProvenance(annotations: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key in annotations) if (!isProvenanceAnnotation(key)) out[key] = annotations[key] ?? '';
  return out;
}

/** A string field's encoded size (tag of one byte: field numbers below 16), or 0 when it is empty. */
function stringFieldSize(value: string): number {
  if (value === '') return 0;
  return lengthDelimitedSize(utf8Length(value));
}

/** Size of one map<string, string> entry message, from the UTF-8 lengths of its key and value. */
function entrySize(k: number, v: number): number {
  return lengthDelimitedSize(k) + lengthDelimitedSize(v);
}

/** `map`'s encoded size, its provenance annotations left out with `bare`. */
function mapSize(map: Readonly<Record<string, string>>, bare = false): number {
  let size = 0;
  for (const key in map) {
    if (bare && isProvenanceAnnotation(key)) continue;
    size += lengthDelimitedSize(entrySize(utf8Length(key), utf8Length(map[key] ?? '')));
  }
  return size;
}

function writeMap(w: SizedWriter, field: number, map: Readonly<Record<string, string>>, bare = false): void {
  for (const key in map) {
    if (bare && isProvenanceAnnotation(key)) continue;
    const value = map[key] ?? '';
    const k = utf8Length(key);
    const v = utf8Length(value);
    w.varint((field << 3) | 2);
    w.varint(entrySize(k, v));
    w.string(1, key, k);
    w.string(2, value, v);
  }
}

/**
 * Encoded size of one PersistedResource message; `sent`, when given, is the version the object was
 * sent under, written instead of its own with its provenance annotations left out (see
 * {@link resourceMessage}).
 */
function resourceSize(r: ConfigResource, sent: string | undefined): number {
  const { origin } = r;
  return (
    stringFieldSize(r.kind) +
    stringFieldSize(r.namespace) +
    stringFieldSize(r.name) +
    mapSize(r.labels) +
    mapSize(r.annotations, sent !== undefined) +
    (r.createTime.seconds === 0 ? 0 : 1 + varintSize(r.createTime.seconds)) +
    (r.createTime.nanos === 0 ? 0 : 1 + varintSize(r.createTime.nanos)) +
    (r.body.byteLength === 0 ? 0 : lengthDelimitedSize(r.body.byteLength)) +
    stringFieldSize(sent ?? r.version) +
    stringFieldSize(origin.file ?? '') +
    (origin.doc === undefined || origin.doc === 0 ? 0 : 1 + varintSize(origin.doc)) +
    (origin.line === undefined || origin.line === 0 ? 0 : 1 + varintSize(origin.line)) +
    stringFieldSize(origin.upstreamVersion ?? '') +
    (origin.doc === undefined ? 0 : 2) +
    (origin.line === undefined ? 0 : 2) +
    // Field 16 takes a two-byte tag.
    (origin.createTimeStamped === true ? 3 : 0)
  );
}

function writeResource(w: SizedWriter, r: ConfigResource, sent: string | undefined): void {
  const { origin } = r;
  writeText(w, 1, r.kind);
  writeText(w, 2, r.namespace);
  writeText(w, 3, r.name);
  writeMap(w, 4, r.labels);
  writeMap(w, 5, r.annotations, sent !== undefined);
  writeNumber(w, 6, r.createTime.seconds);
  writeNumber(w, 7, r.createTime.nanos);
  if (r.body.byteLength > 0) w.bytes(8, r.body);
  writeText(w, 9, sent ?? r.version);
  writeText(w, 10, origin.file ?? '');
  writeNumber(w, 11, origin.doc);
  writeNumber(w, 12, origin.line);
  writeText(w, 13, origin.upstreamVersion ?? '');
  writeNumber(w, 14, origin.doc === undefined ? 0 : 1);
  writeNumber(w, 15, origin.line === undefined ? 0 : 1);
  writeNumber(w, 16, origin.createTimeStamped === true ? 1 : 0);
}

// Module functions, not closures inside writeResource: three closures per object written were
// allocations per object on every write of a record.

/** A string field, left out when empty. */
function writeText(w: SizedWriter, field: number, value: string): void {
  if (value !== '') w.string(field, value, utf8Length(value));
}

/** A varint field (a bool as 0 or 1), left out when zero or absent. */
function writeNumber(w: SizedWriter, field: number, value: number | undefined): void {
  if (value === undefined || value === 0) return;
  w.varint(field << 3);
  w.varint(value);
}

/**
 * Objects `from` to `to` of `resources`, each as a `resources` field (8) of a SourceRecord,
 * written straight into one buffer sized first: a record of 50k objects is rewritten after
 * changes, and building it field by field through a generic writer left tens of megabytes of
 * short-lived objects per write. Fields holding their proto3 default are left out, as proto3
 * allows; `decodeStateFile` reads them back as defaults.
 */
function encodeResourceSlice(
  source: string,
  resources: ReadList<ConfigResource>,
  from: number,
  to: number,
  scratch: { buf: Buffer | undefined },
): Buffer {
  const sizes = new Int32Array(to - from);
  const sent = new Array<string | undefined>(to - from);
  let total = 0;
  for (let i = from; i < to; i++) {
    const r = resources.at(i) as ConfigResource;
    const version = sentVersion(r, source);
    sent[i - from] = version;
    const size = resourceSize(r, version);
    sizes[i - from] = size;
    total += lengthDelimitedSize(size);
  }
  if (scratch.buf === undefined || scratch.buf.byteLength < total) {
    scratch.buf = Buffer.allocUnsafeSlow(total + (total >>> 3));
  }
  const w = new SizedWriter(scratch.buf.subarray(0, total));
  for (let i = from; i < to; i++) {
    w.varint(RESOURCES_TAG);
    w.varint(sizes[i - from] as number);
    const start = w.pos;
    writeResource(w, resources.at(i) as ConfigResource, sent[i - from]);
    if (w.pos - start !== sizes[i - from])
      throw new Error('a persisted object was not written at its computed size');
  }
  return w.buf;
}

/** A decoded PersistedResource (int64 fields may arrive as Long). */
interface ResourceObject {
  kind: string;
  version: string;
  namespace: string;
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  create_seconds: number | { toNumber(): number };
  create_nanos: number;
  body: Uint8Array;
  origin_file: string;
  origin_doc: number;
  has_origin_doc: boolean;
  origin_line: number;
  has_origin_line: boolean;
  upstream_version: string;
  create_time_stamped?: boolean;
}

function resourceFrom(o: ResourceObject): ConfigResource {
  const fields = {
    kind: o.kind,
    namespace: o.namespace,
    name: o.name,
    labels: o.labels,
    annotations: o.annotations,
    createTime: { seconds: toNumber(o.create_seconds), nanos: o.create_nanos },
    // A copy: a view would keep the whole file's buffer alive for as long as one object lives.
    body: new Uint8Array(o.body),
    origin: {
      ...(o.origin_file === '' ? {} : { file: o.origin_file }),
      ...(o.has_origin_doc ? { doc: o.origin_doc } : {}),
      ...(o.has_origin_line ? { line: o.origin_line } : {}),
      ...(o.upstream_version === '' ? {} : { upstreamVersion: o.upstream_version }),
      ...(o.create_time_stamped === true ? { createTimeStamped: true as const } : {}),
    },
  };
  // The checksum vouches for the version; a record without one derives it again.
  return o.version === '' ? makeResource(fields) : restoreResource(fields, o.version);
}

function toNumber(value: number | { toNumber(): number }): number {
  return typeof value === 'number' ? value : value.toNumber();
}

/**
 * The reason a record names for a hold: `emptied-kind` is written as `mass-delete`, which every
 * release reads, so going back to a release before it still restores the record (it refuses a
 * reason it does not know, and with it the whole record).
 */
function recordedReason(reason: HoldReason): HoldReason {
  return reason === 'emptied-kind' ? 'mass-delete' : reason;
}

/** The reason a hold is read as: `emptied-kind` where the record names the kinds it holds alone. */
function heldReason(
  reason: HoldReason,
  emptiedKinds: readonly string[],
): Pick<HeldRecord, 'reason' | 'emptiedKinds'> {
  if (reason !== 'mass-delete' || emptiedKinds.length === 0) return { reason };
  return { reason: 'emptied-kind', emptiedKinds };
}

function heldMessage(h: HeldRecord, source: string): Record<string, unknown> {
  return {
    reason: recordedReason(h.reason),
    since_ms: h.sinceMs,
    deletions: h.deletions,
    total: h.total,
    kinds: h.kinds ?? [],
    full: h.kinds === undefined,
    resources: h.resources.map((r) => resourceMessage(r, source)),
    revision: h.revision,
    emptied_kinds: h.reason === 'emptied-kind' ? (h.emptiedKinds ?? []) : [],
  };
}

/** A record's fields but its resources, as a SourceRecord message. */
function recordFields(record: SourceRecord): Record<string, unknown> {
  return {
    source: record.source,
    type: record.type,
    revision: record.revision,
    last_sync_ms: record.lastSyncMs ?? 0,
    saved_ms: record.savedMs,
    complete: record.complete,
    answered_kinds: record.answeredKinds,
    ...(record.held === undefined ? {} : { held: heldMessage(record.held, record.source) }),
    ...(record.rules === undefined ? {} : { rules: rulesMessage(record.rules) }),
    ...(record.origin === undefined ? {} : { origin: originMessage(record.origin) }),
    ...(record.deletionWindow === undefined
      ? {}
      : {
          deletion_window: {
            start_ms: record.deletionWindow.startMs,
            peak: record.deletionWindow.peak,
          },
        }),
  };
}

function originMessage(origin: RecordOrigin): Record<string, unknown> {
  return {
    replica: origin.replica,
    etcd_cluster: origin.etcd?.cluster ?? '',
    etcd_revision: origin.etcd?.revision ?? 0,
  };
}

function originFrom(o: OriginObject): RecordOrigin {
  const revision = toNumber(o.etcd_revision);
  return {
    replica: o.replica,
    // A cluster with revision 0: etcd answered and held no record of the source.
    ...(o.etcd_cluster === '' ? {} : { etcd: { cluster: o.etcd_cluster, revision } }),
  };
}

function selectorMessage(s: Selector | undefined): Record<string, unknown> | undefined {
  if (s === undefined) return undefined;
  return {
    namespaces: s.namespaces ?? [],
    kinds: s.kinds ?? [],
    has_namespaces: s.namespaces !== undefined,
    has_kinds: s.kinds !== undefined,
  };
}

function rulesMessage(r: RecordedRules): Record<string, unknown> {
  return {
    priority: r.priority,
    allow: selectorMessage(r.allow),
    deny: selectorMessage(r.deny),
    keep_on_empty: r.keepOnEmpty,
    max_delete_ratio: r.maxDeleteRatio,
    min_deletes: r.minDeletes,
    confirm_after_ms: r.confirmAfterMs ?? 0,
    default_namespace: r.defaultNamespace,
  };
}

/** A decoded Selector. */
interface SelectorObject {
  namespaces: string[];
  kinds: string[];
  has_namespaces: boolean;
  has_kinds: boolean;
}

function selectorFrom(o: SelectorObject | null | undefined): { selector?: Selector } {
  if (o === null || o === undefined) return {};
  return {
    selector: {
      ...(o.has_namespaces ? { namespaces: o.namespaces } : {}),
      ...(o.has_kinds ? { kinds: o.kinds } : {}),
    },
  };
}

function rulesFrom(o: RulesObject, fail: (why: string) => never): RecordedRules {
  const ratio = o.max_delete_ratio;
  if (!(ratio >= 0 && ratio <= 1)) fail(`recorded rules: maxDeleteRatio ${ratio} is not between 0 and 1`);
  if (!Number.isInteger(o.priority)) fail(`recorded rules: priority ${o.priority} is not an integer`);
  const allow = selectorFrom(o.allow).selector;
  const deny = selectorFrom(o.deny).selector;
  const confirmAfterMs = toNumber(o.confirm_after_ms);
  return {
    priority: o.priority,
    ...(allow === undefined ? {} : { allow }),
    ...(deny === undefined ? {} : { deny }),
    keepOnEmpty: o.keep_on_empty,
    maxDeleteRatio: ratio,
    minDeletes: o.min_deletes,
    ...(confirmAfterMs > 0 ? { confirmAfterMs } : {}),
    defaultNamespace: o.default_namespace,
  };
}

/** Decoded RecordedRules. */
interface RulesObject {
  priority: number;
  allow?: SelectorObject | null;
  deny?: SelectorObject | null;
  keep_on_empty: boolean;
  max_delete_ratio: number;
  min_deletes: number;
  confirm_after_ms: number | { toNumber(): number };
  default_namespace: string;
}

/**
 * Encodes a record as a state file, handing the payload to `write` a part at a time, in order.
 * Unless `reuse` is false, a part's memory is reused for the next once `write` resolves: a
 * record of 50k objects is several megabytes, rewritten after changes, and a fresh buffer for it
 * on every write is a large allocation that outlives the young generation while it is written out, which sets off full
 * collections of the heap. Yields to the event loop between slices of objects, so a large source
 * never stalls serving while its state is written. Resolves to the header, which goes first in
 * the file: its payload length and checksum are known only at the end.
 */
export async function streamStateFile(
  record: SourceRecord,
  write: (part: Buffer) => Promise<void>,
  /** False: each part a buffer of its own, which `write` may keep. */
  reuse = true,
): Promise<Buffer> {
  const hash = createHash('sha256');
  let length = 0;
  const put = async (b: Uint8Array): Promise<void> => {
    const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
    hash.update(buf);
    length += buf.byteLength;
    await write(buf);
  };
  await put(RECORD.encode(recordFields(record)).finish());
  // Concatenated fields of one message merge: each object is appended as its own field 8, a
  // slice of objects at a time, written into one buffer reused from slice to slice.
  const scratch: { buf: Buffer | undefined } = { buf: undefined };
  for (let i = 0; i < record.resources.length; i += ENCODE_SLICE) {
    await put(
      encodeResourceSlice(
        record.source,
        record.resources,
        i,
        Math.min(i + ENCODE_SLICE, record.resources.length),
        reuse ? scratch : { buf: undefined },
      ),
    );
    if (i + ENCODE_SLICE < record.resources.length) await nextTurn();
  }
  const header = Buffer.alloc(STATE_HEADER_BYTES);
  STATE_FILE_MAGIC.copy(header, 0);
  header.writeUInt32BE(STATE_FORMAT_VERSION, 8);
  header.writeUInt32BE(0, 12);
  header.writeBigUInt64BE(BigInt(length), 16);
  hash.digest().copy(header, CHECKSUM_AT);
  return header;
}

/** A record as the parts of a state file, header first, each part a buffer of its own. */
export async function encodeStateFile(record: SourceRecord): Promise<Buffer[]> {
  const parts: Buffer[] = [];
  const header = await streamStateFile(
    record,
    (part) => {
      parts.push(part);
      return Promise.resolve();
    },
    false,
  );
  return [header, ...parts];
}

/**
 * Reads a state file whole, or throws a MeshmuxError (code STATE) saying why it cannot be
 * believed: not a state file, an unknown format version, truncated, a checksum mismatch, or a
 * payload that does not decode. Nothing of a file that fails any check is returned.
 */
export function decodeStateFile(bytes: Uint8Array, file: string): SourceRecord {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fail = (why: string, cause?: unknown): never => {
    throw new MeshmuxError('STATE', why, { file }, cause === undefined ? {} : { cause });
  };
  if (buf.byteLength < STATE_HEADER_BYTES || !buf.subarray(0, 8).equals(STATE_FILE_MAGIC)) {
    fail('not a meshmux state file');
  }
  const version = buf.readUInt32BE(8);
  if (version !== STATE_FORMAT_VERSION) fail(`state format version ${version} is not supported`);
  const length = Number(buf.readBigUInt64BE(16));
  const payload = buf.subarray(STATE_HEADER_BYTES);
  if (payload.byteLength !== length) {
    fail(`truncated or extended: ${payload.byteLength} payload bytes, the header says ${length}`);
  }
  const digest = createHash('sha256').update(payload).digest();
  if (!digest.equals(stateFileChecksum(buf))) fail('checksum mismatch: the file is corrupt');
  let o: RecordObject;
  try {
    // The decoded message itself (defaults on its prototype): no second, plain copy of 50k objects.
    o = RECORD.decode(payload) as unknown as RecordObject;
  } catch (err) {
    return fail(`payload does not decode: ${(err as Error).message}`, err);
  }
  return recordFrom(o, fail);
}

/** A decoded SourceRecord (int64 fields may arrive as Long). */
interface RecordObject {
  source: string;
  type: string;
  revision: string;
  last_sync_ms: number | { toNumber(): number };
  saved_ms: number | { toNumber(): number };
  complete: boolean;
  answered_kinds: string[];
  resources: ResourceObject[];
  held?: null | {
    reason: string;
    since_ms: number | { toNumber(): number };
    deletions: number;
    total: number;
    kinds: string[];
    full: boolean;
    resources: ResourceObject[];
    revision: string;
    emptied_kinds?: string[];
  };
  rules?: RulesObject | null;
  origin?: OriginObject | null;
  deletion_window?: null | { start_ms: number | { toNumber(): number }; peak: number };
}

interface OriginObject {
  replica: string;
  etcd_cluster: string;
  etcd_revision: number | { toNumber(): number };
}

/** A decoded SourceRecord as a record, or `fail` naming what cannot be believed. */
function recordFrom(o: RecordObject, fail: (why: string) => never): SourceRecord {
  if (o.source === '' || o.type === '') fail('the record names no source');
  const held = o.held ?? undefined;
  if (held !== undefined && !KNOWN_HOLD_REASONS.has(held.reason)) fail(`unknown hold reason ${held.reason}`);
  const rules = o.rules === null || o.rules === undefined ? undefined : rulesFrom(o.rules, fail);
  return {
    source: o.source,
    type: o.type,
    revision: o.revision,
    ...(toNumber(o.last_sync_ms) === 0 ? {} : { lastSyncMs: toNumber(o.last_sync_ms) }),
    savedMs: toNumber(o.saved_ms),
    complete: o.complete,
    answeredKinds: o.answered_kinds,
    resources: o.resources.map(resourceFrom),
    ...(held === undefined
      ? {}
      : {
          held: {
            ...heldReason(held.reason as HoldReason, held.emptied_kinds ?? []),
            sinceMs: toNumber(held.since_ms),
            deletions: held.deletions,
            total: held.total,
            ...(held.full ? {} : { kinds: held.kinds }),
            resources: held.resources.map(resourceFrom),
            revision: held.revision,
          },
        }),
    ...(rules === undefined ? {} : { rules }),
    ...(o.origin === null || o.origin === undefined ? {} : { origin: originFrom(o.origin) }),
    ...(o.deletion_window === null || o.deletion_window === undefined
      ? {}
      : { deletionWindow: { startMs: toNumber(o.deletion_window.start_ms), peak: o.deletion_window.peak } }),
  };
}

/**
 * A change to a record: the record as it now is but for its resources, which hold only the objects
 * the splices insert, in order. Never with a held update (one is written whole).
 */
export interface RecordChange {
  readonly record: SourceRecord;
  readonly splices: readonly ListSplice[];
}

/** Encodes a change to a record (`meshmux.state.v1.RecordChange`). */
export function encodeRecordChange(change: RecordChange): Buffer {
  if (change.record.held !== undefined) throw new Error('a record with a held update is written whole');
  const message = RECORD_CHANGE.encode({
    record: {
      ...recordFields(change.record),
      resources: Array.from(change.record.resources, (r) => resourceMessage(r, change.record.source)),
    },
    splices: change.splices,
  }).finish();
  return Buffer.from(message.buffer, message.byteOffset, message.byteLength);
}

/** Decodes a change to a record, or `fail` naming what cannot be believed. */
export function decodeRecordChange(
  payload: Uint8Array,
  fail: (why: string, cause?: unknown) => never,
): RecordChange {
  let o: { record?: RecordObject | null; splices: { at: number; removed: number; inserted: number }[] };
  try {
    o = RECORD_CHANGE.decode(payload) as unknown as typeof o;
  } catch (err) {
    return fail(`a change does not decode: ${(err as Error).message}`, err);
  }
  if (o.record === undefined || o.record === null) return fail('a change holds no record');
  const record = recordFrom(o.record, fail);
  if (record.held !== undefined) fail('a change carries a held update');
  return { record, splices: o.splices.map((x) => ({ at: x.at, removed: x.removed, inserted: x.inserted })) };
}
