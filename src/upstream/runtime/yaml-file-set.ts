import { MeshmuxError } from '../../core/errors.js';
import { resourceKey, type ConfigResource } from '../../core/resource.js';
import { appendAll } from '../../core/append-all.js';
import { linesDigest } from '../../core/content-digest.js';
import { sequenceRevision } from './source-revision.js';

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
  previous: YamlFileSet | undefined,
  reads: Iterable<readonly [string, R]>,
): YamlFileSet<R> {
  const files = new Map<string, R>();
  const errors: MeshmuxError[] = [];
  const warnings: MeshmuxError[] = [];
  // The previous set's index moves to this one (a set built from it again counts afresh).
  const inherited = previous === undefined ? undefined : indexes.get(previous);
  if (inherited !== undefined) indexes.delete(previous as YamlFileSet);
  const index = inherited ?? { definers: new ObjectNumbers(), shared: 0 };
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
    const entry = resources === read.resources ? read : { ...read, resources };
    files.set(file, entry);
    if (inherited === undefined) count(index, contribution(entry), 1);
    else if (before !== entry) {
      if (before !== undefined) count(index, contribution(before), -1);
      count(index, contribution(entry), 1);
    }
  }
  if (inherited !== undefined && previous !== undefined) {
    for (const [file, before] of previous.files) if (!files.has(file)) count(index, contribution(before), -1);
  }
  let resources: ConfigResource[];
  if (index.shared === 0) {
    // No object in two files: each file's objects in file order are the served ones.
    resources = [];
    for (const entry of files.values()) appendAll(resources, contribution(entry));
  } else {
    resources = servedAcrossFiles(files, warnings);
  }
  const set = { files, resources, errors, warnings };
  indexes.set(set, index);
  return set;
}

/**
 * What `objects` (the objects a restarted source served before, as its persisted record holds
 * them) served per file, for the files of its first read: as `previous` to
 * {@link nextYamlFileSet}, a file whose first read has errors keeps serving the objects the record
 * attributes to it, as it would have had the process not restarted. An object's `origin.file` is
 * the file as `shownAs` names it (a source may key its files otherwise); objects of files not
 * read, or of none, are left out: those files are gone.
 */
export function restoredYamlFileSet(
  objects: Iterable<ConfigResource>,
  files: Iterable<string>,
  shownAs: (file: string) => string = (file) => file,
): YamlFileSet {
  const byFile = new Map<string, ConfigResource[]>();
  for (const r of objects) {
    if (r.origin.file === undefined) continue;
    const held = byFile.get(r.origin.file);
    if (held === undefined) byFile.set(r.origin.file, [r]);
    else held.push(r);
  }
  const entries = new Map<string, YamlFileRead>();
  const resources: ConfigResource[] = [];
  for (const file of files) {
    const held = byFile.get(shownAs(file));
    if (held === undefined) continue;
    entries.set(file, { resources: held, errors: [], warnings: [] });
    appendAll(resources, held);
  }
  return { files: entries, resources, errors: [], warnings: [] };
}

/**
 * `read` with each object that one of `before`'s equals (the same content version, read from the
 * same document at the same line, with the same creation time) replaced by that instance. A
 * file edited in one place then yields its other objects as the very instances served before,
 * so what comes after (the merge, the encoder) finds them unchanged by identity, without
 * comparing them.
 */
export function withInstancesOf<R extends YamlFileRead>(before: YamlFileRead | undefined, read: R): R {
  if (before === undefined || before.resources.length === 0 || read.resources.length === 0) return read;
  const held = new Map<string, ConfigResource>();
  for (const r of before.resources) held.set(resourceKey(r), r);
  let same = 0;
  const resources = read.resources.map((r) => {
    const p = held.get(resourceKey(r));
    if (p === undefined || !sameRead(p, r)) return r;
    same++;
    return p;
  });
  return same === 0 ? read : { ...read, resources };
}

/**
 * Whether `b`, read again, is `a`: the same content version, read from the same document at the
 * same line of the same file, with the same creation time (its provenance beyond that, such as
 * the commit it was read at, is the caller's).
 */
export function sameRead(a: ConfigResource, b: ConfigResource): boolean {
  return (
    a.version === b.version &&
    a.origin.file === b.origin.file &&
    a.origin.doc === b.origin.doc &&
    a.origin.line === b.origin.line &&
    a.origin.createTimeStamped === b.origin.createTimeStamped &&
    a.createTime.seconds === b.createTime.seconds &&
    a.createTime.nanos === b.createTime.nanos
  );
}

/**
 * What a set keeps so that the next one, built from it, looks only at the files that changed:
 * how many file entries define each object, by kind, namespace and name.
 */
interface SetIndex {
  readonly definers: ObjectNumbers;
  /** Objects defined by more than one entry. */
  shared: number;
}

const indexes = new WeakMap<YamlFileSet, SetIndex>();

/**
 * How many objects more than one file of `set` defines, as the index it carries counts them
 * (undefined once a set was built from it, which took the index over). What decides whether the
 * next set is the files' objects laid end to end or needs a pass over every object.
 */
export function objectsInSeveralFiles(set: YamlFileSet): number | undefined {
  return indexes.get(set)?.shared;
}

/** Adds (`delta` 1) or takes away (-1) one entry's objects from the index's counts. */
function count(index: SetIndex, objects: readonly ConfigResource[], delta: 1 | -1): void {
  for (const r of objects) {
    const was = index.definers.get(r) ?? 0;
    const now = was + delta;
    index.definers.set(r, now);
    if (was === 1 && now === 2) index.shared++;
    else if (was === 2 && now === 1) index.shared--;
  }
}

/**
 * A number per object, by its kind, namespace and name in nested maps: each look-up reads the
 * strings the object has, where one key per object would be a string built for each. A number
 * set to 0 is removed.
 */
class ObjectNumbers {
  private readonly kinds = new Map<string, Map<string, Map<string, number>>>();

  get(r: ConfigResource): number | undefined {
    return this.kinds.get(r.kind)?.get(r.namespace)?.get(r.name);
  }

  set(r: ConfigResource, n: number): void {
    let namespaces = this.kinds.get(r.kind);
    if (namespaces === undefined)
      this.kinds.set(r.kind, (namespaces = new Map<string, Map<string, number>>()));
    let names = namespaces.get(r.namespace);
    if (names === undefined) namespaces.set(r.namespace, (names = new Map<string, number>()));
    if (n === 0) names.delete(r.name);
    else names.set(r.name, n);
  }
}

/** Each entry's objects once, the later where it defines one twice, computed once per entry. */
const contributions = new WeakMap<YamlFileRead, readonly ConfigResource[]>();

function contribution(entry: YamlFileRead): readonly ConfigResource[] {
  let objects = contributions.get(entry);
  if (objects === undefined) {
    const into = { at: new ObjectNumbers(), served: [] as ConfigResource[] };
    addServed(into, entry.resources, '', []);
    // Nearly always: no object twice, and the entry's own list is its contribution.
    objects = into.served.length === entry.resources.length ? entry.resources : into.served;
    contributions.set(entry, objects);
  }
  return objects;
}

/**
 * Adds `objects` (of `file`) to what is served: each object once, at the place of its first
 * definition, with its last; `warnings` gets one for each object defined again from another file.
 */
function addServed(
  into: { readonly at: ObjectNumbers; readonly served: ConfigResource[] },
  objects: readonly ConfigResource[],
  file: string,
  warnings: MeshmuxError[],
): void {
  const { at, served } = into;
  for (const r of objects) {
    // Positions are kept plus one (0 is no entry).
    const i = at.get(r);
    if (i === undefined) {
      served.push(r);
      at.set(r, served.length);
      continue;
    }
    const earlier = served[i - 1] as ConfigResource;
    if (earlier.origin.file !== r.origin.file) {
      warnings.push(
        new MeshmuxError(
          'METADATA',
          `${r.kind} ${r.namespace}/${r.name} is also defined in ${earlier.origin.file ?? '?'}; this later file wins`,
          { file: r.origin.file ?? file, ...(r.origin.doc === undefined ? {} : { doc: r.origin.doc }) },
        ),
      );
    }
    served[i - 1] = r;
  }
}

/**
 * The served objects of files some of which define the same object: each once, in the order
 * first defined, the later file's where two define it, with a warning naming both.
 */
function servedAcrossFiles(
  files: ReadonlyMap<string, YamlFileRead>,
  warnings: MeshmuxError[],
): ConfigResource[] {
  const into = { at: new ObjectNumbers(), served: [] as ConfigResource[] };
  for (const [file, entry] of files) addServed(into, entry.resources, file, warnings);
  return into.served;
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
  return linesDigest(lines);
}
