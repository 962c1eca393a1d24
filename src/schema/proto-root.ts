import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_DIR } from '../core/paths.js';

/** `package a.b.c;` at the start of a line of a .proto file. */
const PACKAGE_LINE = /^\s*package\s+([A-Za-z_][\w.]*)\s*;/m;

/**
 * The messages of a folder of .proto files, each file parsed the first time a name of its
 * package is asked for (with the files it imports): a start parses the few files the sources
 * and the wire need, where parsing them all took some 20 ms more. A name no package of the folder
 * prefixes (a well-known type asked for alone, a type from elsewhere) loads every file first, so
 * whatever the whole folder defines is found. Field names keep their proto spelling.
 */
export class ProtoLibrary {
  private readonly root = new protobuf.Root();
  /** Package → the files declaring it, longest package first. */
  private readonly packages: readonly { readonly name: string; readonly files: readonly string[] }[];
  private readonly loaded = new Set<string>();
  private complete = false;
  private readonly types = new Map<string, protobuf.Type>();

  constructor(private readonly dir: string) {
    // Imports are written relative to the folder; the well-known google/protobuf types come with protobufjs.
    this.root.resolvePath = (_origin, target) => {
      const local = path.join(dir, target);
      return existsSync(local) ? local : target;
    };
    const byPackage = new Map<string, string[]>();
    for (const file of this.files()) {
      const declared = PACKAGE_LINE.exec(readFileSync(file, 'utf8'))?.[1] ?? '';
      const files = byPackage.get(declared) ?? [];
      files.push(file);
      byPackage.set(declared, files);
    }
    this.packages = [...byPackage]
      .map(([name, files]) => ({ name, files }))
      .sort((a, b) => b.name.length - a.name.length);
  }

  /** The type, enum or other definition of a full name (a leading dot or none); null when none. */
  lookup(name: string): protobuf.ReflectionObject | null {
    const fullName = name.startsWith('.') ? name.slice(1) : name;
    const found = this.root.lookup(fullName);
    if (found !== null || this.complete) return found;
    const owners = this.packages.filter((p) => p.name !== '' && fullName.startsWith(`${p.name}.`));
    if (owners.some((p) => p.files.some((f) => !this.loaded.has(f)))) {
      this.load(owners.flatMap((p) => p.files));
      const again = this.root.lookup(fullName);
      if (again !== null) return again;
    }
    return this.all().lookup(fullName);
  }

  /**
   * A message type by full name (without a leading dot); throws if the folder has none.
   * Remembered: protobufjs walks the namespace tree on every lookup, and readers ask per object.
   */
  messageType(fullName: string): protobuf.Type {
    let type = this.types.get(fullName);
    if (type === undefined) {
      const found = this.lookup(fullName);
      if (!(found instanceof protobuf.Type)) throw new Error(`no message type ${fullName} in proto/`);
      this.types.set(fullName, (type = found));
    }
    return type;
  }

  /** The files parsed so far, relative to the folder, in the order parsed (imports not named). */
  get loadedFiles(): readonly string[] {
    return [...this.loaded].map((f) => path.relative(this.dir, f));
  }

  /** The root with every file of the folder loaded and resolved. */
  all(): protobuf.Root {
    if (!this.complete) {
      this.load(this.files());
      this.complete = true;
    }
    return this.root;
  }

  private files(): string[] {
    return readdirSync(this.dir, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.proto'))
      .sort()
      .map((f) => path.join(this.dir, f));
  }

  private load(files: readonly string[]): void {
    const fresh = files.filter((f) => !this.loaded.has(f));
    if (fresh.length === 0) return;
    this.root.loadSync(fresh, { keepCase: true });
    this.root.resolveAll();
    for (const f of fresh) this.loaded.add(f);
  }
}

/** Every message meshmux knows, from proto/, each package loaded when first asked for. */
const library = new ProtoLibrary(PROTO_DIR);

/** Looks up a message type by full name (without a leading dot); throws if it is not in proto/. */
export function messageType(fullName: string): protobuf.Type {
  return library.messageType(fullName);
}

/** Any definition of proto/ (or a well-known type) by full name (a leading dot or none); null when none. */
export function lookupProto(fullName: string): protobuf.ReflectionObject | null {
  return library.lookup(fullName);
}

/** The root of every message of proto/, all loaded (tools and tests that walk the whole schema). */
export function allProtos(): protobuf.Root {
  return library.all();
}

/** The Any type URL of a message: written once, in the protocol module. */
export { anyTypeUrl } from '../wire/type-urls.js';

const fullNames = new WeakMap<protobuf.ReflectionObject, string>();

/**
 * `type.fullName` (with its leading dot), remembered: protobufjs builds the string again on every
 * read, walking the parents, which readers that ask it per field of every object pay for.
 */
export function fullNameOf(type: protobuf.ReflectionObject): string {
  let name = fullNames.get(type);
  if (name === undefined) fullNames.set(type, (name = type.fullName));
  return name;
}
