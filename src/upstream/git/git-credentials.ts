import { readFile } from 'node:fs/promises';
import { MeshmuxError } from '../../core/errors.js';

/** Where a git source's credentials come from. Values are read at each fetch and never logged. */
export interface GitCredentials {
  /** Private key file for ssh URLs. */
  readonly sshKey?: string | undefined;
  /** known_hosts file for ssh URLs. */
  readonly knownHosts?: string | undefined;
  /** File holding an HTTPS token. */
  readonly tokenFile?: string | undefined;
  /** Environment variable holding an HTTPS token. */
  readonly tokenEnv?: string | undefined;
  /** User name sent with the token. Default `x-access-token`. */
  readonly tokenUser?: string | undefined;
}

/** What one git invocation needs to authenticate: environment, and the strings to mask in its output. */
export interface GitAuth {
  readonly env: Readonly<Record<string, string>>;
  readonly secrets: readonly string[];
}

/** Quotes a word for the POSIX shell git runs `GIT_SSH_COMMAND` through. */
function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

function isSsh(url: string): boolean {
  return url.startsWith('ssh://') || /^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:/.test(url);
}

/**
 * The environment that authenticates git to `url`. A token is sent as an HTTP Basic header
 * scoped to that URL (`http.<url>.extraHeader` through `GIT_CONFIG_*` variables), so it never
 * appears on a command line, in the shared repository's config or in a remote URL. ssh always
 * runs in batch mode with strict host-key checking.
 */
export async function gitAuthFor(url: string, credentials: GitCredentials): Promise<GitAuth> {
  const env: Record<string, string> = {};
  const secrets: string[] = [];
  if (isSsh(url)) {
    const words = ['ssh', '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=yes'];
    if (credentials.sshKey !== undefined) words.push('-o', 'IdentitiesOnly=yes', '-i', credentials.sshKey);
    if (credentials.knownHosts !== undefined)
      words.push('-o', `UserKnownHostsFile=${credentials.knownHosts}`);
    if (
      credentials.sshKey !== undefined ||
      credentials.knownHosts !== undefined ||
      !process.env['GIT_SSH_COMMAND']
    ) {
      env['GIT_SSH_COMMAND'] = words.map((w, i) => (i === 0 ? w : shellQuote(w))).join(' ');
      env['GIT_SSH_VARIANT'] = 'ssh';
    }
  }
  const token = await readToken(credentials);
  if (token !== undefined && /^https?:\/\//.test(url)) {
    const basic = Buffer.from(`${credentials.tokenUser ?? 'x-access-token'}:${token}`).toString('base64');
    env['GIT_CONFIG_COUNT'] = '1';
    env['GIT_CONFIG_KEY_0'] = `http.${url}.extraHeader`;
    env['GIT_CONFIG_VALUE_0'] = `Authorization: Basic ${basic}`;
    secrets.push(token, basic);
  }
  return { env, secrets };
}

async function readToken(credentials: GitCredentials): Promise<string | undefined> {
  if (credentials.tokenFile !== undefined) {
    let text: string;
    try {
      text = await readFile(credentials.tokenFile, 'utf8');
    } catch (err) {
      throw new MeshmuxError(
        'UNAVAILABLE',
        `cannot read the token file: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
        { file: credentials.tokenFile },
        { cause: err },
      );
    }
    const token = text.trim();
    if (token === '')
      throw new MeshmuxError('UNAVAILABLE', 'the token file is empty', { file: credentials.tokenFile });
    return token;
  }
  if (credentials.tokenEnv !== undefined) {
    const token = process.env[credentials.tokenEnv]?.trim();
    if (token === undefined || token === '') {
      throw new MeshmuxError('UNAVAILABLE', `environment variable ${credentials.tokenEnv} is not set`);
    }
    return token;
  }
  return undefined;
}
