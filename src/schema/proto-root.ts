import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_DIR } from '../core/paths.js';

function loadRoot(): protobuf.Root {
  const root = new protobuf.Root();
  // Imports are written relative to proto/; the well-known google/protobuf types come with protobufjs.
  root.resolvePath = (_origin, target) => {
    const local = path.join(PROTO_DIR, target);
    return existsSync(local) ? local : target;
  };
  const files = readdirSync(PROTO_DIR, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.proto'))
    .sort()
    .map((f) => path.join(PROTO_DIR, f));
  root.loadSync(files, { keepCase: true });
  root.resolveAll();
  return root;
}

/** Every message meshmux knows, loaded once from proto/. Field names keep their proto spelling. */
export const protoRoot: protobuf.Root = loadRoot();

const typesByName = new Map<string, protobuf.Type>();

/**
 * Looks up a message type by full name (without a leading dot); throws if it is not in proto/.
 * Remembered: protobufjs walks the namespace tree on every lookup, and readers ask per object.
 */
export function messageType(fullName: string): protobuf.Type {
  let type = typesByName.get(fullName);
  if (type === undefined) typesByName.set(fullName, (type = protoRoot.lookupType(fullName)));
  return type;
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
