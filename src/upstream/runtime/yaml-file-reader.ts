import { readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { toMeshmuxError } from '../../core/errors.js';
import type { Timestamp } from '../../core/resource.js';
import { decodeUtf8 } from '../../schema/utf8-text.js';
import { readYamlDocumentsAsync } from '../../schema/yaml-reader.js';
import { fileTooLarge } from './input-limits.js';
import type { YamlFileRead } from './yaml-file-set.js';

/** Names of the files a folder source reads. */
const YAML_FILE = /\.(ya?ml|json)$/i;

/** How to read one file's bytes. */
export interface YamlBytesOptions {
  /** The name problems carry (a path relative to the working directory, a repository path). */
  readonly file: string;
  /** The file's size, bytes: checked against the cap before anything is read. */
  readonly size: number;
  /** Its bytes; undefined when the caller did not read them because `size` is over the cap. */
  readonly bytes: Uint8Array | undefined;
  readonly maxFileBytes: number;
  readonly defaultNamespace: string;
  /** The creation time of an object met for the first time (see `FirstSeenTimes`). */
  readonly createTimeFor: (kind: string, namespace: string, name: string) => Timestamp;
}

/**
 * What one file's bytes yield, with the bounds every reader of Istio YAML applies: a file over
 * `maxFileBytes` or not UTF-8 is not parsed, and is one error naming it (its read holds no
 * objects, so a {@link nextYamlFileSet} keeps what it served). Never rejects for bad content.
 */
export async function readYamlBytes(options: YamlBytesOptions): Promise<YamlFileRead> {
  const { file, size, bytes, maxFileBytes } = options;
  if (size > maxFileBytes || bytes === undefined || bytes.length > maxFileBytes) {
    return {
      resources: [],
      errors: [fileTooLarge(file, Math.max(size, bytes?.length ?? 0), maxFileBytes)],
      warnings: [],
    };
  }
  let text: string;
  try {
    text = decodeUtf8(bytes, file);
  } catch (err) {
    return { resources: [], errors: [toMeshmuxError(err, 'YAML_SYNTAX', { file })], warnings: [] };
  }
  return readYamlDocumentsAsync(text, {
    file,
    defaultNamespace: options.defaultNamespace,
    createTimeFor: options.createTimeFor,
  });
}

/** What {@link listYamlFiles} found. */
export interface YamlFileListing {
  /** Every YAML or JSON file found, in path order. */
  readonly files: string[];
  /**
   * Each folder below the root that could not be listed (a volume's `lost+found` is not readable
   * by anyone but root), with why, in path order. What lies under one is unknown, not gone.
   */
  readonly unreadable: Array<{ readonly folder: string; readonly error: unknown }>;
  /** Every folder listed, the root first (none when the root is a file). */
  readonly folders: string[];
}

/**
 * Every YAML or JSON file (`*.yaml`, `*.yml`, `*.json`) at or below `root`; a single file is
 * listed as itself, whatever its name. A symlink to a file is listed when its target is inside
 * `root` (never one leading out of it); folders named `..*` are skipped (see
 * {@link hiddenByKubelet}). A subfolder that cannot be listed is reported, not fatal: one
 * unreadable folder must not hide every other file. Rejects when `root` itself cannot be read.
 */
export async function listYamlFiles(root: string): Promise<YamlFileListing> {
  const info = await stat(root);
  if (info.isFile()) return { files: [root], unreadable: [], folders: [] };
  const realRoot = await realpath(root);
  const listing: YamlFileListing = { files: [], unreadable: [], folders: [] };
  const folders = [root];
  for (let folder = folders.pop(); folder !== undefined; folder = folders.pop()) {
    let entries;
    try {
      entries = await readdir(folder, { withFileTypes: true });
    } catch (err) {
      if (folder === root) throw err;
      listing.unreadable.push({ folder, error: err });
      continue;
    }
    listing.folders.push(folder);
    for (const e of entries) {
      const entry = path.join(folder, e.name);
      if (hiddenByKubelet(path.relative(root, entry))) continue;
      if (e.isDirectory()) folders.push(entry);
      else if (!YAML_FILE.test(e.name)) continue;
      else if (e.isFile()) listing.files.push(entry);
      else if (e.isSymbolicLink() && (await fileInside(entry, realRoot))) listing.files.push(entry);
    }
  }
  listing.files.sort();
  listing.unreadable.sort((a, b) => (a.folder < b.folder ? -1 : a.folder > b.folder ? 1 : 0));
  return listing;
}

/**
 * Whether a path lies under a folder whose name starts with `..`: how the kubelet lays out a
 * ConfigMap or Secret volume (`..2026_11_23_….123/` holds the files, `..data` points at it, and
 * each visible name is a symlink through `..data`). Those folders are read through the visible
 * names only, so an update (a new `..<timestamp>` folder, `..data` swapped, the old one removed)
 * is one change, never a second copy of every object.
 */
function hiddenByKubelet(relative: string): boolean {
  return relative.split(path.sep).some((segment) => segment.startsWith('..') && segment !== '..');
}

/** A symlink whose target is a regular file inside the source's root (a symlink never leads out of it). */
async function fileInside(link: string, realRoot: string): Promise<boolean> {
  try {
    const target = await realpath(link);
    if (target !== realRoot && !target.startsWith(`${realRoot}${path.sep}`)) return false;
    return (await stat(target)).isFile();
  } catch {
    return false; // dangling, or gone while listing
  }
}

/** How a file on disk is named in problems and origins: relative to the working directory. */
export function shownPath(file: string): string {
  return path.relative(process.cwd(), file) || file;
}
