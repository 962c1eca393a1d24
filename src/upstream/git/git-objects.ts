/**
 * Reads commits, trees and blobs straight from a repository's object store. Reading a commit's
 * tree (never a checkout) makes a read atomic: the files of exactly one commit, whatever moves
 * meanwhile.
 */
import { realpath } from 'node:fs/promises';
import { runGit } from './git-cli.js';

/** A commit and its committer time. */
export interface CommitInfo {
  readonly sha: string;
  readonly committedAt: Date;
}

/** A file of a commit's tree. */
export interface TreeFile {
  readonly path: string;
  /** The blob's object id: equal ids mean equal content. */
  readonly oid: string;
  /** The blob's size in bytes, known before its content is read. */
  readonly size: number;
}

/** The files of a tree that a reader may take, and those it must skip. */
export interface TreeListing {
  readonly files: readonly TreeFile[];
  /** Matching paths that are symbolic links; their targets are not followed. */
  readonly symlinks: readonly string[];
}

/** The commit `rev` names (a branch, tag, annotated tag or commit id), peeled to the commit. */
export async function resolveCommit(gitDir: string, rev: string): Promise<CommitInfo> {
  const out = await runGit([
    `--git-dir=${gitDir}`,
    'log',
    '-1',
    '--format=%H %ct',
    '--end-of-options',
    `${rev}^{commit}`,
    '--',
  ]);
  const [sha = '', seconds = '0'] = out.toString('utf8').trim().split(' ');
  return { sha, committedAt: new Date(Number(seconds) * 1000) };
}

/** Whether the repository holds `sha` as a commit. */
export async function hasCommit(gitDir: string, sha: string): Promise<boolean> {
  try {
    await runGit([`--git-dir=${gitDir}`, 'cat-file', '-e', `${sha}^{commit}`]);
    return true;
  } catch {
    return false;
  }
}

/** Every regular file of the commit's tree whose path `include` accepts, in path order. */
export async function listTree(
  gitDir: string,
  commit: string,
  include: (path: string) => boolean,
): Promise<TreeListing> {
  const out = await runGit([`--git-dir=${gitDir}`, 'ls-tree', '-r', '-z', '-l', '--full-tree', commit]);
  const files: TreeFile[] = [];
  const symlinks: string[] = [];
  for (const entry of out.toString('utf8').split('\0')) {
    if (entry === '') continue;
    // `<mode> SP <type> SP <oid> SP+ <size> TAB <path>`; paths are verbatim thanks to -z.
    const tab = entry.indexOf('\t');
    const [mode = '', type = '', oid = '', size = ''] = entry.slice(0, tab).split(/ +/);
    const path = entry.slice(tab + 1);
    if (type !== 'blob' || !include(path)) continue;
    if (mode === '120000') symlinks.push(path);
    else files.push({ path, oid, size: Number(size) });
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { files, symlinks };
}

/** The content of each blob, by object id, read in one `git cat-file --batch` run. */
export async function readBlobs(gitDir: string, oids: readonly string[]): Promise<Map<string, Buffer>> {
  const blobs = new Map<string, Buffer>();
  const wanted = [...new Set(oids)];
  if (wanted.length === 0) return blobs;
  const out = await runGit([`--git-dir=${gitDir}`, 'cat-file', '--batch'], {
    input: `${wanted.join('\n')}\n`,
  });
  let at = 0;
  while (at < out.length) {
    const eol = out.indexOf(0x0a, at);
    if (eol < 0) break;
    // `<oid> SP <type> SP <size> LF <content> LF`, or `<name> SP missing LF`.
    const [oid = '', type = '', size = ''] = out.toString('utf8', at, eol).split(' ');
    at = eol + 1;
    if (type === 'missing' || size === '') throw new Error(`object ${oid} is missing from the repository`);
    const length = Number(size);
    blobs.set(oid, out.subarray(at, at + length));
    at += length + 1;
  }
  for (const oid of wanted)
    if (!blobs.has(oid)) throw new Error(`git cat-file returned no content for ${oid}`);
  return blobs;
}

/**
 * The git directory of the repository at `dir` when `dir` is a bare repository or the top of a
 * work tree; undefined for anything else (including a folder inside a work tree).
 */
export async function repositoryAt(dir: string): Promise<string | undefined> {
  try {
    const [bare = '', gitDir = ''] = (
      await runGit(['-C', dir, 'rev-parse', '--is-bare-repository', '--absolute-git-dir'])
    )
      .toString('utf8')
      .trim()
      .split('\n');
    const here = await realpath(dir);
    if (bare === 'true') return (await realpath(gitDir)) === here ? gitDir : undefined;
    const top = (await runGit(['-C', dir, 'rev-parse', '--show-toplevel'])).toString('utf8').trim();
    return (await realpath(top)) === here ? gitDir : undefined;
  } catch {
    return undefined;
  }
}

/** The matching files of a repository's HEAD commit, as bytes. */
export interface RepositoryHead {
  readonly commit: string;
  /** In tree order; `bytes` is undefined for a blob larger than the cap (it was not read). */
  readonly files: ReadonlyArray<{
    readonly path: string;
    readonly size: number;
    readonly bytes: Buffer | undefined;
  }>;
  /** Matching paths that are symbolic links: never read. */
  readonly symlinks: readonly string[];
}

/**
 * The files of HEAD that `include` accepts, when `dir` is a repository (bare, or the top of a
 * work tree); undefined otherwise. Uncommitted changes are not read: this is what a git source
 * pointed at the repository would serve. Blobs over `maxFileBytes` are listed, not read.
 */
export async function readRepositoryHead(
  dir: string,
  include: (path: string) => boolean,
  maxFileBytes: number,
): Promise<RepositoryHead | undefined> {
  const gitDir = await repositoryAt(dir);
  if (gitDir === undefined) return undefined;
  const head = await resolveCommit(gitDir, 'HEAD');
  const listing = await listTree(gitDir, head.sha, include);
  const blobs = await readBlobs(
    gitDir,
    listing.files.filter((f) => f.size <= maxFileBytes).map((f) => f.oid),
  );
  return {
    commit: head.sha,
    files: listing.files.map((f) => ({ path: f.path, size: f.size, bytes: blobs.get(f.oid) })),
    symlinks: listing.symlinks,
  };
}
