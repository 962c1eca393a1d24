import { watch, type FSWatcher } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { Observable } from 'rxjs';
import { MeshmuxError, toMeshmuxError } from '../../core/errors.js';
import { componentLogger } from '../../core/logger.js';
import { resourceKey, timestampFromDate, type ConfigResource, type Timestamp } from '../../core/resource.js';
import type { SourceDescriptor, SourceEvent } from '../../core/source-event.js';
import { decodeUtf8 } from '../../schema/utf8-text.js';
import { readYamlDocumentsAsync } from '../../schema/yaml-reader.js';
import { DEFAULT_MAX_FILE_BYTES, fileTooLarge } from '../input-limits.js';
import { revisionOf } from '../source-revision.js';
import type { UpstreamSource } from '../upstream-source.js';

export interface FileSourceOptions {
  readonly name: string;
  /** A YAML file or a folder searched recursively for `*.yaml`, `*.yml` and `*.json`. */
  readonly path: string;
  readonly defaultNamespace: string;
  /** Full rescan period, a safety net under file-system events. Default 5 s. */
  readonly rescanMs?: number;
  /** Quiet time after a file-system event before rescanning, so an editor's save is read once. Default 25 ms. */
  readonly settleMs?: number;
  /**
   * How long a file that held objects must stay empty or absent before its objects are deleted.
   * Writers that truncate before writing, and editors that remove before renaming, pass through
   * such states for a moment. Default 1 s.
   */
  readonly vanishGraceMs?: number;
  /**
   * Largest file read, bytes; a larger one is an error naming it and the cap, and keeps serving
   * what it held. Default {@link DEFAULT_MAX_FILE_BYTES}.
   */
  readonly maxFileBytes?: number;
}

interface FileResult {
  readonly mtimeMs: number;
  readonly size: number;
  readonly resources: readonly ConfigResource[];
  readonly errors: readonly MeshmuxError[];
  readonly warnings: readonly MeshmuxError[];
}

const YAML_FILE = /\.(ya?ml|json)$/i;

/** Errors logged one by one per change of a source's errors; the rest are counted. */
const MAX_LOGGED_ERRORS = 20;

/** What a file holds, marked to be read again at the next scan whatever its size and time. */
function readAgain(held: Omit<FileResult, 'mtimeMs' | 'size'>): FileResult {
  return { ...held, mtimeMs: -1, size: -1 };
}

/**
 * Serves a file or a folder of Istio YAML. Every change yields the full state of the source.
 * A file that fails to read or holds invalid documents keeps serving the objects it held before
 * that its new content no longer yields, so a half-saved or broken file never deletes config.
 * A file read while it changes is read again, and one that turns empty or disappears keeps its
 * objects until it has stayed so for a grace period.
 * When two files define the same object, the later path wins and the clash is reported.
 */
export class FileSource implements UpstreamSource {
  readonly descriptor: SourceDescriptor;
  readonly events$: Observable<SourceEvent>;

  constructor(private readonly options: FileSourceOptions) {
    this.descriptor = { name: options.name, type: 'file', defaultNamespace: options.defaultNamespace };
    this.events$ = new Observable<SourceEvent>((subscriber) => {
      const log = componentLogger('file-source', { source: options.name });
      const files = new Map<string, FileResult>();
      const firstSeen = new Map<string, Timestamp>();
      let lastRevision: string | undefined;
      let lastErrorText: string | undefined;
      let loggedErrors: ReadonlySet<string> = new Set();
      let watcher: FSWatcher | undefined;
      let settleTimer: NodeJS.Timeout | undefined;
      let scanning = false;
      let rescanAgain = false;
      let stopped = false;
      let followUp: NodeJS.Timeout | undefined;
      let followUpAt = Infinity;
      /** When each file that held objects was first seen empty or absent. */
      const vanishedSince = new Map<string, number>();
      const settleMs = options.settleMs ?? 25;
      const maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
      const graceMs = options.vanishGraceMs ?? 1_000;

      const scanAgainIn = (ms: number): void => {
        const at = Date.now() + ms;
        if (at >= followUpAt) return;
        if (followUp !== undefined) clearTimeout(followUp);
        followUpAt = at;
        followUp = setTimeout(() => {
          followUp = undefined;
          followUpAt = Infinity;
          runScan();
        }, ms);
      };

      /** Whether a file that held objects and now yields none is still within its grace period. */
      const withinGrace = (file: string, prev: FileResult): boolean => {
        if (prev.resources.length === 0) return false;
        const now = Date.now();
        const since = vanishedSince.get(file) ?? now;
        vanishedSince.set(file, since);
        if (now - since >= graceMs) {
          vanishedSince.delete(file);
          return false;
        }
        scanAgainIn(since + graceMs - now);
        return true;
      };

      const createTimeFor = (kind: string, namespace: string, name: string): Timestamp => {
        const key = resourceKey({ kind, namespace, name });
        let ts = firstSeen.get(key);
        if (ts === undefined) firstSeen.set(key, (ts = timestampFromDate(new Date())));
        return ts;
      };

      const readOne = async (file: string, prev: FileResult | undefined): Promise<FileResult> => {
        const info = await stat(file);
        if (prev !== undefined && prev.mtimeMs === info.mtimeMs && prev.size === info.size) return prev;
        const shownAs = path.relative(process.cwd(), file) || file;
        const refused = (error: MeshmuxError): FileResult => ({
          mtimeMs: info.mtimeMs,
          size: info.size,
          // Too large or not UTF-8: nothing of it is read, so everything it held stays.
          resources: prev?.resources ?? [],
          errors: [error],
          warnings: [],
        });
        if (info.size > maxFileBytes) return refused(fileTooLarge(shownAs, info.size, maxFileBytes));
        const bytes = await readAtMost(file, maxFileBytes);
        const after = await stat(file);
        if (after.mtimeMs !== info.mtimeMs || after.size !== info.size || bytes.length !== after.size) {
          // Written to while read: keep what it held and read it again once the writer is done.
          scanAgainIn(settleMs);
          return readAgain(prev ?? { resources: [], errors: [], warnings: [] });
        }
        let text: string;
        try {
          text = decodeUtf8(bytes, shownAs);
        } catch (err) {
          return refused(toMeshmuxError(err, 'YAML_SYNTAX', { file: shownAs }));
        }
        const result = await readYamlDocumentsAsync(text, {
          file: shownAs,
          defaultNamespace: options.defaultNamespace,
          createTimeFor,
        });
        if (result.resources.length === 0 && result.errors.length === 0) {
          if (prev !== undefined && withinGrace(file, prev)) return readAgain(prev);
        } else {
          vanishedSince.delete(file);
        }
        let resources: readonly ConfigResource[] = result.resources;
        if (result.errors.length > 0 && prev !== undefined) {
          // Keep what the broken file held before and no longer yields: a bad edit must not delete.
          const now = new Set(resources.map(resourceKey));
          const kept = prev.resources.filter((r) => !now.has(resourceKey(r)));
          resources = [...resources, ...kept];
        }
        return {
          mtimeMs: info.mtimeMs,
          size: info.size,
          resources,
          errors: result.errors,
          warnings: result.warnings,
        };
      };

      const scan = async (): Promise<void> => {
        const found = await listYamlFiles(options.path);
        const next = new Map<string, FileResult>();
        for (const file of found) {
          const prev = files.get(file);
          try {
            next.set(file, await readOne(file, prev));
          } catch (err) {
            const error = toMeshmuxError(err, 'UNAVAILABLE', { file });
            next.set(file, readAgain({ resources: prev?.resources ?? [], errors: [error], warnings: [] }));
          }
        }
        for (const [file, prev] of files) {
          if (next.has(file)) continue;
          if (withinGrace(file, prev)) next.set(file, readAgain(prev));
          else vanishedSince.delete(file);
        }
        files.clear();
        for (const [f, r] of next) files.set(f, r);
        emitState();
      };

      const emitState = (): void => {
        const byKey = new Map<string, ConfigResource>();
        const errors: MeshmuxError[] = [];
        const warnings: MeshmuxError[] = [];
        for (const file of [...files.keys()].sort()) {
          const result = files.get(file);
          if (result === undefined) continue;
          errors.push(...result.errors);
          warnings.push(...result.warnings);
          for (const r of result.resources) {
            const key = resourceKey(r);
            const earlier = byKey.get(key);
            if (earlier !== undefined && earlier.origin.file !== r.origin.file) {
              warnings.push(
                new MeshmuxError(
                  'METADATA',
                  `${r.kind} ${r.namespace}/${r.name} is also defined in ${earlier.origin.file ?? '?'}; this later file wins`,
                  {
                    file: r.origin.file ?? file,
                    ...(r.origin.doc === undefined ? {} : { doc: r.origin.doc }),
                  },
                ),
              );
            }
            byKey.set(key, r);
          }
        }
        const resources = [...byKey.values()];
        const revision = revisionOf(resources);
        const described = errors.map((e) => e.describe());
        const errorText = described.join('\n');
        if (revision === lastRevision && errorText === lastErrorText) return;
        if (errorText !== lastErrorText) {
          // Each problem is logged once, when it appears. A hostile file can hold thousands of bad
          // documents: the log gets the first few new ones and a count; /debug/sources and the
          // status page list them all.
          const fresh = described.filter((d) => !loggedErrors.has(d));
          for (const error of fresh.slice(0, MAX_LOGGED_ERRORS)) log.warn({ error }, 'rejected a document');
          if (fresh.length > MAX_LOGGED_ERRORS) {
            log.warn(
              { more: fresh.length - MAX_LOGGED_ERRORS },
              'more documents rejected; see /debug/sources',
            );
          }
          loggedErrors = new Set(described);
        }
        lastRevision = revision;
        lastErrorText = errorText;
        log.info({ objects: resources.length, errors: errors.length, revision }, 'state read');
        subscriber.next({ type: 'snapshot', resources, revision, errors, warnings });
      };

      const runScan = (): void => {
        if (stopped) return;
        if (scanning) {
          rescanAgain = true;
          return;
        }
        scanning = true;
        scan()
          .catch((err: unknown) => {
            const error = toMeshmuxError(err, 'UNAVAILABLE', { file: options.path });
            log.error({ error: error.describe() }, 'cannot read the source path');
            subscriber.next({
              type: 'status',
              state: lastRevision === undefined ? 'failing' : 'stale',
              error,
            });
          })
          .finally(() => {
            scanning = false;
            if (rescanAgain) {
              rescanAgain = false;
              runScan();
            }
          });
      };

      const onFsEvent = (): void => {
        if (settleTimer !== undefined) clearTimeout(settleTimer);
        settleTimer = setTimeout(runScan, settleMs);
      };

      subscriber.next({ type: 'status', state: 'connecting' });
      try {
        watcher = watch(options.path, { recursive: true, persistent: false }, onFsEvent);
        watcher.on('error', (err) => log.warn({ err: err.message }, 'file watch failed; relying on rescans'));
      } catch (err) {
        log.warn({ err: String(err) }, 'cannot watch the path; relying on rescans');
      }
      const rescan = setInterval(runScan, options.rescanMs ?? 5_000);
      rescan.unref();
      runScan();

      return () => {
        stopped = true;
        watcher?.close();
        clearInterval(rescan);
        if (settleTimer !== undefined) clearTimeout(settleTimer);
        if (followUp !== undefined) clearTimeout(followUp);
      };
    });
  }
}

/**
 * The bytes of `file`, but never more than `maxBytes + 1` of them: a file that grows past the cap
 * while it is read comes back longer than its size at open and is read again, not held whole.
 */
async function readAtMost(file: string, maxBytes: number): Promise<Buffer> {
  const handle = await open(file, 'r');
  try {
    const size = (await handle.stat()).size;
    const buffer = Buffer.allocUnsafe(Math.min(size, maxBytes) + 1);
    let filled = 0;
    while (filled < buffer.length) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return buffer.subarray(0, filled);
  } finally {
    await handle.close();
  }
}

/** Every YAML/JSON file at or below `root`, sorted; a single file is returned as itself. */
async function listYamlFiles(root: string): Promise<string[]> {
  const info = await stat(root);
  if (info.isFile()) return [root];
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile() && YAML_FILE.test(e.name))
    .map((e) => path.join(e.parentPath, e.name))
    .sort();
}
