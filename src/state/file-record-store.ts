import { mkdir, open, readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { MeshmuxError, toMeshmuxError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { SourceRecord, SourceRecordStore } from '../merge/source-record.js';
import { decodeStateFile, encodeStateFile } from './state-file.js';

const SUFFIX = '.state';
const LOCK = 'lock';
/** Buffers handed to one `writev`. */
const WRITEV_BATCH = 1024;

/** What the store tells telemetry. Called synchronously; must not throw. */
export interface RecordStoreHooks {
  onWrite?(source: string, bytes: number, ms: number): void;
  onWriteError?(source: string, error: MeshmuxError): void;
  onLoadError?(file: string, error: MeshmuxError): void;
}

export interface FileRecordStoreOptions {
  readonly dir: string;
  readonly log: Logger;
  readonly hooks?: RecordStoreHooks;
  /** Wait after a change before writing, so a burst of changes costs one write. Default 1 s. */
  readonly delayMs?: number;
  /** Retry a failed write after this long even without a new change. Default 10 s. */
  readonly retryMs?: number;
}

/** Per source: what the store knows of its last write, for `/debug/state`. */
export interface RecordFileStatus {
  readonly source: string;
  readonly lastWrite?: string;
  readonly bytes?: number;
  readonly writeMs?: number;
  readonly lastError?: string;
}

/** What was found in the folder at start. */
export interface LoadedRecords {
  readonly records: ReadonlyMap<string, SourceRecord>;
  /** Files that could not be believed, each with why; they were ignored. */
  readonly problems: readonly MeshmuxError[];
}

/**
 * The merge's records in a local folder, one file per source (`<name>.state`), written atomically
 * (temporary file, fsync, rename, fsync of the folder) so a crash leaves the old file or the new
 * one, never a mix. Writes happen later than the change, one at a time, and a source that writes
 * slowly is written less often (at least ten times its last write's duration apart), so the disk
 * work stays bounded whatever the churn. A failing disk is reported and retried; serving goes on.
 *
 * One process owns a folder: a `lock` file names its pid, and a second live process on the same
 * folder gets an error instead of overwriting the first one's state.
 */
export class FileRecordStore implements SourceRecordStore {
  private readonly dirty = new Map<string, () => SourceRecord>();
  private readonly status = new Map<string, RecordFileStatus>();
  private readonly earliest = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private closed = false;
  private readonly delayMs: number;
  private readonly retryMs: number;

  private constructor(private readonly options: FileRecordStoreOptions) {
    this.delayMs = options.delayMs ?? 1000;
    this.retryMs = options.retryMs ?? 10_000;
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
    return { store, loaded: await store.load() };
  }

  get dir(): string {
    return this.options.dir;
  }

  changed(source: string, read: () => SourceRecord): void {
    if (this.closed) return;
    this.dirty.set(source, read);
    this.schedule(this.delayMs);
  }

  removed(source: string): void {
    this.dirty.delete(source);
    this.status.delete(source);
    unlink(this.fileOf(source)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT')
        this.options.log.warn({ source, err: err.message }, 'could not remove a state file');
    });
  }

  /** Per source, its last write or error. */
  report(): RecordFileStatus[] {
    return [...this.status.values()];
  }

  /** Writes everything pending now, then stops writing and releases the folder. */
  async close(): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.flushing;
    await this.flush(true);
    this.closed = true;
    await unlink(path.join(this.options.dir, LOCK)).catch(() => undefined);
  }

  private fileOf(source: string): string {
    return path.join(this.options.dir, `${source}${SUFFIX}`);
  }

  private schedule(delayMs: number): void {
    if (this.timer !== undefined || this.flushing !== undefined || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flushing = this.flush(false).finally(() => {
        this.flushing = undefined;
        if (this.dirty.size > 0) this.schedule(this.nextDelay());
      });
    }, delayMs);
    this.timer.unref();
  }

  /** Until the soonest a dirty source may be written again. */
  private nextDelay(): number {
    const now = Date.now();
    let soonest = Infinity;
    for (const source of this.dirty.keys()) soonest = Math.min(soonest, this.earliest.get(source) ?? now);
    return Math.max(this.delayMs, soonest - now);
  }

  /** Writes each dirty source that may be written now (every one when `all`), one at a time. */
  private async flush(all: boolean): Promise<void> {
    for (const [source, read] of [...this.dirty]) {
      if (!all && (this.earliest.get(source) ?? 0) > Date.now()) continue;
      this.dirty.delete(source);
      const started = performance.now();
      try {
        const bytes = await this.write(source, read());
        const ms = performance.now() - started;
        // Slow writes are spaced out: the disk is busy at most a tenth of the time for this source.
        this.earliest.set(source, Date.now() + Math.max(this.delayMs, 10 * ms));
        this.status.set(source, {
          source,
          lastWrite: new Date().toISOString(),
          bytes,
          writeMs: Math.round(ms),
        });
        this.options.hooks?.onWrite?.(source, bytes, ms);
      } catch (err) {
        const error = toMeshmuxError(err, 'STATE', { file: this.fileOf(source) });
        const previous = this.status.get(source);
        if (previous?.lastError !== error.message) {
          this.options.log.error(
            { source, err: error.describe() },
            'could not persist the source state; serving goes on, the write is retried',
          );
        }
        this.status.set(source, { ...previous, source, lastError: error.message });
        this.options.hooks?.onWriteError?.(source, error);
        if (!this.dirty.has(source)) this.dirty.set(source, read);
        this.earliest.set(source, Date.now() + this.retryMs);
      }
    }
  }

  private async write(source: string, record: SourceRecord): Promise<number> {
    const parts = await encodeStateFile(record);
    const file = this.fileOf(source);
    const temporary = `${file}.${process.pid}.tmp`;
    const handle = await open(temporary, 'w', 0o600);
    let bytes = 0;
    try {
      for (let i = 0; i < parts.length; i += WRITEV_BATCH) {
        const { bytesWritten } = await handle.writev(parts.slice(i, i + WRITEV_BATCH));
        bytes += bytesWritten;
      }
      await handle.sync();
    } catch (err) {
      await handle.close().catch(() => undefined);
      await unlink(temporary).catch(() => undefined);
      throw err;
    }
    await handle.close();
    await rename(temporary, file);
    const folder = await open(this.options.dir, 'r');
    try {
      await folder.sync();
    } finally {
      await folder.close();
    }
    return bytes;
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
        const record = decodeStateFile(await readFile(file), file);
        if (record.source !== expected) {
          throw new MeshmuxError('STATE', `holds the state of source "${record.source}", not "${expected}"`, {
            file,
          });
        }
        records.set(record.source, record);
      } catch (err) {
        const error = toMeshmuxError(err, 'STATE', { file });
        problems.push(error);
        this.options.log.error({ err: error.describe() }, 'ignored a state file that cannot be believed');
        this.options.hooks?.onLoadError?.(file, error);
      }
    }
    return { records, problems };
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
