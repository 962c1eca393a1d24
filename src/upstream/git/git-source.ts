import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Observable, type SchedulerLike, type Subscriber } from '../../core/rx.js';
import { MeshmuxError, toMeshmuxError } from '../../core/errors.js';
import { componentLogger, type Logger } from '../../core/logger.js';
import { resourceKey, type ConfigResource } from '../../core/resource.js';
import type { SourceDescriptor, SourceEvent, SourceState } from '../../core/source-event.js';
import { DEFAULT_MAX_FILE_BYTES } from '../runtime/input-limits.js';
import { FirstSeenTimes } from '../runtime/first-seen-times.js';
import { sourceClock, type SourceClock } from '../runtime/source-clock.js';
import { SourceStatusTracker } from '../runtime/source-status-tracker.js';
import { readYamlBytes } from '../runtime/yaml-file-reader.js';
import {
  nextYamlFileSet,
  restoredYamlFileSet,
  sameRead,
  type YamlFileRead,
  type YamlFileSet,
} from '../runtime/yaml-file-set.js';
import type { PushAnswer, PushNotification, UpstreamSource } from '../upstream-source.js';
import { gitWebhookRefusal, handleGitWebhook } from './git-webhook.js';
import { RecentDeliveries } from './recent-deliveries.js';
import { gitAuthFor, type GitCredentials } from './git-credentials.js';
import { GitMirror } from './git-mirror.js';
import type { CommitInfo } from './git-objects.js';
import { redactUrl } from './git-url.js';
import { DEFAULT_REPO_PATHS, repoPathMatcher } from './repo-path-matcher.js';

export interface GitSourceOptions {
  readonly name: string;
  /** Remote URL: https, http, ssh, git, file or scp-like. */
  readonly url: string;
  /** Branch, tag, full ref or full commit id. */
  readonly ref: string;
  /** Repository path globs; default {@link DEFAULT_REPO_PATHS}. */
  readonly paths?: readonly string[];
  readonly defaultNamespace: string;
  /** Polling period; also the retry period after a failure. */
  readonly intervalMs: number;
  /** Hold a whole commit back when any of its documents is invalid. Default false. */
  readonly strict?: boolean;
  /** Longest a fetch may take. Default 120 s. */
  readonly timeoutMs?: number;
  readonly credentials?: GitCredentials;
  /** Where the webhook secret comes from; without one, webhooks are refused unless `insecureWebhook`. */
  readonly webhookSecret?: { readonly file?: string | undefined; readonly env?: string | undefined };
  /** Accept unsigned webhooks when no secret is configured. Default false. */
  readonly insecureWebhook?: boolean;
  /** Folder of the shared bare repositories; default `<os tmp>/meshmux-git`. */
  readonly cacheDir?: string | undefined;
  /**
   * Largest blob read, bytes; a larger one is an error naming its path and the cap (it is never
   * read), and the file keeps serving what it held. Default {@link DEFAULT_MAX_FILE_BYTES}.
   */
  readonly maxFileBytes?: number | undefined;
  /** Times polls and retries, and stamps fetches; default the wall clock. */
  readonly scheduler?: SchedulerLike | undefined;
  /**
   * Gives what the source served before a restart (its persisted record's objects, each naming its
   * repository path in `origin.file`), asked for once it starts: until a commit is served, a file
   * with errors keeps serving what it held then.
   */
  readonly restored?: (() => Iterable<ConfigResource> | undefined) | undefined;
}

/** Problems logged one by one per commit; the rest are counted (all are on /debug/git). */
const MAX_LOGGED_ERRORS = 20;

/** A commit and when meshmux took it. */
export interface CommitMark {
  readonly commit: string;
  readonly at: string;
}

/** What `/debug/git` shows for one git source. A fresh plain object; the caller may keep it. */
export interface GitSourceStatus {
  readonly name: string;
  readonly url: string;
  readonly ref: string;
  readonly strict: boolean;
  readonly paths: readonly string[];
  /** `stopped` while nothing subscribes to the source. */
  readonly state: SourceState | 'stopped';
  /** The commit the last successful fetch found. */
  readonly lastFetched?: CommitMark;
  /** The commit whose objects are served. */
  readonly lastServed?: CommitMark;
  /** A newer commit held back by `strict`, with its invalid document count. */
  readonly held?: CommitMark & { readonly invalidDocuments: number };
  readonly lastFetchAttempt?: string;
  /** Why the last fetch or read failed; cleared by the next success. */
  readonly lastError?: string;
  /** Files and objects of the served commit. */
  readonly files: number;
  readonly objects: number;
  /** Problems of the last read commit, by repository path. */
  readonly fileErrors: Readonly<Record<string, readonly string[]>>;
}

/**
 * What one file of one commit yields: its valid objects, plus (when it has errors) those kept
 * from the served version of the file. Shared between commits while the blob is unchanged.
 */
interface FileResult extends YamlFileRead {
  readonly path: string;
  readonly oid: string;
}

/** The state one commit yields once its files are combined. */
interface CommitState {
  readonly commit: CommitInfo;
  /** The commit's files as one set, which the next commit's is built from. */
  readonly set: YamlFileSet<FileResult>;
  readonly files: ReadonlyMap<string, FileResult>;
  readonly resources: readonly ConfigResource[];
  readonly errors: readonly MeshmuxError[];
  readonly warnings: readonly MeshmuxError[];
  /** Invalid documents in the commit itself, before any object was kept from an older one. */
  readonly invalidDocuments: number;
}

const DEFAULT_TIMEOUT_MS = 120_000;

/**
 * Serves the Istio YAML of one ref of a git repository, one whole commit at a time: each commit
 * is read from git's object store and yields one snapshot (revision = commit id), so istiod never
 * sees half a commit. Per document: an invalid document is rejected and reported with its file
 * and line, and the objects its file held in the served commit stay served. With `strict`, any
 * invalid document holds the whole commit back and the last good commit stays served.
 *
 * Each object's `origin` carries its repository path and, as `upstreamVersion`, the commit in
 * which this source first saw its current content, so a commit that leaves an object unchanged
 * does not re-version it (and does not push it to every istiod again).
 *
 * Fetch failures (unreachable remote, deleted branch, bad credentials) are `stale` (or `failing`
 * before the first commit) status events; the last good commit stays served and the fetch is
 * retried every interval. `fetchNow` (the webhook) fetches at once. A start while the remote is
 * unreachable serves the commit the local mirror last fetched for the ref (it outlives restarts),
 * reported `stale` with the fetch error, until a fetch works again; not when the remote refused
 * the source's credentials (the mirror is shared by every source on the URL).
 */
export class GitSource implements UpstreamSource {
  readonly descriptor: SourceDescriptor;
  readonly events$: Observable<SourceEvent>;
  /** A forge's push webhook: a signed (or, without a secret, any) notification makes it fetch now. */
  readonly notify = (notification: PushNotification): Promise<PushAnswer> =>
    handleGitWebhook(this, notification);
  /** The mirror's commit, the last fetch and its outcome, for `/debug/git`. */
  readonly details = (): GitSourceStatus => this.status();
  readonly refresh = (reason: string): void => void this.fetchNow(reason);
  private readonly runs = new Set<GitSourceRun>();

  constructor(private readonly options: GitSourceOptions) {
    this.descriptor = { name: options.name, type: 'git', defaultNamespace: options.defaultNamespace };
    // Only the first run follows the restart: a later one would bring back what was deleted since.
    let restored = options.restored;
    this.events$ = new Observable<SourceEvent>((subscriber) => {
      const run = new GitSourceRun({ ...options, restored }, subscriber);
      restored = undefined;
      this.runs.add(run);
      run.start();
      return () => {
        this.runs.delete(run);
        run.stop();
      };
    });
  }

  /** Whether something subscribes to the source: only then does it fetch. */
  get running(): boolean {
    return this.runs.size > 0;
  }

  /**
   * Makes every running subscription fetch at once, or right after the fetch under way (requests
   * coalesce: many requests during one fetch cause one more). Resolves once each has finished a
   * fetch begun after this call; at once when nothing subscribes. Never rejects.
   */
  async fetchNow(reason = 'requested'): Promise<void> {
    await Promise.all([...this.runs].map((run) => run.fetchNow(reason)));
  }

  /** Whether a webhook secret is configured (a file or a variable). */
  get hasWebhookSecret(): boolean {
    const secret = this.options.webhookSecret;
    return secret?.file !== undefined || secret?.env !== undefined;
  }

  /** What every notification is answered, before its body is read, while no webhook is configured. */
  readonly notificationRefusal = (): PushAnswer | undefined => gitWebhookRefusal(this);

  /** Whether unsigned webhooks are accepted (no secret configured, and the source says so). */
  get insecureWebhook(): boolean {
    return this.options.insecureWebhook === true;
  }

  /** Delivery ids of recent webhooks: a redelivery within the window is not fetched again. */
  readonly deliveries = new RecentDeliveries();

  /** The ref this source serves, as configured. */
  get ref(): string {
    return this.options.ref;
  }

  /** The webhook secret, read now (so a rotated file applies at once); undefined when none is configured. */
  async webhookSecret(): Promise<string | undefined> {
    const secret = this.options.webhookSecret;
    if (secret?.file !== undefined) return (await readFile(secret.file, 'utf8')).trim();
    if (secret?.env !== undefined) {
      const value = process.env[secret.env];
      if (value === undefined || value === '') {
        throw new MeshmuxError('CONFIG', `environment variable ${secret.env} is not set`);
      }
      return value;
    }
    return undefined;
  }

  /** The status of the first running subscription, or a `stopped` one. */
  status(): GitSourceStatus {
    for (const run of this.runs) return run.status();
    return {
      name: this.options.name,
      url: redactUrl(this.options.url),
      ref: this.options.ref,
      strict: this.options.strict ?? false,
      paths: this.options.paths ?? DEFAULT_REPO_PATHS,
      state: 'stopped',
      files: 0,
      objects: 0,
      fileErrors: {},
    };
  }
}

/** One subscription's polling loop and state. */
class GitSourceRun {
  private readonly log: Logger;
  private readonly mirror: GitMirror;
  private readonly include: (path: string) => boolean;
  private readonly firstSeen = new FirstSeenTimes();
  private readonly tracker: SourceStatusTracker;
  private readonly clock: SourceClock;
  private cancelTimer: (() => void) | undefined;
  private running = false;
  /** Resolvers of fetchNow() calls waiting for a fetch that has not begun yet. */
  private pending: Array<() => void> = [];
  private stopped = false;
  /** Why the last fetch or read failed; cleared by the next one that works. */
  private failure: MeshmuxError | undefined;
  private lastFetchAttempt: Date | undefined;
  private lastFetched: { info: CommitInfo; at: Date } | undefined;
  /** The last commit read (served or held), so an unchanged ref is not read again. */
  private lastRead: CommitState | undefined;
  private served: { state: CommitState; at: Date } | undefined;
  private held: { state: CommitState; at: Date } | undefined;
  /** What a restart restored, until a commit is served. */
  private restored: Iterable<ConfigResource> | undefined;

  constructor(
    private readonly options: GitSourceOptions,
    private readonly subscriber: Subscriber<SourceEvent>,
  ) {
    this.log = componentLogger('git-source', {
      source: options.name,
      url: redactUrl(options.url),
      ref: options.ref,
    });
    this.mirror = GitMirror.of(options.url, options.cacheDir ?? path.join(tmpdir(), 'meshmux-git'));
    this.include = repoPathMatcher(options.paths ?? DEFAULT_REPO_PATHS);
    this.tracker = new SourceStatusTracker((event) => this.subscriber.next(event));
    this.clock = sourceClock(options.scheduler);
    this.restored = options.restored?.();
  }

  start(): void {
    this.tracker.connecting();
    this.runCycle('start');
  }

  stop(): void {
    this.stopped = true;
    this.cancelTimer?.();
    for (const resolve of this.pending.splice(0)) resolve();
  }

  /** Fetches at once, or right after the fetch under way; resolves when a fetch begun after the call has ended. */
  fetchNow(reason: string): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const done = new Promise<void>((resolve) => this.pending.push(resolve));
    if (!this.running) this.runCycle(reason);
    return done;
  }

  /** Runs one cycle, then the next one at once if requests arrived meanwhile, else after the interval. */
  private runCycle(reason: string): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.running = true;
    const waiting = this.pending.splice(0);
    this.log.debug({ reason }, 'fetching');
    this.cycle()
      .catch((err: unknown) => {
        // cycle() reports its own failures; anything here is a bug, still kept off the stream.
        this.log.error({ err: String(err) }, 'git source cycle failed unexpectedly');
      })
      .finally(() => {
        this.running = false;
        for (const resolve of waiting) resolve();
        if (this.stopped) return;
        if (this.pending.length > 0) {
          this.runCycle('requested during a fetch');
          return;
        }
        this.cancelTimer = this.clock.after(this.options.intervalMs, () => this.runCycle('interval'));
      });
  }

  status(): GitSourceStatus {
    const mark = (m: { at: Date; sha: string } | undefined): CommitMark | undefined =>
      m === undefined ? undefined : { commit: m.sha, at: m.at.toISOString() };
    const fetched = mark(this.lastFetched && { sha: this.lastFetched.info.sha, at: this.lastFetched.at });
    const served = mark(this.served && { sha: this.served.state.commit.sha, at: this.served.at });
    const held = mark(this.held && { sha: this.held.state.commit.sha, at: this.held.at });
    const fileErrors: Record<string, string[]> = {};
    for (const f of this.lastRead?.files.values() ?? []) {
      if (f.errors.length > 0) fileErrors[f.path] = f.errors.map((e) => e.describe());
    }
    return {
      name: this.options.name,
      url: redactUrl(this.options.url),
      ref: this.options.ref,
      strict: this.options.strict ?? false,
      paths: this.options.paths ?? DEFAULT_REPO_PATHS,
      state: this.tracker.state,
      ...(fetched === undefined ? {} : { lastFetched: fetched }),
      ...(served === undefined ? {} : { lastServed: served }),
      ...(held === undefined || this.held === undefined
        ? {}
        : { held: { ...held, invalidDocuments: this.held.state.invalidDocuments } }),
      ...(this.lastFetchAttempt === undefined
        ? {}
        : { lastFetchAttempt: this.lastFetchAttempt.toISOString() }),
      ...(this.failure === undefined ? {} : { lastError: this.failure.describe() }),
      files: this.served?.state.files.size ?? 0,
      objects: this.served?.state.resources.length ?? 0,
      fileErrors,
    };
  }

  /** Now, by the source's clock. */
  private clockDate(): Date {
    return new Date(this.clock.now());
  }

  /** One fetch, and a read when the ref moved. Never rejects: failures become status events. */
  private async cycle(): Promise<void> {
    this.lastFetchAttempt = this.clockDate();
    let commit: CommitInfo;
    try {
      const auth = await gitAuthFor(this.options.url, this.options.credentials ?? {});
      commit = await this.mirror.fetch(this.options.ref, auth, this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    } catch (err) {
      const error = toMeshmuxError(err, 'UNAVAILABLE', { file: redactUrl(this.options.url) });
      // Refused credentials are not an outage: what another source fetched with its own is not served.
      if (this.lastRead === undefined && error.code !== 'PERMISSION_DENIED')
        await this.serveFromMirror(error);
      this.fail(error, 'fetch failed');
      return;
    }
    if (this.stopped) return;
    const previous = this.lastFetched?.info.sha;
    this.lastFetched = { info: commit, at: this.clockDate() };
    if (commit.sha === this.lastRead?.commit.sha) {
      this.recover();
      return;
    }
    if (previous !== undefined) this.log.info({ from: previous, to: commit.sha }, 'ref moved');
    let next: CommitState;
    try {
      next = await this.readCommit(commit);
    } catch (err) {
      this.fail(
        toMeshmuxError(err, 'UNAVAILABLE', { file: redactUrl(this.options.url) }),
        'cannot read the commit',
      );
      return;
    }
    if (this.stopped) return;
    this.lastRead = next;
    this.failure = undefined;
    if (this.options.strict === true && next.invalidDocuments > 0) this.hold(next);
    else this.serve(next);
  }

  /**
   * The remote cannot be reached and nothing was read yet (a start during an outage): reads the
   * commit the mirror on disk last fetched for the ref, so its objects are served (as `stale`,
   * with the fetch error) instead of nothing. Does nothing when the mirror never fetched the ref.
   */
  private async serveFromMirror(error: MeshmuxError): Promise<void> {
    const commit = await this.mirror.lastFetched(this.options.ref);
    if (commit === undefined || this.stopped) return;
    let state: CommitState;
    try {
      state = await this.readCommit(commit);
    } catch (err) {
      this.log.warn({ commit: commit.sha, err: String(err) }, 'cannot read the last fetched commit');
      return;
    }
    if (this.stopped || this.lastRead !== undefined) return;
    this.log.warn(
      { commit: commit.sha, error: error.describe() },
      'remote unreachable: serving the commit last fetched into the local mirror',
    );
    this.lastRead = state;
    if (this.options.strict === true && state.invalidDocuments > 0) this.hold(state);
    else this.serve(state);
  }

  /** Serves a commit: one snapshot with its objects, errors and warnings. */
  private serve(next: CommitState): void {
    this.served = { state: next, at: this.clockDate() };
    this.held = undefined;
    this.restored = undefined;
    // Creation times are remembered only for what is served, so the map cannot grow without end.
    this.firstSeen.retainOnly(next.resources);
    this.logErrors(next, 'rejected a document');
    this.log.info(
      {
        commit: next.commit.sha,
        files: next.files.size,
        objects: next.resources.length,
        errors: next.errors.length,
      },
      'serving commit',
    );
    this.tracker.serve({
      type: 'snapshot',
      resources: next.resources,
      revision: next.commit.sha,
      errors: next.errors,
      warnings: next.warnings,
    });
  }

  /** Logs the first problems of a commit and counts the rest: a hostile commit can hold thousands. */
  private logErrors(next: CommitState, message: string): void {
    for (const e of next.errors.slice(0, MAX_LOGGED_ERRORS))
      this.log.warn({ commit: next.commit.sha, error: e.describe() }, message);
    if (next.errors.length > MAX_LOGGED_ERRORS) {
      this.log.warn(
        { commit: next.commit.sha, more: next.errors.length - MAX_LOGGED_ERRORS },
        'more problems in this commit; see /debug/git',
      );
    }
  }

  /** Holds a commit with invalid documents back (strict): the served commit stays, the reasons are reported. */
  private hold(next: CommitState): void {
    this.held = { state: next, at: this.clockDate() };
    const served = this.served?.state;
    const summary = new MeshmuxError(
      'SCHEMA',
      `commit ${next.commit.sha} is held back (strict): ${next.invalidDocuments} invalid document(s)` +
        (served === undefined ? '; no commit served yet' : `; still serving ${served.commit.sha}`),
      { file: redactUrl(this.options.url) },
    );
    this.logErrors(next, 'invalid document');
    this.log.warn({ commit: next.commit.sha, invalid: next.invalidDocuments }, 'commit held back (strict)');
    if (served === undefined) {
      this.tracker.failed(summary);
      return;
    }
    this.tracker.serve({
      type: 'snapshot',
      resources: served.resources,
      revision: served.commit.sha,
      errors: [summary, ...next.errors],
      warnings: served.warnings,
    });
  }

  /** The ref did not move and the fetch worked: leaves `stale`/`failing` if a failure had put it there. */
  private recover(): void {
    if (this.failure === undefined) return;
    this.failure = undefined;
    if (this.served === undefined) {
      // Only a strictly held first commit gets here: the source stays failing, for that reason again.
      if (this.held !== undefined) this.hold(this.held.state);
      return;
    }
    this.log.info({ commit: this.served.state.commit.sha }, 'upstream reachable again');
    this.tracker.synced();
  }

  private fail(error: MeshmuxError, what: string): void {
    if (this.stopped) return;
    const changed = error.describe() !== this.failure?.describe() || this.tracker.state === 'synced';
    this.failure = error;
    if (changed) this.log.warn({ error: error.describe(), served: this.served?.state.commit.sha }, what);
    this.tracker.failed(error);
  }

  /** Reads a commit's files, parsing only blobs that the last read commit did not have at that path. */
  private async readCommit(commit: CommitInfo): Promise<CommitState> {
    const listing = await this.mirror.listTree(commit.sha, this.include);
    // Parsed files of the served commit, and of a newer commit read but held back (strict).
    const known = new Map<string, { file: FileResult; served: boolean }>();
    for (const f of this.lastRead?.files.values() ?? [])
      known.set(`${f.path}\0${f.oid}`, { file: f, served: false });
    for (const f of this.served?.state.files.values() ?? [])
      known.set(`${f.path}\0${f.oid}`, { file: f, served: true });
    const maxBytes = this.options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
    const toRead = listing.files.filter((f) => !known.has(`${f.path}\0${f.oid}`));
    const blobs = await this.mirror.readBlobs(toRead.filter((f) => f.size <= maxBytes).map((f) => f.oid));
    const createTimeFor = this.firstSeen.createTimeFor(() => commit.committedAt);
    const reads: Array<[string, FileResult]> = [];
    let invalidDocuments = 0;
    for (const f of listing.files) {
      const cached = known.get(`${f.path}\0${f.oid}`);
      let file: FileResult;
      if (cached !== undefined) {
        // A file parsed for a held commit was never served: its objects take this commit's id.
        file = cached.served
          ? cached.file
          : { ...cached.file, resources: this.withCommit(f.path, cached.file.resources, commit.sha) };
      } else {
        const read = await readYamlBytes({
          file: f.path,
          size: f.size,
          bytes: blobs.get(f.oid),
          maxFileBytes: maxBytes,
          defaultNamespace: this.options.defaultNamespace,
          createTimeFor,
        });
        file = {
          path: f.path,
          oid: f.oid,
          resources: this.withCommit(f.path, read.resources, commit.sha),
          errors: read.errors,
          warnings: read.warnings,
        };
      }
      invalidDocuments += new Set(file.errors.map((e) => e.location.doc ?? -1)).size;
      reads.push([f.path, file]);
    }
    // A file with invalid documents keeps what it held in the served commit: a broken edit never
    // deletes. Before the first commit served after a restart, what it held is the record's.
    const previous =
      this.served?.state.set ??
      (this.restored &&
        restoredYamlFileSet(
          this.restored,
          reads.map(([file]) => file),
        ));
    const set = nextYamlFileSet(previous, reads);
    const symlinks = listing.symlinks.map(
      (p) => new MeshmuxError('DECODE', 'symbolic link skipped: only regular files are read', { file: p }),
    );
    return {
      commit,
      set,
      files: set.files,
      resources: set.resources,
      errors: set.errors,
      warnings: [...symlinks, ...set.warnings],
      invalidDocuments,
    };
  }

  /**
   * The objects `file` yields with their provenance: the repository path (set by the reader) and
   * the commit. An object equal to the one the file held in the served commit (same content, same
   * place) is that instance, with the served one's commit.
   */
  private withCommit(file: string, objects: readonly ConfigResource[], sha: string): ConfigResource[] {
    const before = this.served?.state.files.get(file)?.resources ?? [];
    const held = new Map<string, ConfigResource>();
    for (const r of before) held.set(resourceKey(r), r);
    return objects.map((r) => {
      const prev = held.get(resourceKey(r));
      return prev !== undefined && sameRead(prev, r)
        ? prev
        : { ...r, origin: { ...r.origin, upstreamVersion: sha } };
    });
  }
}
