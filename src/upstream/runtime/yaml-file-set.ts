import { MeshmuxError } from '../../core/errors.js';
import { resourceKey, type ConfigResource } from '../../core/resource.js';
import { appendAll } from '../../core/append-all.js';
import { digestOfLines, sequenceRevision } from './source-revision.js';

/**
 * What one YAML file yields: its valid objects, the documents it rejected, what was skipped or
 * repaired. A file that could not be read at all (too large, not UTF-8, unreadable) is a read with
 * no objects and the error saying why. Must not be altered once built.
 */
export interface YamlFileRead {
  readonly resources: readonly ConfigResource[];
  readonly errors: readonly MeshmuxError[];
  readonly warnings: readonly MeshmuxError[];
}

/**
 * Many YAML files as one state. Immutable: the next set is built from it, never written into it.
 */
export interface YamlFileSet<R extends YamlFileRead = YamlFileRead> {
  /**
   * Per file, what it serves: its read, plus (while it has errors) the objects it served before
   * and no longer yields. Feed it back as `previous` so kept objects outlive later broken reads.
   */
  readonly files: ReadonlyMap<string, R>;
  /** Every served object once, the later file's where two define the same one, in file order. */
  readonly resources: readonly ConfigResource[];
  /** Every file's errors, in file order. */
  readonly errors: readonly MeshmuxError[];
  /** Every file's warnings, then one per object defined again by a later file. */
  readonly warnings: readonly MeshmuxError[];
}

/** The set of no files. */
export const EMPTY_YAML_FILE_SET: YamlFileSet<never> = {
  files: new Map<string, never>(),
  resources: [],
  errors: [],
  warnings: [],
};

/**
 * The next state of a set of YAML files, from the set served before and what each file present
 * now yields, in the order given (callers list files in path order); a read may carry more than
 * {@link YamlFileRead} (a blob id), kept as it is. A pure function: the rules
 * that file and git sources and `meshmux validate` share, written once.
 *
 * - **Later file wins.** When two files define the same object, the later one is served and a
 *   warning names both.
 * - **A broken file never deletes.** A file whose read has errors keeps serving the objects it
 *   served in `previous` that its read no longer yields (a read that is `previous`'s own entry,
 *   unchanged, is taken as is). A file absent from `reads` is gone, with its objects.
 *
 * Creation times are not this function's business: they are fixed while a file is read (see
 * `FirstSeenTimes`), so an object keeps the one it was first seen with.
 */
export function nextYamlFileSet<R extends YamlFileRead>(
  previous: YamlFileSet<R> | undefined,
  reads: Iterable<readonly [string, R]>,
): YamlFileSet<R> {
  const files = new Map<string, R>();
  // Served objects in the order first defined, and where each is, by kind, namespace and name:
  // nested maps look up the strings each object has, where one key per object would be a string
  // built for every object of every file on every change.
  const served: ConfigResource[] = [];
  const at = new Map<string, Map<string, Map<string, number>>>();
  const errors: MeshmuxError[] = [];
  const warnings: MeshmuxError[] = [];
  for (const [file, read] of reads) {
    appendAll(errors, read.errors);
    appendAll(warnings, read.warnings);
    const before = previous?.files.get(file);
    let resources = read.resources;
    if (read.errors.length > 0 && before !== undefined && before !== read) {
      const now = new Set(resources.map(resourceKey));
      const kept = before.resources.filter((r) => !now.has(resourceKey(r)));
      if (kept.length > 0) resources = [...resources, ...kept];
    }
    files.set(file, resources === read.resources ? read : { ...read, resources });
    for (const r of resources) {
      let namespaces = at.get(r.kind);
      if (namespaces === undefined) at.set(r.kind, (namespaces = new Map<string, Map<string, number>>()));
      let names = namespaces.get(r.namespace);
      if (names === undefined) namespaces.set(r.namespace, (names = new Map<string, number>()));
      const index = names.get(r.name);
      if (index === undefined) {
        names.set(r.name, served.length);
        served.push(r);
        continue;
      }
      const earlier = served[index] as ConfigResource;
      if (earlier.origin.file !== r.origin.file) {
        warnings.push(
          new MeshmuxError(
            'METADATA',
            `${r.kind} ${r.namespace}/${r.name} is also defined in ${earlier.origin.file ?? '?'}; this later file wins`,
            { file: r.origin.file ?? file, ...(r.origin.doc === undefined ? {} : { doc: r.origin.doc }) },
          ),
        );
      }
      served[index] = r;
    }
  }
  return { files, resources: served, errors, warnings };
}

/** Each file entry's {@link sequenceRevision}, computed once per entry. */
const fileRevisions = new WeakMap<YamlFileRead, string>();

/**
 * A content hash of a set: every file's path and the revision of the objects its entry holds, in
 * their order (a file defining one object twice serves the later), those a later file redefines
 * included, in the set's file order. What is served follows from these alone, so the same
 * revision is the same served state. Only entries not seen before are hashed object by object: a
 * change to one file costs that file and a line per file, not a pass over every object.
 */
export function yamlFileSetRevision(set: YamlFileSet): string {
  const lines: string[] = [];
  for (const [file, entry] of set.files) {
    let revision = fileRevisions.get(entry);
    if (revision === undefined) fileRevisions.set(entry, (revision = sequenceRevision(entry.resources)));
    lines.push(`${file}\0${revision}`);
  }
  return digestOfLines(lines);
}
