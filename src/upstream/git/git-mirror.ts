import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { MeshmuxError } from '../../core/errors.js';
import { GitCommandError, runGit } from './git-cli.js';
import type { GitAuth } from './git-credentials.js';
import {
  hasCommit,
  listTree,
  readBlobs,
  resolveCommit,
  type CommitInfo,
  type TreeListing,
} from './git-objects.js';
import { isCommitId, mirrorFolderName, redactUrl, secretRedactor } from './git-url.js';

/** What git prints when a remote refuses the credentials given (or asks for some it was not given). */
const CREDENTIALS_REFUSED =
  /could not read (Username|Password)|Authentication failed|Permission denied \(|returned error: 40[13]/i;

/**
 * What git says of a repository whose files were removed or damaged under it (a cleaner of old
 * files in the temporary folder the mirror lives in by default, a full disk during a write).
 * Not `not a git repository`: git also says it of a local remote it cannot open, and whether
 * this one opens is asked of git directly.
 */
const DAMAGED =
  /bad object|missing (blob|tree|commit|object)|unable to read|is corrupt|did not send all necessary objects|invalid object|does not point to a valid object/i;

/** The mirror's own ref that keeps what `ref` named at its last fetch. */
function localRef(ref: string): string {
  return `refs/meshmux/${createHash('sha256').update(ref).digest('hex').slice(0, 24)}`;
}

/**
 * The local bare repository of one remote URL, shared by every git source that reads that URL
 * (whatever their refs). Every git operation on it runs in turn, so two sources polling the same
 * repository never race on its refs or its shallow file. It holds one ref per fetched remote ref
 * (`refs/meshmux/<hash>`), which keeps the last fetched commit's objects from being pruned.
 * The folder outlives the process: a restart fetches only what changed. One process per cache
 * folder: two processes sharing one would serialize nothing between them.
 */
export class GitMirror {
  private static readonly mirrors = new Map<string, GitMirror>();

  /** The mirror of `url` under `cacheDir`; the same instance for the same pair. */
  static of(url: string, cacheDir: string): GitMirror {
    const dir = path.join(path.resolve(cacheDir), mirrorFolderName(url));
    let mirror = GitMirror.mirrors.get(dir);
    if (mirror === undefined) GitMirror.mirrors.set(dir, (mirror = new GitMirror(url, dir)));
    return mirror;
  }

  private queue: Promise<unknown> = Promise.resolve();
  private initialized = false;
  /** A fetch found the repository damaged: it is built again before the fetch is tried again. */
  private damaged = false;

  private constructor(
    readonly url: string,
    /** The bare repository's folder. */
    readonly dir: string,
  ) {}

  /**
   * Fetches `ref` (a branch, tag, full ref or commit id) with depth 1 and resolves to the commit
   * it names. A commit id already present is not fetched again: its content cannot change.
   * The local ref is force-updated, so a rewritten history (force-push) is followed as is.
   * Rejects with a MeshmuxError whose text holds no secret: PERMISSION_DENIED when the remote
   * refused the credentials, UNAVAILABLE otherwise.
   */
  fetch(ref: string, auth: GitAuth, timeoutMs: number): Promise<CommitInfo> {
    return this.exclusive(async () => {
      await this.ensureRepository();
      const local = localRef(ref);
      if (isCommitId(ref) && (await hasCommit(this.dir, ref))) return resolveCommit(this.dir, ref);
      const args = [
        `--git-dir=${this.dir}`,
        'fetch',
        '--quiet',
        '--no-tags',
        '--no-write-fetch-head',
        '--no-recurse-submodules',
        '--depth=1',
        '--end-of-options',
        this.url,
        `+${ref}:${local}`,
      ];
      const options = { env: auth.env, timeoutMs, redact: secretRedactor(this.url, auth.secrets) };
      try {
        await runGit(args, options);
      } catch (err) {
        if (!(await this.repair(err))) throw this.fetchError(ref, err);
        try {
          await runGit(args, options);
        } catch (again) {
          throw this.fetchError(ref, again);
        }
      }
      return resolveCommit(this.dir, local);
    });
  }

  /**
   * Mends what made a fetch fail on this side, and says whether it did (so the fetch is tried once
   * more): a lock file left by a git that died, or a repository damaged under it, built again
   * empty (the next fetch brings the ref's commit whole, as a first one does).
   */
  private async repair(err: unknown): Promise<boolean> {
    const lock = this.staleLock(err);
    if (lock !== undefined) {
      // Git operations on this repository run one at a time, so a lock file seen here was left by
      // a git that died mid-way (a crash, a kill): remove it and try once more.
      await rm(lock, { force: true });
      return true;
    }
    if (!(await this.isDamaged(err))) return false;
    this.damaged = true;
    this.initialized = false;
    await this.ensureRepository();
    return true;
  }

  /** Whether `err` came from this repository being damaged rather than from the remote. */
  private async isDamaged(err: unknown): Promise<boolean> {
    // What the remote says of its own repository (`remote: …`) is no damage of this one.
    const local =
      err instanceof GitCommandError ? err.stderr.split('\n').filter((l) => !/^remote:/i.test(l)) : [];
    if (local.some((line) => DAMAGED.test(line))) return true;
    return !(await this.usable());
  }

  /** Whether the folder holds a repository git can open. */
  private usable(): Promise<boolean> {
    return stat(path.join(this.dir, 'HEAD')).then(
      () =>
        runGit([`--git-dir=${this.dir}`, 'rev-parse', '--is-bare-repository']).then(
          () => true,
          () => false,
        ),
      () => false,
    );
  }

  /**
   * The commit `ref` named at its last successful fetch into this mirror, by this process or an
   * earlier one (the folder outlives restarts); undefined when it was never fetched here. Never
   * touches the network and never rejects.
   */
  lastFetched(ref: string): Promise<CommitInfo | undefined> {
    return this.exclusive(async () => {
      const usable = await stat(path.join(this.dir, 'HEAD')).then(
        () => true,
        () => false,
      );
      if (!usable) return undefined;
      return resolveCommit(this.dir, localRef(ref)).then(
        (commit) => (commit.sha === '' ? undefined : commit),
        () => undefined,
      );
    });
  }

  /** The files of `commit` that `include` accepts. */
  listTree(commit: string, include: (path: string) => boolean): Promise<TreeListing> {
    return this.exclusive(() => listTree(this.dir, commit, include));
  }

  /** Blob contents by object id. */
  readBlobs(oids: readonly string[]): Promise<Map<string, Buffer>> {
    return this.exclusive(() => readBlobs(this.dir, oids));
  }

  /** Runs `task` once every task queued before it has settled. */
  private exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(task, task);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Creates the bare repository on first use; a folder left half-made by a crash, or found damaged,
   * is replaced.
   */
  private async ensureRepository(): Promise<void> {
    if (this.initialized) return;
    if (this.damaged || !(await this.usable())) {
      // Build it beside its final place and rename, so no reader ever sees half a repository.
      await mkdir(path.dirname(this.dir), { recursive: true });
      const building = `${this.dir}.${randomBytes(4).toString('hex')}.tmp`;
      await runGit(['init', '--quiet', '--bare', building]);
      // Objects of commits no longer referenced may be pruned at git's usual pace; refs are ours.
      await runGit([`--git-dir=${building}`, 'config', 'core.logAllRefUpdates', 'false']);
      await rm(this.dir, { recursive: true, force: true });
      await rename(building, this.dir);
      this.damaged = false;
    }
    this.initialized = true;
  }

  /** The lock file inside this repository that git could not create because it exists. */
  private staleLock(err: unknown): string | undefined {
    if (!(err instanceof GitCommandError)) return undefined;
    const lock = /Unable to create '([^']+\.lock)': File exists/.exec(err.stderr)?.[1];
    if (lock === undefined) return undefined;
    const resolved = path.resolve(this.dir, lock);
    return resolved.startsWith(`${this.dir}${path.sep}`) ? resolved : undefined;
  }

  private fetchError(ref: string, err: unknown): MeshmuxError {
    const where = { file: redactUrl(this.url) };
    if (err instanceof GitCommandError) {
      if (/couldn't find remote ref|not our ref|no such remote ref|unadvertised object/i.test(err.stderr)) {
        return new MeshmuxError(
          'UNAVAILABLE',
          `ref "${ref}" does not exist in the repository (deleted or never pushed)`,
          where,
          {
            cause: err,
          },
        );
      }
      // The remote answered and refused these credentials: a problem to fix, not an outage.
      const code = CREDENTIALS_REFUSED.test(err.stderr) ? 'PERMISSION_DENIED' : 'UNAVAILABLE';
      return new MeshmuxError(code, err.message, where, { cause: err });
    }
    if (err instanceof MeshmuxError) return err.at(where);
    return new MeshmuxError('UNAVAILABLE', `fetch failed: ${String(err)}`, where, { cause: err });
  }
}
