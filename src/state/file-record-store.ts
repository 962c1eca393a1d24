import {
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  stat,
  unlink,
  writeFile,
  type FileHandle,
} from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import type { ReadList } from '../core/chunked-list.js';
import { MeshmuxError, toMeshmuxError } from '../core/errors.js';
import type { ConfigResource } from '../core/resource.js';
import type { SourceRecord, SourceRecordStore } from '../merge/source-record.js';
import {
  RecordWriteQueue,
  type RecordWriteQueueOptions,
  type RecordWriteStatus,
  type SinkWrite,
} from './record-write-queue.js';
import { journalEntry, listChange, replayJournal } from './record-journal.js';
import { decodeStateFile, STATE_HEADER_BYTES, stateFileChecksum, streamStateFile } from './state-file.js';

const SUFFIX = '.state';
const JOURNAL_SUFFIX = '.journal';
const LOCK = 'lock';
/** A journal grows to half its state file (at least this) before the record is written whole again. */
const JOURNAL_MIN_BYTES = 64 * 1024;
/**
 * How many times its usual bound a journal may grow to with changes a publish waits for (written
 * the quickest way, the whole record left to its schedule); past it such a change is written whole.
 */
const SOON_JOURNAL_BOUNDS = 4;
/** How often the store looks that its files are still where it wrote them. */
const CHECK_MS = 5000;

/** What a store knows of a source's files since it last wrote the record whole. */
interface Written {
  /** The state file's checksum, which journal entries name. */
  readonly base: Buffer;
  readonly baseBytes: number;
  journalBytes: number;
  /** The resources of the last record written (whole or as a change). */
  resources: ReadList<ConfigResource>;
}

/** Where a {@link FileRecordStore} keeps its records, and how often it writes them. */
export interface FileRecordStoreOptions extends RecordWriteQueueOptions {
  readonly dir: string;
  /** How often to look that the files written are still there, and put back any that is not. Default 5 s. */
  readonly checkMs?: number;
}

/** What was found in the folder at start. */
export interface LoadedRecords {
  readonly records: ReadonlyMap<string, SourceRecord>;
  /** Files that could not be believed, each with why; they were ignored. */
  readonly problems: readonly MeshmuxError[];
  /** The etcd cluster the records were read from, when they were, and the revision of that read. */
  readonly cluster?: string;
  readonly revision?: number;
  /** Per source, the revision of its record in etcd, read or not (a record that cannot be is a problem). */
  readonly manifests?: ReadonlyMap<string, number>;
}

/**
 * The merge's records in a local folder, one file per source (`<name>.state`), written atomically
 * (temporary file, fsync, rename, fsync of the folder) so a crash leaves the old file or the new
 * one, never a mix. A change of a few objects is appended to the source's journal instead
 * (`<name>.journal`, see `record-journal.ts`; fsynced), until the journal reaches half the file's
 * size and the record is written whole again; a record with a held update is always written
 * whole. Writes happen later than the change, one at a time, and a source that writes slowly is
 * written less often (at least ten times its last write's duration apart), so the disk work stays
 * bounded whatever the churn. A failing disk is reported and retried; serving goes on.
 *
 * One process owns a folder: a `lock` file names its pid, and a second live process on the same
 * folder gets an error instead of overwriting the first one's state.
 *
 * A file removed or replaced from outside (a cleaner of old temporary files, a hand) would leave a
 * restart nothing to serve until the source answers again, and a source that seldom changes is
 * seldom written: the store keeps each state file and journal open, looks every few seconds that
 * the folder still holds them, and writes back from its open copy any that it does not (the
 * folder and lock too).
 */
export class FileRecordStore implements SourceRecordStore {
  private readonly queue: RecordWriteQueue;
  private readonly written = new Map<string, Written>();
  /**
   * Removals of each source so far: a write that began before one does not note what it wrote,
   * so the source's next write is whole (its file was removed).
   */
  private readonly removals = new Map<string, number>();
  /** Sources whose files are to be removed once no write of them is under way. */
  private readonly removing = new Set<string>();
  /**
   * Each source's journal, open to append from its first entry until it is emptied, removed or the
   * store closes: a change the serving waits for pays a write and an fsync, not an open and a
   * close around them too.
   */
  private readonly journals = new Map<string, FileHandle>();
  /**
   * Each source's state file, open from its load or its last whole write: what to write back should
   * the file be removed from the folder.
   */
  private readonly files = new Map<string, FileHandle>();
  /** Per source, the work on its files under way (a write, a removal, a check), which the next waits for. */
  private readonly busy = new Map<string, Promise<void>>();
  /** Started once the folder's records are read: a check during the read would race it. */
  private checkTimer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;
  /** The last failure of a check, logged once until it changes. */
  private checkError: string | undefined;

  private constructor(private readonly options: FileRecordStoreOptions) {
    this.queue = new RecordWriteQueue(
      {
        write: (source, record, soon) => this.exclusive(source, () => this.write(source, record, soon)),
        where: (source) => this.fileOf(source),
      },
      options,
    );
  }

  /**
   * Creates the folder if needed, takes its lock and reads every record in it. Throws a
   * MeshmuxError (code STATE) when the folder cannot be used at all (not creatable, owned by
   * another live process); unreadable files are reported in `problems` and skipped.
   */
  static async open(
    options: FileRecordStoreOptions,
  ): Promise<{ store: FileRecordStore; loaded: LoadedRecords }> {
    const { dir } = options;
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    } catch (err) {
      throw toMeshmuxError(err, 'STATE', { file: dir });
    }
    const unwritable = await takeLock(dir);
    const store = new FileRecordStore(options);
    if (unwritable !== undefined) {
      // A read-only folder still restores what it holds; writes are tried, reported and retried.
      options.log.error(
        { err: unwritable.describe() },
        'the state folder is not writable: state is restored but not kept',
      );
    }
    const loaded = await store.load();
    store.checkTimer = setInterval(() => {
      store.checking ??= store.check().finally(() => (store.checking = undefined));
    }, options.checkMs ?? CHECK_MS);
    store.checkTimer.unref();
    return { store, loaded };
  }

  get dir(): string {
    return this.options.dir;
  }

  /** Resolves once a record as new as this change is on disk, or its write failed. */
  changed(source: string, read: () => SourceRecord): Promise<void> {
    this.removing.delete(source);
    return this.queue.changed(source, read, true);
  }

  removed(source: string): void {
    this.queue.forget(source);
    this.written.delete(source);
    this.removals.set(source, (this.removals.get(source) ?? 0) + 1);
    this.removing.add(source);
    // After a write already under way, which would put the file back; not once configured again.
    void this.queue.idle(source).then(() =>
      this.exclusive(source, async () => {
        if (!this.removing.delete(source)) return;
        await this.closeJournal(source);
        await this.closeFile(source);
        for (const file of [this.fileOf(source), this.journalOf(source)]) {
          await unlink(file).catch((err: NodeJS.ErrnoException) => {
            if (err.code !== 'ENOENT')
              this.options.log.warn({ source, file, err: err.message }, 'could not remove a state file');
          });
        }
      }),
    );
  }

  /** Per source, its last write or error. */
  report(): RecordWriteStatus[] {
    return this.queue.report();
  }

  /** Writes everything pending now, then stops writing and releases the folder. */
  async close(): Promise<void> {
    clearInterval(this.checkTimer);
    await this.checking;
    await this.queue.close();
    await Promise.all([...this.busy.values()]);
    await Promise.all([...this.journals.keys()].map((source) => this.closeJournal(source)));
    await Promise.all([...this.files.keys()].map((source) => this.closeFile(source)));
    await unlink(path.join(this.options.dir, LOCK)).catch(() => undefined);
  }

  /** Runs `work` on the source's files once the work under way on them has ended. */
  private exclusive<T>(source: string, work: () => Promise<T>): Promise<T> {
    const before = this.busy.get(source) ?? Promise.resolve();
    const run = before.then(work);
    const ended = run.then(
      () => undefined,
      () => undefined,
    );
    this.busy.set(source, ended);
    void ended.then(() => {
      if (this.busy.get(source) === ended) this.busy.delete(source);
    });
    return run;
  }

  /**
   * Puts back the lock, and every state file and journal that is no longer the one this store
   * wrote, from its open copy. A failure is logged (once until it changes) and tried again at the
   * next check; serving goes on.
   */
  private async check(): Promise<void> {
    let failed: MeshmuxError | undefined;
    // Each part on its own: one that cannot be put back leaves the others put back.
    const attempt = async (file: string, work: () => Promise<unknown>): Promise<void> => {
      try {
        await work();
      } catch (err) {
        failed ??= toMeshmuxError(err, 'STATE', { file });
      }
    };
    const lock = path.join(this.options.dir, LOCK);
    await attempt(this.options.dir, () => mkdir(this.options.dir, { recursive: true, mode: 0o700 }));
    await attempt(lock, async () => {
      if ((await present(lock)) !== undefined) return;
      await writeFile(lock, `${process.pid}\n`, { mode: 0o600 });
      this.options.log.warn({ file: lock }, 'the state folder lock was removed from outside: written again');
    });
    for (const source of [...this.files.keys()])
      await attempt(this.fileOf(source), () => this.exclusive(source, () => this.checkSource(source)));
    if (failed === undefined) {
      this.checkError = undefined;
      return;
    }
    if (failed.message !== this.checkError) {
      this.options.log.error(
        { err: failed.describe() },
        'could not put back what was removed from the state folder; tried again at the next check',
      );
    }
    this.checkError = failed.message;
  }

  private async checkSource(source: string): Promise<void> {
    const file = this.files.get(source);
    if (file !== undefined && !(await holds(file, this.fileOf(source)))) {
      this.files.set(source, await this.putBack(source, file, this.fileOf(source), 'r'));
      await file.close().catch(() => undefined);
    }
    const journal = this.journals.get(source);
    if (journal !== undefined && !(await holds(journal, this.journalOf(source)))) {
      this.journals.set(source, await this.putBack(source, journal, this.journalOf(source), 'a+'));
      await journal.close().catch(() => undefined);
    }
  }

  /**
   * Writes the bytes of `from` to `file` atomically, as a whole write does, and returns the new
   * file open with `flags`.
   */
  private async putBack(source: string, from: FileHandle, file: string, flags: string): Promise<FileHandle> {
    const bytes = await readAll(from);
    const temporary = `${file}.${process.pid}.tmp`;
    const handle = await open(temporary, 'w', 0o600);
    try {
      try {
        await writeAll(handle, bytes, 0);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, file);
    } catch (err) {
      await unlink(temporary).catch(() => undefined);
      throw err;
    }
    await this.syncFolder();
    this.options.log.warn(
      { source, file, bytes: bytes.byteLength },
      'a state file was removed or replaced from outside: written back from what this process holds',
    );
    this.options.hooks?.onPutBack?.(source, file);
    return open(file, flags);
  }

  private fileOf(source: string): string {
    return path.join(this.options.dir, `${source}${SUFFIX}`);
  }

  private journalOf(source: string): string {
    return path.join(this.options.dir, `${source}${JOURNAL_SUFFIX}`);
  }

  /**
   * A change of a few objects goes to the journal; with `soon` (a change waits for it before it is
   * served) it does even past the journal's bound, and the record is written whole on the usual
   * schedule after (`again`). A change of most objects is written whole either way: its journal
   * entry would weigh about as much as the record, and lengthen every restart's replay.
   */
  private async write(source: string, record: SourceRecord, soon: boolean): Promise<SinkWrite> {
    const removals = this.removals.get(source);
    const last = this.written.get(source);
    const change =
      last === undefined || record.held !== undefined
        ? undefined
        : listChange(last.resources, record.resources);
    if (last !== undefined && change !== undefined) {
      const entry = journalEntry(last.base, record, change);
      const journalBytes = last.journalBytes + entry.byteLength;
      const bound = Math.max(last.baseBytes / 2, JOURNAL_MIN_BYTES);
      // Awaited changes coming faster than the whole rewrite's schedule would grow the journal
      // without end: past a few bounds, the change is written whole, awaited as it is.
      if (journalBytes <= bound || (soon && journalBytes <= SOON_JOURNAL_BOUNDS * bound)) {
        try {
          await this.append(source, entry, last.journalBytes === 0);
        } catch (err) {
          // Part of the entry may be in the journal: entries after it would not be read back.
          this.written.delete(source);
          throw err;
        }
        last.journalBytes = journalBytes;
        last.resources = record.resources;
        return { bytes: entry.byteLength, again: journalBytes > bound };
      }
    }
    // Forgotten first: should the whole write fail, the next one is whole too.
    this.written.delete(source);
    const { bytes, base } = await this.writeWhole(source, record);
    // The journal named the previous file: a crash before it is emptied leaves entries passed over.
    await this.closeJournal(source);
    await unlink(this.journalOf(source)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
    if (this.removals.get(source) === removals)
      this.written.set(source, { base, baseBytes: bytes, journalBytes: 0, resources: record.resources });
    return { bytes };
  }

  /**
   * Appends one entry to the source's journal and fsyncs it (and the folder, for a new journal),
   * through the journal's open handle. After a failure the handle is closed: the next entry opens
   * the journal again.
   */
  private async append(source: string, entry: Buffer, created: boolean): Promise<void> {
    let handle = this.journals.get(source);
    if (handle === undefined) {
      handle = await open(this.journalOf(source), 'a+', 0o600);
      this.journals.set(source, handle);
    }
    try {
      await writeAll(handle, entry, null);
      await handle.sync();
    } catch (err) {
      await this.closeJournal(source);
      throw err;
    }
    if (created) await this.syncFolder();
  }

  /** Closes the source's state file if it is open. */
  private async closeFile(source: string): Promise<void> {
    const handle = this.files.get(source);
    if (handle === undefined) return;
    this.files.delete(source);
    await handle.close().catch(() => undefined);
  }

  /** Closes the source's journal if it is open (a failure to close is of no consequence: it was fsynced). */
  private async closeJournal(source: string): Promise<void> {
    const handle = this.journals.get(source);
    if (handle === undefined) return;
    this.journals.delete(source);
    await handle.close().catch(() => undefined);
  }

  private syncFolder(): Promise<void> {
    return syncFolder(this.options.dir);
  }

  private async writeWhole(source: string, record: SourceRecord): Promise<{ bytes: number; base: Buffer }> {
    const file = this.fileOf(source);
    const temporary = `${file}.${process.pid}.tmp`;
    const handle = await open(temporary, 'w+', 0o600);
    let bytes = 0;
    let base: Buffer = Buffer.alloc(0);
    try {
      // The payload as it is encoded, after room for the header, then the header.
      let position = STATE_HEADER_BYTES;
      const header = await streamStateFile(record, async (part) => {
        await writeAll(handle, part, position);
        position += part.byteLength;
      });
      await writeAll(handle, header, 0);
      bytes = position;
      base = stateFileChecksum(header);
      await handle.sync();
    } catch (err) {
      await handle.close().catch(() => undefined);
      await unlink(temporary).catch(() => undefined);
      throw err;
    }
    try {
      await rename(temporary, file);
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw err;
    }
    // Kept open: the copy to write back should the file be removed.
    await this.closeFile(source);
    this.files.set(source, handle);
    await this.syncFolder();
    return { bytes, base };
  }

  private async load(): Promise<LoadedRecords> {
    const records = new Map<string, SourceRecord>();
    const problems: MeshmuxError[] = [];
    const names = await readdir(this.options.dir);
    for (const name of names.sort()) {
      const file = path.join(this.options.dir, name);
      // A temporary file is a write a crash interrupted: the previous file is the one to trust.
      if (name.endsWith('.tmp')) {
        await unlink(file).catch(() => undefined);
        continue;
      }
      if (!name.endsWith(SUFFIX)) continue;
      const expected = name.slice(0, -SUFFIX.length);
      try {
        // Kept open, as a written one is, while the record is believed (closed below if it is not).
        const handle = await open(file, 'r');
        this.files.set(expected, handle);
        const bytes = await readAll(handle);
        const record = decodeStateFile(bytes, file);
        if (record.source !== expected) {
          throw new MeshmuxError('STATE', `holds the state of source "${record.source}", not "${expected}"`, {
            file,
          });
        }
        records.set(record.source, await this.replay(expected, record, stateFileChecksum(bytes), problems));
      } catch (err) {
        await this.closeFile(expected);
        await this.closeJournal(expected);
        const error = toMeshmuxError(err, 'STATE', { file });
        problems.push(error);
        this.options.log.error({ err: error.describe() }, 'ignored a state file that cannot be believed');
        this.options.hooks?.onLoadError?.(file, error);
      }
    }
    return { records, problems };
  }

  /** `record` with the source's journal replayed onto it; a corrupt entry is reported in `problems`. */
  private async replay(
    source: string,
    record: SourceRecord,
    base: Buffer,
    problems: MeshmuxError[],
  ): Promise<SourceRecord> {
    const file = this.journalOf(source);
    let journal: Buffer;
    try {
      // Kept open, as one appended to is: what to write back should it be removed before the next
      // write. Open to read only, so a read-only folder is still restored from: the first write
      // after a start is whole and closes it, so no entry is ever appended through it.
      const handle = await open(file, 'r');
      this.journals.set(source, handle);
      journal = await readAll(handle);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return record;
      throw toMeshmuxError(err, 'STATE', { file });
    }
    const replayed = replayJournal(journal, base, record, file);
    if (replayed.problem !== undefined) {
      problems.push(replayed.problem);
      this.options.log.error(
        { err: replayed.problem.describe() },
        'a state journal is corrupt past an entry',
      );
      this.options.hooks?.onLoadError?.(file, replayed.problem);
    } else if (replayed.cutAt !== undefined) {
      // The write of its last entry was interrupted: the changes before it are the state written.
      this.options.log.warn(
        { file, entries: replayed.entries, cutAt: replayed.cutAt },
        'a state journal ends in a cut entry',
      );
    }
    return replayed.record;
  }
}

/**
 * Takes the folder's lock, or throws when another live process holds it. Returns the error when
 * the lock cannot be written (a read-only folder).
 */
async function takeLock(dir: string): Promise<MeshmuxError | undefined> {
  const lock = path.join(dir, LOCK);
  try {
    const owner = Number((await readFile(lock, 'utf8')).trim());
    if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && alive(owner)) {
      throw new MeshmuxError('STATE', `in use by process ${owner}; give each meshmux its own state.dir`, {
        file: dir,
      });
    }
  } catch (err) {
    if (err instanceof MeshmuxError) throw err;
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw toMeshmuxError(err, 'STATE', { file: lock });
  }
  try {
    await writeFile(lock, `${process.pid}\n`, { mode: 0o600 });
    return undefined;
  } catch (err) {
    return toMeshmuxError(err, 'STATE', { file: lock });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The state folder when the configuration names none: `$MESHMUX_STATE_DIR`, else
 * `$XDG_STATE_HOME/meshmux`, else `~/.local/state/meshmux`; `none` turns persistence off.
 */
export function defaultStateDir(env: NodeJS.ProcessEnv): string {
  const explicit = env['MESHMUX_STATE_DIR'];
  if (explicit !== undefined && explicit !== '') return explicit;
  const xdg = env['XDG_STATE_HOME'];
  if (xdg !== undefined && xdg !== '') return path.join(xdg, 'meshmux');
  const home = env['HOME'] ?? homedir();
  return home === '' || home === '/'
    ? path.join(tmpdir(), 'meshmux-state')
    : path.join(home, '.local', 'state', 'meshmux');
}

/** Where a read-only root can still write: the fallback when the chosen folder cannot be created. */
export function fallbackStateDir(): string {
  return path.join(tmpdir(), 'meshmux-state');
}

/** Fsyncs a folder, so that a file renamed into it survives a crash. */
export async function syncFolder(dir: string): Promise<void> {
  const folder = await open(dir, 'r');
  try {
    await folder.sync();
  } finally {
    await folder.close();
  }
}

/**
 * Writes all of `bytes` at `position`, or at the end of a file opened to append (`null`): a write
 * may take fewer bytes than it was given.
 */
async function writeAll(handle: FileHandle, bytes: Buffer, position: number | null): Promise<void> {
  let done = 0;
  while (done < bytes.byteLength) {
    const at = position === null ? null : position + done;
    const { bytesWritten } = await handle.write(bytes, done, bytes.byteLength - done, at);
    done += bytesWritten;
  }
}

/** The whole of an open file, read from its start whatever the handle's position. */
async function readAll(handle: FileHandle): Promise<Buffer> {
  const { size } = await handle.stat();
  const bytes = Buffer.allocUnsafe(size);
  let done = 0;
  while (done < size) {
    const { bytesRead } = await handle.read(bytes, done, size - done, done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return bytes.subarray(0, done);
}

/** The file's identity, or undefined when there is none at that path. */
async function present(file: string): Promise<{ dev: number; ino: number } | undefined> {
  try {
    return await stat(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Whether `file` is still the file open as `handle` (not removed, nor replaced by another). */
async function holds(handle: FileHandle, file: string): Promise<boolean> {
  const [open, there] = await Promise.all([handle.stat(), present(file)]);
  return there !== undefined && there.dev === open.dev && there.ino === open.ino;
}
