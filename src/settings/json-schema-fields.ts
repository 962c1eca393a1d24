import { appendAll } from '../core/append-all.js';

/** A JSON Schema (draft 2020-12) node, as far as this module reads it. */
export type SchemaNode = Readonly<Record<string, unknown>>;

/**
 * The field names `schema` allows in the object at `path` (array indexes included), across the
 * alternatives of a union; empty when the path leads nowhere the schema knows.
 */
export function fieldsAt(schema: SchemaNode, path: readonly PropertyKey[]): string[] {
  let nodes: SchemaNode[] = [schema];
  for (const step of path) {
    nodes = nodes.flatMap(alternatives).flatMap((n): SchemaNode[] => {
      const items = n['items'] as SchemaNode | undefined;
      if (typeof step === 'number') return items === undefined ? [] : [items];
      const props = n['properties'] as Record<string, SchemaNode> | undefined;
      const next = props?.[String(step)];
      return next === undefined ? [] : [next];
    });
  }
  const names = new Set<string>();
  for (const n of nodes.flatMap(alternatives))
    for (const name of Object.keys((n['properties'] as Record<string, unknown> | undefined) ?? {}))
      names.add(name);
  return [...names];
}

/** The node itself and, recursively, the alternatives of its `anyOf`/`oneOf`/`allOf`. */
function alternatives(node: SchemaNode): SchemaNode[] {
  const out: SchemaNode[] = [node];
  for (const key of ['anyOf', 'oneOf', 'allOf'])
    for (const alt of (node[key] as SchemaNode[] | undefined) ?? []) appendAll(out, alternatives(alt));
  return out;
}
