/**
 * Reads multi-document YAML into ConfigResources the way Istio reads it: one document at a time,
 * YAML 1.1 scalars as sigs.k8s.io/yaml resolves them, non-Istio kinds skipped, unknown spec fields
 * pruned. Every failure is a value tied to its document, so one bad document never hides the
 * others.
 */
import { Composer, LineCounter, Parser, isMap, isScalar, type Document } from 'yaml';
import { MeshmuxError, type ErrorLocation } from '../core/errors.js';
import { makeResource, timestampFromDate, type ConfigResource } from '../core/resource.js';
import { relativePath } from './field-path.js';
import { isPlainObject, ownValue, type JsonValue } from './json-value.js';
import { KINDS, type KindDescriptor } from './kinds.js';
import { readObjectMeta } from './object-meta.js';
import { fromProtoJson, toProtoJson } from './proto-json.js';
import { messageType } from './proto-root.js';
import type { ReadYamlAsyncOptions, ReadYamlOptions, ReadYamlResult } from './yaml-read-types.js';
import { YamlWorkerPool } from './yaml-worker-pool.js';
import { AliasBudget, yamlToJson, type YamlJsonResult } from './yaml-to-json.js';

export type { ReadYamlAsyncOptions, ReadYamlOptions, ReadYamlResult } from './yaml-read-types.js';

/** A spec encoded as its kind's body message. */
export interface EncodedSpec {
  readonly body: Uint8Array;
  /** Unknown fields that were dropped, as paths relative to `spec` (e.g. `http[0].websocketUpgrade`). */
  readonly pruned: string[];
}

/** Warnings of `yaml` that do not apply here: tags are resolved by yaml-to-json.ts instead. */
const IGNORED_YAML_WARNINGS = new Set(['TAG_RESOLVE_FAILED']);

/** Groups meshmux serves: a document in one of them with an unknown kind or version is a mistake, not a skip. */
const SERVED_GROUPS: ReadonlySet<string> = new Set(KINDS.kinds.map((k) => k.group));

function istioLooking(group: string): boolean {
  // Other Istio groups (install.istio.io's IstioOperator, ...) are skipped with a warning like any foreign kind.
  return SERVED_GROUPS.has(group);
}

function descriptorOf(kind: KindDescriptor | string): KindDescriptor {
  if (typeof kind !== 'string') return kind;
  const found = KINDS.get(kind);
  if (found === undefined) throw new MeshmuxError('UNKNOWN_KIND', `${kind} is not a kind meshmux serves`);
  return found;
}

/** Encodes `spec`, collecting every error (with `spec.`-prefixed field paths) instead of stopping. */
function encodeCollecting(
  descriptor: KindDescriptor,
  spec: unknown,
  errors: MeshmuxError[],
): EncodedSpec & { readonly prunedPaths: string[] } {
  const type = messageType(descriptor.bodyType);
  const prunedPaths: string[] = [];
  const message = fromProtoJson(type, spec ?? null, {
    path: 'spec',
    errors,
    onPruned: (field) => prunedPaths.push(field),
  });
  let body: Uint8Array;
  try {
    body = type.encode(message).finish();
  } catch (err) {
    if (!isNestingLimit(err)) throw err;
    // Nothing meshmux decodes may nest deeper either, so such a body could not be served.
    errors.push(
      new MeshmuxError(
        'LIMIT',
        `nested more than ${MAX_MESSAGE_NESTING} messages deep once encoded (each level of a free-form ` +
          'value such as an EnvoyFilter patch is two); not read',
        { field: 'spec' },
      ),
    );
    body = new Uint8Array();
  }
  return { body, pruned: prunedPaths.map((p) => relativePath(p, 'spec')), prunedPaths };
}

/** How deep protobufjs encodes and decodes messages inside one another (protoc's default too). */
const MAX_MESSAGE_NESTING = 100;

/** Whether `err` is protobufjs refusing a message nested past {@link MAX_MESSAGE_NESTING}. */
function isNestingLimit(err: unknown): boolean {
  return err instanceof Error && err.message === 'max depth exceeded';
}

/**
 * Encodes a document's `spec` (already plain JSON data) as the body message of `kind` (a registry
 * key or descriptor). Unknown fields are dropped and listed; anything else that does not fit the
 * schema throws a `SCHEMA` MeshmuxError carrying `location` and the field path (the first problem;
 * `readYamlDocuments` reports all of them).
 */
export function encodeSpec(
  kind: KindDescriptor | string,
  spec: unknown,
  location: ErrorLocation = {},
): EncodedSpec {
  const errors: MeshmuxError[] = [];
  const { body, pruned } = encodeCollecting(descriptorOf(kind), spec, errors);
  const first = errors[0];
  if (first !== undefined) throw first.at(location);
  return { body, pruned };
}

/**
 * The canonical proto3 JSON of a body of `kind` (a registry key), for debug pages. Throws an
 * `UNKNOWN_KIND` MeshmuxError for a kind not in the registry and `DECODE` for bytes that are not a
 * valid body.
 */
export function decodeBody(kind: string, body: Uint8Array): JsonValue {
  const type = messageType(descriptorOf(kind).bodyType);
  let message;
  try {
    message = type.decode(body);
  } catch (err) {
    throw new MeshmuxError(
      'DECODE',
      `cannot decode ${kind} body: ${(err as Error).message}`,
      {},
      { cause: err },
    );
  }
  return toProtoJson(type, message);
}

/** The yaml package's message without its position suffix (we print positions ourselves). */
function yamlReason(message: string): string {
  return message.replace(/ at line \d+, column \d+:?[\s\S]*$/, '').trim();
}

/**
 * Documents of one file whose errors are listed, and as many whose warnings are; each further one
 * is only counted. A file of a million tiny bad documents (`x\n---\n` repeated) is a few MiB,
 * under any size cap, and every problem listed costs memory and time downstream (status,
 * comparison, logs, /debug/sources) on every read of it.
 */
export const MAX_DOCUMENTS_WITH_PROBLEMS_LISTED = 100;

/**
 * Rejected documents after which the rest of a file is not read: parsing alone costs time for
 * each one, and a file this broken holds nothing worth waiting for (it keeps serving what it
 * served before, as any file with errors does).
 */
export const MAX_REJECTED_DOCUMENTS = 10_000;

/** Why a document that is not a map is refused. */
const NOT_A_MAP = 'a document must be a map with apiVersion, kind, metadata and spec';

/** What converting a document to JSON data found besides its value. */
type JsonConversion = Pick<YamlJsonResult, 'errors' | 'warnings'>;

/** A conversion that found nothing: a document that was JSON data already. */
const NO_ISSUES: JsonConversion = { errors: [], warnings: [] };

class DocumentReader {
  readonly resources: ConfigResource[] = [];
  readonly errors: MeshmuxError[] = [];
  readonly warnings: MeshmuxError[] = [];

  private readonly budget: AliasBudget;
  private documentsWithErrors = 0;
  private documentsWithWarnings = 0;
  /** The last document read. */
  private lastIndex = -1;

  constructor(
    private readonly options: ReadYamlOptions,
    private readonly lines: LineCounter,
  ) {
    this.budget = new AliasBudget(options.aliasLimit);
  }

  private lineOf(offset: number): number {
    return this.lines.linePos(offset).line;
  }

  /** Reads one document, listing its problems while the file has not listed too many. */
  read(doc: Document.Parsed, index: number): void {
    const errors = this.errors.length;
    const warnings = this.warnings.length;
    this.lastIndex = index;
    this.readDocument(doc, index);
    if (this.errors.length > errors && ++this.documentsWithErrors > MAX_DOCUMENTS_WITH_PROBLEMS_LISTED) {
      this.errors.length = errors;
    }
    if (
      this.warnings.length > warnings &&
      ++this.documentsWithWarnings > MAX_DOCUMENTS_WITH_PROBLEMS_LISTED
    ) {
      this.warnings.length = warnings;
    }
  }

  /**
   * Reads a document that is JSON data already as {@link read} reads its JSON text, when that text
   * is the whole input: as document 0, which starts on line 1.
   */
  readJson(value: JsonValue): void {
    this.lastIndex = 0;
    // `null` is an empty document, skipped; any other value but an object is not a document.
    if (value === null) return;
    if (!isPlainObject(value)) {
      this.errors.push(new MeshmuxError('SCHEMA', NOT_A_MAP, { file: this.options.file, doc: 0, line: 1 }));
      return;
    }
    this.readValueAlone(value, NO_ISSUES, 0, 1);
  }

  /** Whether the file has rejected so many documents that the rest of it is not read. */
  get full(): boolean {
    return this.documentsWithErrors >= MAX_REJECTED_DOCUMENTS;
  }

  /** What the file yields, once every document is read or it is {@link full}. */
  result(): ReadYamlResult {
    const file = this.options.file;
    const unlisted = (count: number) => count - MAX_DOCUMENTS_WITH_PROBLEMS_LISTED;
    if (unlisted(this.documentsWithErrors) > 0) {
      const stopped = this.full
        ? `; nothing after document ${this.lastIndex} is read once ${MAX_REJECTED_DOCUMENTS} are rejected`
        : '';
      this.errors.push(
        new MeshmuxError(
          'LIMIT',
          `${unlisted(this.documentsWithErrors)} more documents rejected; the first ` +
            `${MAX_DOCUMENTS_WITH_PROBLEMS_LISTED} with errors are listed${stopped}`,
          { file },
        ),
      );
    }
    if (unlisted(this.documentsWithWarnings) > 0) {
      this.warnings.push(
        new MeshmuxError(
          'LIMIT',
          `${unlisted(this.documentsWithWarnings)} more documents with warnings; the first ` +
            `${MAX_DOCUMENTS_WITH_PROBLEMS_LISTED} are listed`,
          { file },
        ),
      );
    }
    return { resources: this.resources, errors: this.errors, warnings: this.warnings };
  }

  private readDocument(doc: Document.Parsed, index: number): void {
    const contents = doc.contents;
    const start = this.lineOf(contents?.range[0] ?? doc.range[0]);
    const where: ErrorLocation = { file: this.options.file, doc: index, line: start };

    if (doc.errors.length > 0) {
      for (const e of doc.errors) {
        const { line, col } = this.lines.linePos(e.pos[0]);
        this.errors.push(
          new MeshmuxError(
            'YAML_SYNTAX',
            `invalid YAML: ${yamlReason(e.message)} (column ${col})`,
            { ...where, line },
            { cause: e },
          ),
        );
      }
      return;
    }
    for (const w of doc.warnings) {
      if (IGNORED_YAML_WARNINGS.has(w.code)) continue;
      const { line } = this.lines.linePos(w.pos[0]);
      this.warnings.push(
        new MeshmuxError('YAML_SYNTAX', yamlReason(w.message), { ...where, line }, { cause: w }),
      );
    }
    // An empty document (only comments, a bare `---`, or `~`) is skipped, as Kubernetes skips it.
    if (contents === null) return;
    if (isScalar(contents) && yamlToJson(contents, doc, '', this.budget).value === null) return;
    if (!isMap(contents)) {
      this.errors.push(new MeshmuxError('SCHEMA', NOT_A_MAP, where));
      return;
    }

    const converted = yamlToJson(contents, doc, '', this.budget);
    const value = converted.value;
    if (value === undefined) {
      // The document could not be converted at all (its aliases spent the file's budget): say
      // why, rather than that it has no apiVersion.
      for (const e of converted.errors) {
        this.errors.push(
          new MeshmuxError('LIMIT', e.reason, e.path === '' ? where : { ...where, field: e.path }),
        );
      }
      return;
    }
    this.readValueAlone(value, converted, index, start);
  }

  /**
   * {@link readValue}, where a failure nothing foresaw is this document's error alone: the
   * documents before and after it are still read.
   */
  private readValueAlone(value: JsonValue, converted: JsonConversion, index: number, start: number): void {
    try {
      this.readValue(value, converted, index, start);
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.errors.push(
        new MeshmuxError(
          'INTERNAL',
          `could not be read: ${reason}`,
          { file: this.options.file, doc: index, line: start },
          { cause: err },
        ),
      );
    }
  }

  /**
   * Reads one document already converted to JSON data (a map: the caller has checked), with the
   * problems its conversion found; `start` is the document's first line.
   */
  private readValue(value: JsonValue, converted: JsonConversion, index: number, start: number): void {
    const where: ErrorLocation = { file: this.options.file, doc: index, line: start };
    const apiVersion = isPlainObject(value) ? ownValue(value, 'apiVersion') : undefined;
    const kindName = isPlainObject(value) ? ownValue(value, 'kind') : undefined;
    if (
      typeof apiVersion !== 'string' ||
      typeof kindName !== 'string' ||
      apiVersion === '' ||
      kindName === ''
    ) {
      this.errors.push(
        new MeshmuxError('UNKNOWN_KIND', 'apiVersion and kind are required and must be strings', {
          ...where,
          field: typeof apiVersion === 'string' && apiVersion !== '' ? 'kind' : 'apiVersion',
        }),
      );
      return;
    }
    const descriptor = this.resolveKind(apiVersion, kindName, where);
    if (descriptor === undefined) return;

    for (const w of converted.warnings) {
      this.warnings.push(new MeshmuxError('YAML_SYNTAX', w.reason, { ...where, field: w.path }));
    }
    if (converted.errors.length > 0 || !isPlainObject(value)) {
      for (const e of converted.errors) {
        this.errors.push(new MeshmuxError('SCHEMA', e.reason, { ...where, field: e.path }));
      }
      return;
    }

    const problems: MeshmuxError[] = [];
    const notes: MeshmuxError[] = [];
    const meta = readObjectMeta(ownValue(value, 'metadata'), this.options.defaultNamespace, problems, notes);
    for (const n of notes) this.warnings.push(n.at(where));
    const encoded = encodeCollecting(descriptor, ownValue(value, 'spec'), problems);
    if (problems.length > 0 || meta === undefined) {
      for (const p of problems) this.errors.push(p.at(where));
      return;
    }
    for (const field of encoded.prunedPaths) {
      this.warnings.push(
        new MeshmuxError('SCHEMA', `unknown field ignored: ${descriptor.kind} has no such field`, {
          ...where,
          field,
        }),
      );
    }
    const stamped = meta.creationTimestamp === undefined;
    const createTime =
      meta.creationTimestamp ??
      this.options.createTimeFor?.(descriptor.key, meta.namespace, meta.name) ??
      timestampFromDate(new Date());
    this.resources.push(
      makeResource({
        kind: descriptor.key,
        namespace: meta.namespace,
        name: meta.name,
        labels: meta.labels,
        annotations: meta.annotations,
        createTime,
        body: encoded.body,
        origin: {
          file: this.options.file,
          doc: index,
          line: start,
          ...(stamped ? { createTimeStamped: true as const } : {}),
        },
      }),
    );
  }

  /** The served kind, or undefined after recording a warning (foreign kind) or an error (Istio-looking). */
  private resolveKind(
    apiVersion: string,
    kindName: string,
    where: ErrorLocation,
  ): KindDescriptor | undefined {
    const found = KINDS.fromApiVersion(apiVersion, kindName);
    if (found !== undefined && found !== KINDS.meshConfig) return found;
    const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
    if (!istioLooking(group)) {
      this.warnings.push(
        new MeshmuxError('UNKNOWN_KIND', `skipped ${kindName} (${apiVersion}): not an Istio config kind`, {
          ...where,
          field: 'kind',
        }),
      );
      return undefined;
    }
    const sameKind = KINDS.kinds.find((k) => k.group === group && k.kind === kindName);
    const hint =
      sameKind === undefined
        ? `${group} has no kind ${kindName} that meshmux serves`
        : `${kindName} is served in versions ${sameKind.versions.join(', ')}`;
    this.errors.push(
      new MeshmuxError('UNKNOWN_KIND', `${apiVersion} ${kindName} is not supported: ${hint}`, {
        ...where,
        field: sameKind === undefined ? 'kind' : 'apiVersion',
      }),
    );
    return undefined;
  }
}

/**
 * The documents of `text`, parsed one at a time as they are taken (a lazy iterator), with the
 * reader that turns them into resources.
 */
function documentsOf(
  text: string,
  options: ReadYamlOptions,
): { docs: Iterable<Document.Parsed>; reader: DocumentReader } {
  const lines = new LineCounter();
  const parser = new Parser(lines.addNewLine);
  // failsafe: every scalar stays text; yaml-to-json.ts resolves it the way Go's YAML library does.
  const composer = new Composer({ schema: 'failsafe', uniqueKeys: false });
  return { docs: composer.compose(parser.parse(text)), reader: new DocumentReader(options, lines) };
}

/**
 * Reads every document of a YAML text. Documents are numbered from 0 in stream order (empty ones
 * included, so numbers match an editor's view); each error and warning carries `file`, that
 * index, the document's first line (a syntax error: its own line) and, where known, the field path.
 * Never throws for bad input. Runs to the end without yielding: for files from outside, prefer
 * `readYamlDocumentsAsync`.
 */
export function readYamlDocuments(text: string, options: ReadYamlOptions): ReadYamlResult {
  const { docs, reader } = documentsOf(text, options);
  let index = 0;
  for (const doc of docs) {
    reader.read(doc, index++);
    if (reader.full) break;
  }
  return reader.result();
}

/**
 * Reads one document that is JSON data already (as `JSON.parse` returns it: no `undefined`, no
 * infinite numbers) without writing or parsing any text: the result `readYamlDocuments` gives for
 * `JSON.stringify(value)`, the same resources (bodies and versions byte-identical), errors and
 * warnings, located as in that text (document 0, line 1), save one difference: a number `-0` is
 * read as `-0`, where its text `0` reads as `0`. Never throws for bad input. Runs to the end on
 * this thread: the caller bounds the value's size and depth.
 */
export function readJsonDocument(value: JsonValue, options: ReadYamlOptions): ReadYamlResult {
  const reader = new DocumentReader(options, new LineCounter());
  reader.readJson(value);
  return reader.result();
}

/**
 * `readYamlDocuments` on this thread that parses and reads one document at a time and lets the
 * event loop run whenever it has worked for `sliceMs`, so a large or hostile file delays other
 * work by about one slice plus one document. Same result as `readYamlDocuments` for the same
 * text. For files from outside prefer `readYamlDocumentsAsync`, which reads on a worker thread.
 */
export async function readYamlDocumentsInSlices(
  text: string,
  options: ReadYamlAsyncOptions,
): Promise<ReadYamlResult> {
  const now = options.now ?? (() => performance.now());
  const sliceMs = options.sliceMs ?? 10;
  const { docs, reader } = documentsOf(text, options);
  let sliceStart = now();
  let index = 0;
  for (const doc of docs) {
    reader.read(doc, index++);
    if (reader.full) break;
    if (now() - sliceStart >= sliceMs) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = now();
    }
  }
  return reader.result();
}

/** The process's one YAML reading worker, started by the first read. */
const SHARED_POOL = new YamlWorkerPool();

/**
 * The result `readYamlDocuments` gives for `text`, read on a worker thread (yaml-worker-pool.ts),
 * so the main event loop is only busy rebuilding the finished result. Same resources (bodies and
 * versions byte-identical; `createTimeFor` is called here, in document order), same error and
 * warning messages and locations; errors carry no `cause` from the parser. A file the worker
 * cannot finish (it runs out of its memory cap, or dies) yields one error naming the file, never
 * a rejection. `sliceMs` and `now` are not used: the worker never needs to yield.
 */
export function readYamlDocumentsAsync(text: string, options: ReadYamlAsyncOptions): Promise<ReadYamlResult> {
  return SHARED_POOL.read(text, options);
}
