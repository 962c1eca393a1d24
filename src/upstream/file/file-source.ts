import { statSync, watch, type FSWatcher } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import path from 'node:path';
import { Observable, type SchedulerLike } from '../../core/rx.js';
import { MeshmuxError, toMeshmuxError } from '../../core/errors.js';
import { componentLogger, type Logger } from '../../core/logger.js';
import type { ConfigResource, Timestamp } from '../../core/resource.js';
import type { SourceDescriptor, SourceEvent, SourceSnapshotEvent } from '../../core/source-event.js';
import { DEFAULT_MAX_FILE_BYTES } from '../runtime/input-limits.js';
import { FirstSeenTimes } from '../runtime/first-seen-times.js';
import { sourceClock, type SourceClock } from '../runtime/source-clock.js';
import { SourceStatusTracker } from '../runtime/source-status-tracker.js';
import { listYamlFiles, readYamlBytes, shownPath } from '../runtime/yaml-file-reader.js';
import {
  EMPTY_YAML_FILE_SET,
  nextYamlFileSet,
  restoredYamlFileSet,
  withInstancesOf,
  yamlFileSetRevision,
  type YamlFileRead,
  type YamlFileSet,
} from '../runtime/yaml-file-set.js';
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
   * such states for a moment. Also the longest a source's first state waits for a file that is
   * still being written. Default 1 s.
   */
  readonly vanishGraceMs?: number;
  /**
   * Largest file read, bytes; a larger one is an error naming it and the cap, and keeps serving
   * what it held. Default {@link DEFAULT_MAX_FILE_BYTES}.
   */
  readonly maxFileBytes?: number;
  /** Times the settle window, the grace period and rescans, and stamps creation times. Default: the wall clock. */
  readonly scheduler?: SchedulerLike | undefined;
  /**
   * Gives what the source served before a restart (its persisted record's objects, each naming
   * its file in `origin.file`), asked for once it starts: a file whose first read has errors keeps
   * serving what it held then.
   */
  readonly restored?: (() => Iterable<ConfigResource> | undefined) | undefined;
}

/**
 * What identifies a file's content when last read: a file whose stamp differs is read again. Size
 * and modification time alone miss a copy that keeps both (`cp -p`, `rsync -a`, `tar x` of a
 * reproducible build); such a copy still changes the inode (a rename over the file) or the
 * status-change time (a write in place), which no program can set back.
 */
interface FileStamp {
  readonly ino: number;
  readonly ctimeMs: number;
  readonly mtimeMs: number;
  readonly size: number;
}

function stampOf(info: FileStamp): FileStamp {
  return { ino: info.ino, ctimeMs: info.ctimeMs, mtimeMs: info.mtimeMs, size: info.size };
}

function sameStamp(a: FileStamp, b: FileStamp): boolean {
  return a.ino === b.ino && a.ctimeMs === b.ctimeMs && a.mtimeMs === b.mtimeMs && a.size === b.size;
}

/** Errors logged one by one per change of a source's errors; the rest are counted. */
const MAX_LOGGED_ERRORS = 20;

/** What a file not read yet holds (put off while it was being written), until it is read. */
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

  constructor(options: FileSourceOptions) {
    this.descriptor = { name: options.name, type: 'file', defaultNamespace: options.defaultNamespace };
    // Only the first run follows the restart: a later one would bring back what was deleted since.
    let restored = options.restored;
    this.events$ = new Observable<SourceEvent>((subscriber) => {
      const run = new FileSourceRun({ ...options, restored }, (event) => subscriber.next(event));
      restored = undefined;
      run.start();
      return () => run.stop();
    });
  }
}

/** One subscription's watch, scans and state. */
class FileSourceRun {
  private readonly log: Logger;
  private readonly tracker: SourceStatusTracker;
  private readonly clock: SourceClock;
  private readonly firstSeen = new FirstSeenTimes();
  private readonly createTimeFor: (kind: string, namespace: string, name: string) => Timestamp;
  /** What each file serves, as last read. */
  private set: YamlFileSet = EMPTY_YAML_FILE_SET;
  /** What a restart restored, until the first set is built from it. */
  private restored: Iterable<ConfigResource> | undefined;
  /** Per file, the stamp its entry in `set` was read at; absent means read it again. */
  private readonly stamps = new Map<string, FileStamp>();
  /** When each file that held objects was first seen empty or absent. */
  private readonly vanishedSince = new Map<string, number>();
  private loggedErrors: ReadonlySet<string> = new Set();
  /** The failure of the last scan, as logged; undefined after a scan that succeeded. */
  private scanFailure: string | undefined;
  /** The state last handed to the tracker, built from {@link set}. */
  private lastState: SourceSnapshotEvent | undefined;
  private watcher: FSWatcher | undefined;
  /** A folder source's watches, one per folder its last scan listed. */
  private readonly folderWatchers = new Map<string, FSWatcher>();
  private cancelSettle: (() => void) | undefined;
  private cancelRescan: (() => void) | undefined;
  private cancelFollowUp: (() => void) | undefined;
  private followUpAt = Infinity;
  private scanning = false;
  /** Scans begun, the first one included. */
  private scans = 0;
  /** Until when the first state waits for files being written. */
  private firstStateDue = 0;
  private rescanAgain = false;
  private stopped = false;
  private readonly settleMs: number;
  private readonly rescanMs: number;
  private readonly graceMs: number;
  private readonly maxFileBytes: number;

  constructor(
    private readonly options: FileSourceOptions,
    emit: (event: SourceEvent) => void,
  ) {
    this.log = componentLogger('file-source', { source: options.name });
    this.tracker = new SourceStatusTracker(emit);
    this.clock = sourceClock(options.scheduler);
    this.createTimeFor = this.firstSeen.createTimeFor(() => new Date(this.clock.now()));
    this.settleMs = options.settleMs ?? 25;
    this.rescanMs = options.rescanMs ?? 5_000;
    this.graceMs = options.vanishGraceMs ?? 1_000;
    this.maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
    this.restored = options.restored?.();
  }

  start(): void {
    this.firstStateDue = this.clock.now() + this.graceMs;
    this.tracker.connecting();
    try {
      if (statSync(this.options.path).isFile()) {
        this.watcher = this.watchFile();
        this.watcher.on('error', (err) =>
          this.log.warn({ err: err.message }, 'file watch failed; relying on rescans'),
        );
      } else {
        this.watchFolders([this.options.path]);
      }
    } catch (err) {
      this.log.warn({ err: String(err) }, 'cannot watch the path; relying on rescans');
    }
    this.armRescan();
    this.runScan();
  }

  stop(): void {
    this.stopped = true;
    this.watcher?.close();
    for (const watcher of this.folderWatchers.values()) watcher.close();
    this.folderWatchers.clear();
    this.cancelRescan?.();
    this.cancelSettle?.();
    this.cancelFollowUp?.();
  }

  /**
   * Watches a single-file source through its folder: a watch on the file itself follows its
   * inode, which an atomic update (write a copy, rename it over the file) replaces, after which
   * the watch never fires again. In that folder only the file's own name counts, and names
   * starting with `..`: the kubelet updates a ConfigMap key mounted as a file by swapping its
   * `..data` symlink (see {@link listYamlFiles}).
   */
  private watchFile(): FSWatcher {
    const target = this.options.path;
    const name = path.basename(target);
    return watch(path.dirname(target), { persistent: false }, (_event, changed) => {
      if (changed === null || changed === name || changed.startsWith('..')) this.onFsEvent();
    });
  }

  /**
   * Watches each of `folders` (those a scan listed) and no other, one watch each: node's recursive
   * watch reads the tree on each event itself, and on node 24 a subfolder that turned unreadable
   * made it throw out of the process. A folder that appears is seen by its parent's watch, and
   * watched from the scan that follows.
   */
  private watchFolders(folders: readonly string[]): void {
    if (this.stopped) return;
    const wanted = new Set(folders);
    for (const [folder, watcher] of this.folderWatchers) {
      if (wanted.has(folder)) continue;
      watcher.close();
      this.folderWatchers.delete(folder);
    }
    for (const folder of folders) {
      if (this.folderWatchers.has(folder)) continue;
      try {
        const watcher = watch(folder, { persistent: false }, () => this.onFsEvent());
        watcher.on('error', (err) => {
          // A folder gone or no longer readable: the rescans cover it, and the next scan that
          // lists it watches it again.
          this.log.debug({ folder, err: err.message }, 'folder watch ended');
          watcher.close();
          if (this.folderWatchers.get(folder) === watcher) this.folderWatchers.delete(folder);
        });
        this.folderWatchers.set(folder, watcher);
      } catch (err) {
        this.log.debug({ folder, err: String(err) }, 'cannot watch a folder; relying on rescans');
      }
    }
  }

  /** A file-system event: scan once the writer has been quiet for `settleMs`. */
  private onFsEvent(): void {
    this.cancelSettle?.();
    this.cancelSettle = this.clock.after(this.settleMs, () => this.runScan());
  }

  /** The safety net under file-system events: a full scan every `rescanMs`. */
  private armRescan(): void {
    this.cancelRescan = this.clock.after(this.rescanMs, () => {
      this.armRescan();
      this.runScan();
    });
  }

  /** An extra scan `ms` from now, unless one is due sooner. */
  private scanAgainIn(ms: number): void {
    const at = this.clock.now() + ms;
    if (at >= this.followUpAt) return;
    this.cancelFollowUp?.();
    this.followUpAt = at;
    this.cancelFollowUp = this.clock.after(ms, () => {
      this.cancelFollowUp = undefined;
      this.followUpAt = Infinity;
      this.runScan();
    });
  }

  /** Scans now, or once more right after the scan under way. */
  private runScan(): void {
    if (this.stopped) return;
    if (this.scanning) {
      this.rescanAgain = true;
      return;
    }
    this.scanning = true;
    this.scan()
      .then(() => {
        this.scanFailure = undefined;
      })
      .catch((err: unknown) => {
        const error = toMeshmuxError(err, 'UNAVAILABLE', { file: this.options.path });
        // Every rescan meets the same failure again: logged when it appears or changes.
        const described = error.describe();
        if (described !== this.scanFailure) {
          this.log.error({ error: described }, 'cannot read the source path');
        }
        this.scanFailure = described;
        this.tracker.failed(error);
      })
      .finally(() => {
        this.scanning = false;
        if (this.rescanAgain) {
          this.rescanAgain = false;
          this.runScan();
        }
      });
  }

  private async scan(): Promise<void> {
    const startedAt = this.clock.now();
    const first = this.scans++ === 0;
    const { files: found, unreadable, folders } = await listYamlFiles(this.options.path);
    if (folders.length > 0) this.watchFolders(folders);
    const reads: Array<[string, YamlFileRead]> = [];
    const present = new Set(found);
    for (const { folder, error } of unreadable) {
      present.add(folder);
      reads.push([folder, this.unreadableFolder(folder, error)]);
    }
    for (const file of found) {
      const prev = this.set.files.get(file);
      try {
        reads.push([file, await this.readOne(file, prev)]);
      } catch (err) {
        this.stamps.delete(file);
        const error = toMeshmuxError(err, 'UNAVAILABLE', { file });
        reads.push([file, { resources: [], errors: [error], warnings: [] }]);
      }
    }
    for (const [file, prev] of this.set.files) {
      if (present.has(file)) continue;
      // Under a folder that cannot be listed now, a file is unknown, not gone: it keeps what it
      // served, as a file that cannot be read does.
      if (unreadable.some(({ folder }) => file.startsWith(`${folder}${path.sep}`))) {
        reads.push([file, prev]);
        continue;
      }
      this.stamps.delete(file);
      if (this.withinGrace(file, prev)) reads.push([file, prev]);
      else this.vanishedSince.delete(file);
    }
    reads.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    if (this.lastState !== undefined && sameFiles(this.set, reads)) {
      // Every file as it was (a rescan that found nothing new): the set and its state are the
      // last ones, not rebuilt over every object. Served again all the same, for its status.
      this.tracker.serve(this.lastState);
      return;
    }
    // Without what the record held, a broken file's first read after a restart would delete it.
    const previous =
      this.restored === undefined ? this.set : restoredYamlFileSet(this.restored, found, shownPath);
    this.restored = undefined;
    this.set = nextYamlFileSet(previous, reads);
    // The first state waits for every file, as served without one it would delete what a restart
    // restored of it; but for no longer than a file may stay absent, so one written without end
    // does not hold back the others. What the scan read is kept: the next one reads only the rest.
    // The first scan waits however late it began: a busy process may start it past the grace.
    const waiting = this.lastState === undefined && (first || startedAt < this.firstStateDue);
    if (waiting && reads.some(([, read]) => read === NOTHING)) return;
    this.emitState();
  }

  /** What a file yields now; its previous entry itself when unchanged or to be kept as it is. */
  private async readOne(file: string, prev: YamlFileRead | undefined): Promise<YamlFileRead> {
    const info = await stat(file);
    const stamp = this.stamps.get(file);
    if (prev !== undefined && stamp !== undefined && sameStamp(stamp, info)) return prev;
    this.stamps.delete(file);
    // Modified less than `settleMs` ago: its writer may be between two writes, the file holding
    // only the first. Keep what it held and read it once it has been quiet that long. The clock
    // counts whole milliseconds, so a fresh time can lie a little ahead of it; one further off
    // (a file server's clock, a virtual clock) says nothing and is not waited on.
    const age = this.clock.now() - info.mtimeMs;
    if (Math.abs(age) < this.settleMs) return this.readLater(prev, this.settleMs - age);
    const bytes = info.size > this.maxFileBytes ? undefined : await readAtMost(file, this.maxFileBytes);
    if (bytes !== undefined) {
      const after = await stat(file);
      if (!sameStamp(after, info) || bytes.length !== after.size) {
        // Written to while read: keep what it held and read it again once the writer is done.
        return this.readLater(prev, this.settleMs);
      }
    }
    const result = await readYamlBytes({
      file: shownPath(file),
      size: info.size,
      bytes,
      maxFileBytes: this.maxFileBytes,
      defaultNamespace: this.options.defaultNamespace,
      createTimeFor: this.createTimeFor,
    });
    if (result.resources.length === 0 && result.errors.length === 0) {
      if (prev !== undefined && this.withinGrace(file, prev)) return prev;
    } else {
      this.vanishedSince.delete(file);
    }
    this.stamps.set(file, stampOf(info));
    return withInstancesOf(prev, result);
  }

  /**
   * The entry of a folder that cannot be listed: its error alone. The previous entry itself while
   * the error is the same, so a rescan that finds it so again changes nothing and logs nothing.
   */
  private unreadableFolder(folder: string, err: unknown): YamlFileRead {
    const reason = err instanceof Error ? err.message : String(err);
    const error = new MeshmuxError(
      'UNAVAILABLE',
      `cannot list this folder, so its files keep what they served: ${reason}`,
      { file: shownPath(folder) },
      { cause: err },
    );
    const prev = this.set.files.get(folder);
    const same = prev?.errors.length === 1 && prev.errors[0]?.describe() === error.describe();
    return same && prev !== undefined ? prev : { resources: [], errors: [error], warnings: [] };
  }

  /** What a file not read now yields until it is read `ms` from now: what it held, if anything. */
  private readLater(prev: YamlFileRead | undefined, ms: number): YamlFileRead {
    this.scanAgainIn(ms);
    return prev ?? NOTHING;
  }

  /** Whether a file that held objects and now yields none is still within its grace period. */
  private withinGrace(file: string, prev: YamlFileRead): boolean {
    if (prev.resources.length === 0) return false;
    const now = this.clock.now();
    const since = this.vanishedSince.get(file) ?? now;
    this.vanishedSince.set(file, since);
    if (now - since >= this.graceMs) {
      this.vanishedSince.delete(file);
      return false;
    }
    this.scanAgainIn(since + this.graceMs - now);
    return true;
  }

  /** Serves the current set, unless it is what was served last. */
  private emitState(): void {
    const { resources, errors, warnings } = this.set;
    const revision = yamlFileSetRevision(this.set);
    const described = errors.map((e) => e.describe());
    const fresh = described.filter((d) => !this.loggedErrors.has(d));
    this.lastState = { type: 'snapshot', resources, revision, errors, warnings };
    if (!this.tracker.serve(this.lastState)) return;
    // Each problem is logged once, when it appears. A hostile file can hold thousands of bad
    // documents: the log gets the first few new ones and a count; /debug/sources and the
    // status page list them all.
    for (const error of fresh.slice(0, MAX_LOGGED_ERRORS)) this.log.warn({ error }, 'rejected a document');
    if (fresh.length > MAX_LOGGED_ERRORS) {
      this.log.warn(
        { more: fresh.length - MAX_LOGGED_ERRORS },
        'more documents rejected; see /debug/sources',
      );
    }
    this.loggedErrors = new Set(described);
    this.log.info({ objects: resources.length, errors: errors.length, revision }, 'state read');
  }
}

/** Whether `reads` are the entries of `set`'s files, each the very same, and no others. */
function sameFiles(set: YamlFileSet, reads: ReadonlyArray<readonly [string, YamlFileRead]>): boolean {
  if (reads.length !== set.files.size) return false;
  for (const [file, read] of reads) if (set.files.get(file) !== read) return false;
  return true;
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
