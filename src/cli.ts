#!/usr/bin/env node
import { readFileSync, watch } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { filter, firstValueFrom, of, timeout } from './core/rx.js';
import { checkBeyondSchema, startMeshmux, type RunningMeshmux } from './app.js';
import {
  diffPolicies,
  type PolicyDiff,
  type ServedConfiguration,
  type ServedObject,
} from './downstream/policy/policy-diff.js';
import type { PolicyChangesPage } from './downstream/policy/policy-changes.js';
import { PolicySet } from './downstream/policy/policy-set.js';
import type { ConfigSnapshot } from './merge/config-snapshot.js';
import { MeshmuxError } from './core/errors.js';
import {
  componentLogger,
  flushLogs,
  LOG_LEVELS,
  type LogLevel,
  sendLogsToStderr,
  setLogLevel,
} from './core/logger.js';
import { PACKAGE_ROOT } from './core/paths.js';
import {
  configJsonSchema,
  configProblems,
  loadMeshmuxConfig,
  parseMeshmuxConfig,
  readConfigText,
  readMeshmuxConfig,
  type MeshmuxConfig,
} from './settings/meshmux-config.js';
import { ByteSize, Duration } from './settings/sources/common.js';
import { readRepositoryHead } from './upstream/git/git-objects.js';
import { createSource, loadSourceLibraries } from './upstream/source-registry.js';
import { DEFAULT_REPO_PATHS, repoPathMatcher } from './upstream/git/repo-path-matcher.js';
import { MESHMUX_VERSION } from './core/version.js';
import { DEFAULT_MAX_FILE_BYTES } from './upstream/runtime/input-limits.js';
import { FirstSeenTimes } from './upstream/runtime/first-seen-times.js';
import { listYamlFiles, readYamlBytes, shownPath } from './upstream/runtime/yaml-file-reader.js';
import { nextYamlFileSet, type YamlFileRead } from './upstream/runtime/yaml-file-set.js';

const DEFAULT_CONFIG = path.join(PACKAGE_ROOT, 'config', 'meshmux.yaml');

/** The configuration file to read and what its relative paths resolve against. */
function configLocation(file: string | undefined): { file: string; baseDir: string } {
  // Relative paths resolve against the file's own folder, as in Prometheus: the same file means the
  // same thing whatever the working directory (a container's, a service manager's).
  const resolved = path.resolve(file ?? DEFAULT_CONFIG);
  return { file: resolved, baseDir: path.dirname(resolved) };
}

async function serve(options: {
  config?: string;
  xds?: string;
  http?: string;
  admin?: string;
}): Promise<void> {
  const log = componentLogger('cli');
  const location = configLocation(options.config);
  const { config, text: startedFrom } = readMeshmuxConfig(location.file, location.baseDir);
  // The signals are taken before anything starts: one that arrives while meshmux starts (a pod
  // deleted as it comes up) is a clean shutdown once the start is done, never the default action,
  // which kills the process in the middle of whatever it was doing.
  let running: RunningMeshmux | undefined = undefined;
  let requested: string | undefined;
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    if (running === undefined) {
      if (requested === undefined) log.info({ signal }, 'shutting down once started');
      requested = signal;
      return;
    }
    stopping = true;
    log.info({ signal }, 'shutting down');
    // The last lines are written before the exit (within a deadline: a reader that stopped
    // reading cannot hold the exit).
    const exit = (code: number): void => {
      void flushLogs().finally(() => process.exit(code));
    };
    running.stop().then(
      () => exit(0),
      (err: unknown) => {
        log.error({ err: String(err) }, 'shutdown failed');
        exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  // A fault nothing caught leaves state no code expected: the process ends, as Node would end it,
  // but says why on the log the operators read (Node's own report goes to stderr only). What was
  // served is on disk (a change is kept before it is served), so the restart serves it again.
  process.on('uncaughtException', (err, origin) => {
    log.fatal({ err, origin }, 'unexpected error: exiting');
    process.exit(1);
  });
  running = await startMeshmux(config, {
    ...(options.xds === undefined ? {} : { xds: options.xds }),
    ...(options.http === undefined ? {} : { http: options.http }),
    ...(options.admin === undefined ? {} : { admin: options.admin }),
  });
  if (requested !== undefined) {
    stop(requested);
    return;
  }
  const started = running;

  // Hot reload: on a change of the file (or SIGHUP), a valid new configuration is applied; an invalid
  // one (unreadable, not YAML, failing the schema, or failing to build) is reported, counted and
  // shown on the status page, and the running configuration stays.
  let timer: NodeJS.Timeout | undefined;
  // What the file read when a reload was last decided on or run (at first, what meshmux started
  // with); undefined when it could not be read. A change in the folder reloads only when the file
  // now reads otherwise, so an edit is applied once, however many events it makes.
  let lastRead: string | undefined = startedFrom;
  const load = (): MeshmuxConfig => {
    try {
      lastRead = readConfigText(location.file);
    } catch (err) {
      lastRead = undefined;
      throw err;
    }
    return parseMeshmuxConfig(lastRead, location.file, location.baseDir);
  };
  const reload = (why: string): void => {
    log.info({ why, file: location.file }, 'reloading configuration');
    void started.reload(load).then((outcome) => {
      if (outcome.applied) log.info({ why, file: location.file }, 'configuration reloaded');
    });
  };
  const reloadIfChanged = (why: string): void => {
    let now: string | undefined;
    try {
      now = readFileSync(location.file, 'utf8');
    } catch {
      now = undefined;
    }
    if (now === lastRead) {
      log.debug({ why, file: location.file }, 'configuration file unchanged; not reloaded');
      return;
    }
    lastRead = now;
    reload(why);
  };
  try {
    // Every event in the folder is a reason to look, not only one naming the file: Kubernetes
    // mounts a ConfigMap key as a symbolic link through `..data`, and an update writes a new
    // `..<timestamp>` folder and renames a new `..data` link over the old one, so the file's own
    // name never comes up. Which entries a path resolves through differs between such writers and
    // changes with every update; comparing what the file reads instead costs one read of a small
    // file per burst of events, and churn that leaves the file alone reloads nothing.
    watch(path.dirname(location.file), { persistent: false }, () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = setTimeout(() => reloadIfChanged('file changed'), 200);
    });
  } catch (err) {
    log.warn({ err: String(err) }, 'cannot watch the configuration file; reload with SIGHUP');
  }
  // SIGHUP reloads whatever the file reads: the operator asked for it.
  process.on('SIGHUP', () => reload('SIGHUP'));
  // An edit made while meshmux started came before the folder was watched: applied now.
  reloadIfChanged('file changed while starting');
}

/** Starts the sources and the merge of a configuration, waits for it to be served, and prints what a client would get. */
/**
 * Starts a configuration on ephemeral loopback ports without persisted state: it reads its sources
 * afresh and never touches the state or the ports of a running meshmux.
 */
async function startOffline(config: MeshmuxConfig): Promise<RunningMeshmux> {
  return startMeshmux(
    { ...config, state: { dir: 'none', keepWait: config.state.keepWait } },
    {
      xds: '127.0.0.1:0',
      http: '127.0.0.1:0',
      admin: '127.0.0.1:0',
      ...(config.server.xdsTls === undefined ? {} : { xdsTls: '127.0.0.1:0' }),
    },
  );
}

/** The merged state once ready; fails naming what it still waits for after `timeoutMs`. */
async function readyState(running: RunningMeshmux, timeoutMs: number, what: string): Promise<ConfigSnapshot> {
  try {
    return await firstValueFrom(
      running.engine.snapshots$.pipe(
        filter((s) => s.ready),
        timeout(timeoutMs),
      ),
    );
  } catch {
    const waiting = running.engine.current().waitingFor.join(', ');
    throw new MeshmuxError(
      'UNAVAILABLE',
      `${what}: not ready after ${timeoutMs / 1000} s, waiting for ${waiting}`,
    );
  }
}

async function preview(options: {
  config?: string;
  nodeId: string;
  meta: string[];
  peer?: string;
  san: string[];
}): Promise<void> {
  const location = configLocation(options.config);
  const config = loadMeshmuxConfig(location.file, location.baseDir);
  const metadata: Record<string, string> = {};
  for (const kv of options.meta) {
    const i = kv.indexOf('=');
    if (i <= 0) throw new MeshmuxError('CONFIG', `--meta takes KEY=VALUE, got "${kv}"`);
    metadata[kv.slice(0, i)] = kv.slice(i + 1);
  }
  const running = await startOffline(config);
  try {
    await firstValueFrom(running.engine.snapshots$.pipe(filter((s) => s.ready)));
    const result = running.preview({
      nodeId: options.nodeId,
      metadata,
      ...(options.peer === undefined ? {} : { peer: options.peer }),
      sans: options.san,
    });
    console.log(JSON.stringify(result, null, 2));
    process.exitCode = result.admitted ? 0 : 1;
  } finally {
    await running.stop();
  }
}

/** The files of one validated path, by the name they carry, in the order a source reads them. */
interface ValidatedFiles {
  /** What is printed before the problems (which commit of a repository is read); may be empty. */
  readonly heading: string;
  readonly files: ReadonlyArray<{
    readonly name: string;
    readonly size: number;
    readonly bytes: Buffer | undefined;
  }>;
  readonly warnings: readonly MeshmuxError[];
}

/** A repository's files at HEAD (as a git source reads them), or a file's or folder's (as a file source does). */
async function filesOf(target: string, maxFileBytes: number): Promise<ValidatedFiles> {
  const head = await readRepositoryHead(target, repoPathMatcher(DEFAULT_REPO_PATHS), maxFileBytes);
  if (head !== undefined) {
    return {
      heading: `${target}: reading ${head.files.length} file(s) of commit ${head.commit} (HEAD)`,
      files: head.files.map((f) => ({ name: `${target}:${f.path}`, size: f.size, bytes: f.bytes })),
      warnings: head.symlinks.map(
        (p) =>
          new MeshmuxError('DECODE', 'symbolic link skipped: only regular files are read', {
            file: `${target}:${p}`,
          }),
      ),
    };
  }
  const files: Array<{ name: string; size: number; bytes: Buffer | undefined }> = [];
  const { files: found, unreadable } = await listYamlFiles(target);
  // A folder it cannot list fails the validation: what it holds is unknown.
  if (unreadable[0] !== undefined) throw unreadable[0].error;
  for (const file of found) {
    const size = (await stat(file)).size;
    files.push({
      name: shownPath(file),
      size,
      bytes: size > maxFileBytes ? undefined : await readFile(file),
    });
  }
  return { heading: '', files, warnings: [] };
}

/**
 * Reads every path exactly as `serve` would (the same size cap, UTF-8 check, parser and rules for
 * many files: each path is one source) and prints each problem; resolves to the error count.
 */
async function validate(
  paths: string[],
  options: { namespace: string; maxFileSize: number },
): Promise<number> {
  let errors = 0;
  let objects = 0;
  const firstSeen = new FirstSeenTimes();
  for (const target of paths) {
    let found: ValidatedFiles;
    try {
      found = await filesOf(target, options.maxFileSize);
    } catch (err) {
      console.error(`${target}: ${(err as Error).message}`);
      errors++;
      continue;
    }
    if (found.heading !== '') console.error(found.heading);
    const reads: Array<[string, YamlFileRead]> = [];
    for (const f of found.files) {
      const read = await readYamlBytes({
        file: f.name,
        size: f.size,
        bytes: f.bytes,
        maxFileBytes: options.maxFileSize,
        defaultNamespace: options.namespace,
        createTimeFor: firstSeen.createTimeFor(() => new Date()),
      });
      reads.push([f.name, read]);
    }
    const set = nextYamlFileSet(undefined, reads);
    for (const w of [...found.warnings, ...set.warnings]) console.error(`warning: ${w.describe()}`);
    for (const e of set.errors) console.error(`error: ${e.describe()}`);
    objects += set.resources.length;
    errors += set.errors.length;
  }
  console.log(`${objects} valid object(s), ${errors} error(s)`);
  return errors;
}

/**
 * `validate --source NAME`: the source of the configuration read once exactly as `serve` reads it
 * (its own factory: a git source's URL, ref and paths, a file source's folder and globs, its size
 * caps), until its first complete state or its first failure. Returns the number of errors.
 */
async function validateSource(name: string, file: string | undefined): Promise<number> {
  const location = configLocation(file);
  const config = loadMeshmuxConfig(location.file, location.baseDir);
  const sourceConfig = config.sources.find((s) => s.name === name);
  if (sourceConfig === undefined) {
    console.error(
      `${location.file}: no source named ${name} (sources: ${config.sources.map((s) => s.name).join(', ')})`,
    );
    return 1;
  }
  await loadSourceLibraries([sourceConfig]);
  const source = createSource(sourceConfig);
  const first = await firstValueFrom(
    source.events$.pipe(
      filter((e) => e.type === 'snapshot' || e.state === 'failing' || e.state === 'stale'),
      timeout({ first: 120_000, with: () => of(undefined) }),
    ),
  );
  if (first === undefined) {
    console.error(`${name}: no answer from its upstream within 120 s`);
    return 1;
  }
  if (first.type === 'status') {
    console.error(`error: ${name}: ${first.error?.describe() ?? first.state}`);
    return 1;
  }
  for (const w of first.warnings) console.error(`warning: ${w.describe()}`);
  for (const e of first.errors) console.error(`error: ${e.describe()}`);
  console.log(
    `${name} (${sourceConfig.type}, revision ${first.revision || 'none'}): ${first.resources.length} valid object(s), ${first.errors.length} error(s)`,
  );
  return first.errors.length;
}

/** `--max-file-size`: a size as the configuration writes it (`maxFileSize`). */
function parseMaxFileSize(text: string): number {
  const parsed = ByteSize.safeParse(/^\d+$/.test(text) ? Number(text) : text);
  if (!parsed.success) {
    throw new InvalidArgumentError(`${text} is not a size such as 1048576, 512Ki, 32Mi or 1Gi`);
  }
  return parsed.data;
}

/** `file:line:column: field: reason` for a configuration problem, as compilers print them. */
function compilerStyle(problem: MeshmuxError): string {
  const { file, line, column, field } = problem.location;
  const where = [file ?? '', line ?? '', line === undefined ? '' : (column ?? '')]
    .filter((p) => p !== '')
    .join(':');
  return `${where}: ${field === undefined ? '' : `${field}: `}${problem.message}`;
}

/**
 * Loads and checks a configuration without starting anything, as a start would check it (the
 * files it reads itself included); returns the exit code.
 */
async function checkConfig(file: string | undefined): Promise<number> {
  const location = configLocation(file);
  try {
    const config = loadMeshmuxConfig(location.file, location.baseDir);
    const { warnings } = await checkBeyondSchema(config);
    for (const w of warnings) console.error(`warning: ${compilerStyle(w)}`);
    console.log(
      `${location.file}: valid (${config.sources.length} source(s), ${config.policies.length} policy(ies))`,
    );
    return 0;
  } catch (err) {
    if (!(err instanceof MeshmuxError)) throw err;
    for (const problem of configProblems(err)) console.error(compilerStyle(problem));
    return 1;
  }
}

/** GETs a JSON page of a running meshmux; throws a MeshmuxError naming the URL when it cannot. */
/** How the commands that talk to a running meshmux reach its admin listener. */
interface AdminOptions {
  readonly admin: string;
  readonly tokenFile?: string;
}

/** GETs or POSTs JSON on the admin listener, with the bearer token when a token file is given. */
async function adminJson<T>(
  options: AdminOptions,
  path: string,
  init: RequestInit = {},
): Promise<{ status: number; body: T }> {
  const base = options.admin.replace(/\/+$/, '');
  const headers = new Headers(init.headers);
  if (options.tokenFile !== undefined)
    headers.set('authorization', `Bearer ${readFileSync(options.tokenFile, 'utf8').trim()}`);
  return fetchJson<T>(`${base}${path}`, { ...init, headers });
}

async function fetchJson<T>(url: string, init?: RequestInit): Promise<{ status: number; body: T }> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    throw new MeshmuxError('UNAVAILABLE', `cannot reach meshmux: ${String((err as Error).cause ?? err)}`, {
      file: url,
    });
  }
  return { status: res.status, body: (await res.json()) as T };
}

interface StatusSource {
  name: string;
  type: string;
  state: string;
  held?: { reason: string; deletions: number; total: number; since: string; emptiedKinds?: string[] };
  lastError?: string;
}
interface StatusClient {
  client: { nodeId: string; peer: string };
  policy: string;
  types: Array<{ typeUrl: string; sync: string }>;
}

/** `meshmux status`: the sources, then one line per istiod with its state per type. Exit 1 unless all are in sync. */
async function status(options: AdminOptions): Promise<number> {
  const [{ body: sources }, { body: clients }, { body: policies }] = await Promise.all([
    adminJson<StatusSource[]>(options, '/debug/sources'),
    adminJson<StatusClient[]>(options, '/debug/syncz'),
    adminJson<PolicyChangesPage>(options, '/debug/policies'),
  ]);
  const out: string[] =
    policies.held === undefined
      ? []
      : [
          `POLICIES HELD since ${policies.held.since} (meshmux confirm --policies); the policies in force keep serving:`,
          ...heldPolicyLines(policies.held),
          '',
        ];
  out.push('SOURCE'.padEnd(24) + 'TYPE'.padEnd(11) + 'STATE');
  for (const s of sources) {
    const held =
      s.held === undefined
        ? ''
        : `  HELD: ${s.held.reason}${s.held.emptiedKinds === undefined ? '' : ` (${s.held.emptiedKinds.join(', ')})`}, ${s.held.deletions} of ${s.held.total} deleted (meshmux confirm ${s.name})`;
    out.push(`${s.name.padEnd(24)}${s.type.padEnd(11)}${s.state}${held}`);
  }
  out.push('');
  out.push('ISTIOD'.padEnd(48) + 'POLICY'.padEnd(16) + 'TYPES');
  let behind = 0;
  let nacking = 0;
  for (const c of clients) {
    const types = c.types.map((t) => `${t.typeUrl.slice(t.typeUrl.lastIndexOf('/') + 1)}=${t.sync}`);
    if (c.types.some((t) => t.sync === 'NACKED')) nacking++;
    else if (c.types.some((t) => t.sync === 'STALE')) behind++;
    out.push(`${c.client.nodeId.padEnd(48)}${c.policy.padEnd(16)}${types.join(' ')}`);
  }
  const synced = clients.length - behind - nacking;
  out.push('', `${clients.length} istiod(s): ${synced} in sync, ${behind} behind, ${nacking} NACKing`);
  console.log(out.join('\n'));
  return synced === clients.length ? 0 : 1;
}

/** One line per group of istiods a held change of the policies narrows too far. */
function heldPolicyLines(held: NonNullable<PolicyChangesPage['held']>): string[] {
  const groups = held.losses.filter((l) => l.held !== undefined);
  const lines = groups
    .slice(0, 20)
    .map(
      (l) =>
        `  ${l.clients} istiod(s) of policy ${l.policy}: ${l.lost} of ${l.objects} object(s) withdrawn${l.next === undefined ? ' (refused)' : l.next === l.policy ? '' : ` (moved to ${l.next})`}`,
    );
  return groups.length > 20 ? [...lines, `  … ${groups.length - 20} more group(s) (/debug/policies)`] : lines;
}

/** `meshmux confirm --policies`: says what the held change of the policies withdraws, then applies it. */
async function confirmPolicies(options: AdminOptions): Promise<number> {
  const { body } = await adminJson<PolicyChangesPage>(options, '/debug/policies');
  if (body.held === undefined) {
    console.error('meshmux: no change of the policies is held');
    return 1;
  }
  console.log(
    [`policies: a change held since ${body.held.since}; applying it:`, ...heldPolicyLines(body.held)].join(
      '\n',
    ),
  );
  const { status: code, body: answer } = await adminJson<{ error?: string }>(
    options,
    '/debug/policies/confirm',
    {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    },
  );
  if (code !== 200) {
    console.error(`meshmux: ${answer.error ?? `confirmation refused (${code})`}`);
    return 1;
  }
  console.log(`policies: applied (${body.held.policies.join(', ')})`);
  return 0;
}

/** `meshmux confirm SOURCE`: says what the held update deletes, then applies it. */
async function confirm(source: string, options: AdminOptions): Promise<number> {
  const { body: sources } = await adminJson<StatusSource[]>(options, '/debug/sources');
  const found = sources.find((s) => s.name === source);
  if (found === undefined) {
    console.error(`meshmux: no source named ${source}`);
    return 1;
  }
  if (found.held === undefined) {
    console.error(`meshmux: source ${source} holds no update`);
    return 1;
  }
  console.log(
    `${source}: held since ${found.held.since} (${found.held.reason}); applying it deletes ${found.held.deletions} of its ${found.held.total} object(s)`,
  );
  const { status: code, body } = await adminJson<{ error?: string }>(
    options,
    `/debug/sources/${encodeURIComponent(source)}/confirm`,
    { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' },
  );
  if (code !== 200) {
    console.error(`meshmux: ${body.error ?? `confirmation refused (${code})`}`);
    return 1;
  }
  console.log(`${source}: applied`);
  return 0;
}

/** A bash completion script for the commands and options of `command`. */
/**
 * Prints why a command failed: a problem of the input (configuration, files) one line each, with
 * file, line and field; a system error (a port in use, a missing file) by its message; only a bug
 * with its stack trace. Returns true when the input or the system was at fault, false for a bug.
 */
function reportFailure(err: unknown): boolean {
  if (err instanceof MeshmuxError) {
    for (const problem of configProblems(err)) console.error(`meshmux: ${problem.describe()}`);
    return true;
  }
  if (err instanceof Error && typeof (err as NodeJS.ErrnoException).code === 'string') {
    console.error(`meshmux: ${err.message}`);
    return true;
  }
  console.error(err);
  return false;
}

function describeObject(o: ServedObject): string {
  return `${o.kind.slice(o.kind.lastIndexOf('/') + 1)} ${o.name}`;
}

function describeDiff(d: PolicyDiff, next: string, running: string): string[] {
  const presence =
    d.presence === 'added'
      ? ` (only in ${next})`
      : d.presence === 'removed'
        ? ` (only in ${running}: its istiods would be matched by a later policy or refused)`
        : '';
  const out = [
    `policy ${d.policy}${presence}: ${d.gained.length} gained, ${d.lost.length} lost, ${d.changed.length} changed`,
  ];
  for (const o of d.gained)
    out.push(`  + ${describeObject(o)}${o.source === '' ? '' : `  from ${o.source}`}`);
  for (const o of d.lost)
    out.push(`  - ${describeObject(o)}${o.source === '' ? '' : `  was from ${o.source}`}`);
  for (const { before, after } of d.changed) {
    const from =
      before.source === after.source
        ? `from ${after.source}`
        : `from ${after.source}, was from ${before.source}`;
    out.push(`  ~ ${describeObject(after)}  ${from}`);
  }
  return out;
}

/**
 * `meshmux diff --config NEW`: reads the sources of the running configuration (`--current`, default
 * the embedded one) and of NEW, each in a meshmux of its own on ephemeral loopback ports with no
 * persisted state, and prints per policy what its istiods would gain, lose and see change.
 * Exit 0 without differences, 1 with, 2 when either side cannot be read.
 */
async function diff(options: {
  config: string;
  current?: string;
  output: string;
  timeout: string;
}): Promise<number> {
  const wait = Duration.safeParse(options.timeout);
  if (!wait.success)
    throw new InvalidArgumentError(`--timeout: ${wait.error.issues[0]?.message ?? 'not a duration'}`);
  const timeoutMs = wait.data;
  const running = configLocation(options.current);
  const next = configLocation(options.config);
  const runningLabel = options.current ?? 'the embedded configuration';
  const read = async (
    location: { file: string; baseDir: string },
    label: string,
  ): Promise<ServedConfiguration> => {
    const config = loadMeshmuxConfig(location.file, location.baseDir);
    const instance = await startOffline(config);
    try {
      return {
        snapshot: await readyState(instance, timeoutMs, label),
        policies: new PolicySet(config.policies),
      };
    } finally {
      await instance.stop();
    }
  };
  const diffs = diffPolicies(await read(running, runningLabel), await read(next, options.config));
  const differs = diffs.some(
    (d) => d.presence !== 'kept' || d.gained.length + d.lost.length + d.changed.length > 0,
  );
  if (options.output === 'json') console.log(JSON.stringify(diffs, null, 2));
  else {
    const lines = diffs.flatMap((d) => describeDiff(d, options.config, runningLabel));
    lines.push(differs ? 'istiods would receive different config' : 'no difference for any policy');
    console.log(lines.join('\n'));
  }
  return differs ? 1 : 0;
}

function bashCompletion(command: Command): string {
  const commands = command.commands.map((c) => c.name());
  const cases = command.commands
    .map((c) => `    ${c.name()}) opts="${c.options.map((o) => o.long ?? '').join(' ')}" ;;`)
    .join('\n');
  return `# meshmux completion for bash: source <(meshmux completion)
_meshmux() {
  local cur=\${COMP_WORDS[COMP_CWORD]} opts
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${commands.join(' ')} --help --version" -- "$cur"))
    return
  fi
  case "\${COMP_WORDS[1]}" in
${cases}
    *) opts="" ;;
  esac
  if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$opts --help" -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi
}
complete -F _meshmux meshmux
`;
}

const program = new Command()
  .name('meshmux')
  .description('One MCP-over-xDS endpoint for a fleet of istiods.')
  .version(MESHMUX_VERSION)
  .addOption(
    new Option('--log-level <level>', 'log level (default: $MESHMUX_LOG_LEVEL, $LOG_LEVEL or info)').choices(
      LOG_LEVELS,
    ),
  )
  .hook('preAction', (command) => {
    const { logLevel } = command.opts<{ logLevel?: LogLevel }>();
    if (logLevel !== undefined) setLogLevel(logLevel);
  })
  .showHelpAfterError();

program
  .command('serve')
  .description('serve the merged config over ADS (default: the embedded config/meshmux.yaml)')
  .option('-c, --config <file>', 'configuration file')
  .option('--xds <host:port>', 'override server.xds')
  .option('--http <host:port>', 'override server.http')
  .option('--admin <host:port>', 'override server.admin.address')
  .action(serve);

program
  .command('preview')
  .description(
    'list what a client with this identity would receive (per type: names and versions), without connecting it',
  )
  .option('-c, --config <file>', 'configuration file (default: the embedded one)')
  .requiredOption('--node-id <id>', 'the node id the client would send')
  .option('--meta <key=value>', 'node metadata (repeatable)', (v: string, all: string[]) => [...all, v], [])
  .option('--peer <ip>', 'the peer address it would connect from', '127.0.0.1')
  .option(
    '--san <san>',
    'a SAN of its client certificate (repeatable)',
    (v: string, all: string[]) => [...all, v],
    [],
  )
  .action(preview);

program
  .command('validate')
  .description(
    'read YAML files or folders, or one configured source (--config F --source NAME), as serve does; print every problem; exit 1 on any error',
  )
  .argument('[paths...]', 'files, folders, or git repositories (read at HEAD)')
  .option('-c, --config <file>', 'with --source: the configuration naming the source')
  .option(
    '-s, --source <name>',
    "read this source of the configuration as serve would (a git source's ref and paths too)",
  )
  .option('-n, --namespace <ns>', 'namespace of documents without one', 'default')
  .option(
    '--max-file-size <size>',
    "largest file read, as the sources' maxFileSize (e.g. 32Mi)",
    parseMaxFileSize,
    DEFAULT_MAX_FILE_BYTES,
  )
  .action(
    async (
      paths: string[],
      options: { namespace: string; maxFileSize: number; config?: string; source?: string },
    ) => {
      if (options.source !== undefined) {
        if (paths.length > 0) throw new InvalidArgumentError('give either paths or --source, not both');
        process.exitCode = (await validateSource(options.source, options.config)) > 0 ? 1 : 0;
        return;
      }
      if (paths.length === 0)
        throw new InvalidArgumentError('give paths to read, or --config F --source NAME');
      const errors = await validate(paths, options);
      process.exitCode = errors > 0 ? 1 : 0;
    },
  );

program
  .command('check-config')
  .description('check a configuration file alone (no source is started); every problem as file:line:column')
  .argument('[file]', 'configuration file (default: the embedded one)')
  .action(async (file: string | undefined) => {
    process.exitCode = await checkConfig(file);
  });

program
  .command('status')
  .description(
    'the sources and, per connected istiod, each type SYNCED / STALE / NACKED / NOT SENT (exit 1 if one is behind or NACKing)',
  )
  .option('--admin <url>', 'the admin listener of a running meshmux', 'http://127.0.0.1:15015')
  .option('--token-file <file>', 'file holding the admin token (server.admin.tokenFile)')
  .action(async (options: AdminOptions) => {
    process.exitCode = await status(options);
  });

program
  .command('confirm')
  .description(
    "apply a source's held update (after onEmpty or maxDeleteRatio held it), or with --policies the held change of the policies (after policyGuard held it), saying what it deletes",
  )
  .argument('[source]', 'the source whose held update to apply')
  .option('--policies', 'apply the held change of the policies instead (after policyGuard held it)')
  .option('--admin <url>', 'the admin listener of a running meshmux', 'http://127.0.0.1:15015')
  .option('--token-file <file>', 'file holding the admin token (server.admin.tokenFile)')
  .action(async (source: string | undefined, options: AdminOptions & { policies?: boolean }) => {
    if (options.policies === true) {
      if (source !== undefined) {
        console.error('meshmux: give a source or --policies, not both');
        process.exitCode = 2;
        return;
      }
      process.exitCode = await confirmPolicies(options);
      return;
    }
    if (source === undefined) {
      console.error('meshmux: name the source whose held update to apply, or give --policies');
      process.exitCode = 2;
      return;
    }
    process.exitCode = await confirm(source, options);
  });

program
  .command('diff')
  .description(
    "what each policy's istiods would gain, lose and see change if --config replaced the running configuration (computed offline; exit 1 when they differ)",
  )
  .requiredOption('-c, --config <file>', 'the new configuration')
  .option('--current <file>', 'the running configuration (default: the embedded one)')
  .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
  .option('--timeout <duration>', 'how long each side may take to read its sources', '60s')
  .action(async (options: { config: string; current?: string; output: string; timeout: string }) => {
    try {
      process.exitCode = await diff(options);
    } catch (err) {
      // Exit 1 means "they differ": whatever else stops it exits 2.
      reportFailure(err);
      process.exitCode = 2;
    }
  });

program
  .command('schema')
  .description('print the JSON Schema of the configuration file (for editors: yaml-language-server)')
  .action(() => {
    process.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
  });

program
  .command('completion')
  .description('print a bash completion script: source <(meshmux completion)')
  .action(() => {
    process.stdout.write(bashCompletion(program));
  });

// Data goes to stdout and logs to stderr, so `meshmux preview ... | jq` reads only data; `serve`
// writes its log to stdout, as a service does.
if (process.argv[2] !== 'serve') sendLogsToStderr();

program.parseAsync(process.argv).catch((err: unknown) => {
  process.exit(reportFailure(err) ? 1 : 2);
});
