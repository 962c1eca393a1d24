import { watch, type FSWatcher } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { Observable, type SchedulerLike } from 'rxjs';
import { toMeshmuxError } from '../../core/errors.js';
import { componentLogger } from '../../core/logger.js';
import type { SourceDescriptor, SourceEvent } from '../../core/source-event.js';
import { DEFAULT_MAX_FILE_BYTES } from '../runtime/input-limits.js';
import { FirstSeenTimes } from '../runtime/first-seen-times.js';
import { sourceClock } from '../runtime/source-clock.js';
import { SourceStatusTracker } from '../runtime/source-status-tracker.js';
import { listYamlFiles, readYamlBytes, shownPath } from '../runtime/yaml-file-reader.js';
import {
  EMPTY_YAML_FILE_SET,
  nextYamlFileSet,
  type YamlFileRead,
  type YamlFileSet,
} from '../runtime/yaml-file-set.js';
import { revisionOf } from '../runtime/source-revision.js';
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
  /** Times the settle window, the grace period and rescans, and stamps creation times. Default: the wall clock. */
  readonly scheduler?: SchedulerLike | undefined;
}

/** Size and modification time of a file when last read: a file whose stamp differs is read again. */
interface FileStamp {
  readonly mtimeMs: number;
  readonly size: number;
}

/** Errors logged one by one per change of a source's errors; the rest are counted. */
const MAX_LOGGED_ERRORS = 20;

/** The read of a file that held nothing and is read again later. */
const NOTHING: YamlFileRead = { resources: [], errors: [], warnings: [] };

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
      const tracker = new SourceStatusTracker((event) => subscriber.next(event));
      /** What each file serves, as last read. */
      let set: YamlFileSet = EMPTY_YAML_FILE_SET;
      /** Per file, the size and time its entry in `set` was read at; absent means read it again. */
      const stamps = new Map<string, FileStamp>();
      const firstSeen = new FirstSeenTimes();
      let loggedErrors: ReadonlySet<string> = new Set();
      const clock = sourceClock(options.scheduler);
      let watcher: FSWatcher | undefined;
      let cancelSettle: (() => void) | undefined;
      let cancelRescan: (() => void) | undefined;
      let scanning = false;
      let rescanAgain = false;
      let stopped = false;
      let cancelFollowUp: (() => void) | undefined;
      let followUpAt = Infinity;
      /** When each file that held objects was first seen empty or absent. */
      const vanishedSince = new Map<string, number>();
      const settleMs = options.settleMs ?? 25;
      const maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
      const graceMs = options.vanishGraceMs ?? 1_000;
      const createTimeFor = firstSeen.createTimeFor(() => new Date(clock.now()));

      const scanAgainIn = (ms: number): void => {
        const at = clock.now() + ms;
        if (at >= followUpAt) return;
        cancelFollowUp?.();
        followUpAt = at;
        cancelFollowUp = clock.after(ms, () => {
          cancelFollowUp = undefined;
          followUpAt = Infinity;
          runScan();
        });
      };

      /** Whether a file that held objects and now yields none is still within its grace period. */
      const withinGrace = (file: string, prev: YamlFileRead): boolean => {
        if (prev.resources.length === 0) return false;
        const now = clock.now();
        const since = vanishedSince.get(file) ?? now;
        vanishedSince.set(file, since);
        if (now - since >= graceMs) {
          vanishedSince.delete(file);
          return false;
        }
        scanAgainIn(since + graceMs - now);
        return true;
      };

      /** What a file yields now; its previous entry itself when unchanged or to be kept as it is. */
      const readOne = async (file: string, prev: YamlFileRead | undefined): Promise<YamlFileRead> => {
        const info = await stat(file);
        const stamp = stamps.get(file);
        if (prev !== undefined && stamp?.mtimeMs === info.mtimeMs && stamp.size === info.size) return prev;
        stamps.delete(file);
        const shownAs = shownPath(file);
        const readBytes = async (): Promise<Buffer | undefined> => {
          if (info.size > maxFileBytes) return undefined;
          return readAtMost(file, maxFileBytes);
        };
        const bytes = await readBytes();
        if (bytes !== undefined) {
          const after = await stat(file);
          if (after.mtimeMs !== info.mtimeMs || after.size !== info.size || bytes.length !== after.size) {
            // Written to while read: keep what it held and read it again once the writer is done.
            scanAgainIn(settleMs);
            return prev ?? NOTHING;
          }
        }
        const result = await readYamlBytes({
          file: shownAs,
          size: info.size,
          bytes,
          maxFileBytes,
          defaultNamespace: options.defaultNamespace,
          createTimeFor,
        });
        if (result.resources.length === 0 && result.errors.length === 0) {
          if (prev !== undefined && withinGrace(file, prev)) return prev;
        } else {
          vanishedSince.delete(file);
        }
        stamps.set(file, { mtimeMs: info.mtimeMs, size: info.size });
        return result;
      };

      const scan = async (): Promise<void> => {
        const found = await listYamlFiles(options.path);
        const reads: Array<[string, YamlFileRead]> = [];
        const present = new Set(found);
        for (const file of found) {
          const prev = set.files.get(file);
          try {
            reads.push([file, await readOne(file, prev)]);
          } catch (err) {
            stamps.delete(file);
            const error = toMeshmuxError(err, 'UNAVAILABLE', { file });
            reads.push([file, { resources: [], errors: [error], warnings: [] }]);
          }
        }
        for (const [file, prev] of set.files) {
          if (present.has(file)) continue;
          stamps.delete(file);
          if (withinGrace(file, prev)) reads.push([file, prev]);
          else vanishedSince.delete(file);
        }
        reads.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        set = nextYamlFileSet(set, reads);
        emitState();
      };

      const emitState = (): void => {
        const { resources, errors, warnings } = set;
        const revision = revisionOf(resources);
        const described = errors.map((e) => e.describe());
        const fresh = described.filter((d) => !loggedErrors.has(d));
        if (!tracker.serve({ type: 'snapshot', resources, revision, errors, warnings })) return;
        // Each problem is logged once, when it appears. A hostile file can hold thousands of bad
        // documents: the log gets the first few new ones and a count; /debug/sources and the
        // status page list them all.
        for (const error of fresh.slice(0, MAX_LOGGED_ERRORS)) log.warn({ error }, 'rejected a document');
        if (fresh.length > MAX_LOGGED_ERRORS) {
          log.warn({ more: fresh.length - MAX_LOGGED_ERRORS }, 'more documents rejected; see /debug/sources');
        }
        loggedErrors = new Set(described);
        log.info({ objects: resources.length, errors: errors.length, revision }, 'state read');
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
            tracker.failed(error);
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
        cancelSettle?.();
        cancelSettle = clock.after(settleMs, runScan);
      };

      /** The safety net under file-system events: a full scan every `rescanMs`. */
      const rescanMs = options.rescanMs ?? 5_000;
      const armRescan = (): void => {
        cancelRescan = clock.after(rescanMs, () => {
          armRescan();
          runScan();
        });
      };

      tracker.connecting();
      try {
        watcher = watch(options.path, { recursive: true, persistent: false }, onFsEvent);
        watcher.on('error', (err) => log.warn({ err: err.message }, 'file watch failed; relying on rescans'));
      } catch (err) {
        log.warn({ err: String(err) }, 'cannot watch the path; relying on rescans');
      }
      armRescan();
      runScan();

      return () => {
        stopped = true;
        watcher?.close();
        cancelRescan?.();
        cancelSettle?.();
        cancelFollowUp?.();
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
