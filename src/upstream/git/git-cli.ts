/**
 * Runs the git command-line tool. meshmux talks to repositories through the installed `git`
 * rather than a JavaScript implementation because git alone does everything the source needs at
 * once: shallow fetches of one ref (even of a bare commit id), every transport (https with
 * proxies and the system's CA store, ssh with the user's agent and known_hosts, git://, file://),
 * the server-side protocol v2 filtering that keeps a fetch of a large repository small, and reads
 * of a commit straight from the object store; it adds no dependency and is on every CI image.
 * Commands run through `execFile` (never a shell), so no argument is ever interpreted.
 */
import { execFile } from 'node:child_process';

/** The transports git may use on meshmux's behalf; `ext::` and friends stay disabled. */
export const ALLOWED_PROTOCOLS = 'file:git:http:https:ssh';

/** Inherited variables that would point git at some other repository than the one named. */
const REPOSITORY_VARIABLES = [
  'GIT_DIR',
  'GIT_WORK_TREE',
  'GIT_INDEX_FILE',
  'GIT_OBJECT_DIRECTORY',
  'GIT_ALTERNATE_OBJECT_DIRECTORIES',
  'GIT_COMMON_DIR',
  'GIT_NAMESPACE',
];

/** Output larger than this is a broken repository or a misconfiguration, not config. */
const MAX_OUTPUT_BYTES = 1024 * 1024 * 1024;

export interface GitRunOptions {
  /** Extra environment (credentials); merged over the process environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Written to git's standard input, which is then closed. */
  readonly input?: string;
  /** Stop git (SIGTERM, on which it removes its lock files) after this long; default none (local commands). */
  readonly timeoutMs?: number;
  /** Masks secrets (tokens, URLs with credentials) in the error text. */
  readonly redact?: (text: string) => string;
}

/** A git command that exited non-zero, timed out or could not start. Its text is already redacted. */
export class GitCommandError extends Error {
  override readonly name = 'GitCommandError';

  constructor(
    /** The git subcommand, e.g. `fetch`. */
    readonly command: string,
    /** git's standard error, redacted and trimmed. */
    readonly stderr: string,
    readonly timedOut: boolean,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Runs `git <args>` and resolves to its standard output as bytes. Never prompts (no terminal,
 * `GIT_TERMINAL_PROMPT=0`), never uses a protocol outside {@link ALLOWED_PROTOCOLS}, and speaks
 * the C locale so its messages can be recognized.
 */
export function runGit(args: readonly string[], options: GitRunOptions = {}): Promise<Buffer> {
  const redact = options.redact ?? ((t: string) => t);
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of REPOSITORY_VARIABLES) delete env[name];
  Object.assign(env, {
    GIT_TERMINAL_PROMPT: '0',
    GCM_INTERACTIVE: 'never',
    GIT_ALLOW_PROTOCOL: ALLOWED_PROTOCOLS,
    LC_ALL: 'C',
    LANGUAGE: 'C',
    ...options.env,
  });
  const command = args.find((a) => !a.startsWith('-')) ?? 'git';
  return new Promise<Buffer>((resolve, reject) => {
    const child = execFile(
      'git',
      args,
      {
        env,
        encoding: 'buffer',
        maxBuffer: MAX_OUTPUT_BYTES,
        windowsHide: true,
        ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs, killSignal: 'SIGTERM' }),
      },
      (err, stdout, stderr) => {
        if (err === null) {
          resolve(stdout);
          return;
        }
        const text = redact(stderr.toString('utf8').trim());
        const timedOut = err.killed === true && options.timeoutMs !== undefined;
        let message: string;
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') message = 'git is not installed (not on PATH)';
        else if (timedOut) message = `git ${command} timed out after ${options.timeoutMs ?? 0} ms`;
        else message = `git ${command} failed: ${lastLines(text) || `exit code ${String(err.code)}`}`;
        reject(new GitCommandError(command, text, timedOut, message));
      },
    );
    // git may exit before reading all of its input (e.g. a bad object id); that is reported above.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(options.input ?? '');
  });
}

/** The last few meaningful lines of git's error output, without its hints. */
function lastLines(stderr: string): string {
  return stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('hint:'))
    .slice(-3)
    .join('; ');
}
