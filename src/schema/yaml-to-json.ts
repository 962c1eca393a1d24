/**
 * Turns a parsed YAML node into the JSON value Istio would see for it. Istio and kubectl convert
 * YAML to JSON with sigs.k8s.io/yaml on top of go-yaml v2, and this module follows them:
 * YAML 1.1 scalars (see go-yaml-scalar.ts), non-string keys written as strings (`80` → `"80"`,
 * `on` → `"true"`), `<<` merge keys applied in document order, later duplicate keys winning, and
 * values JSON cannot hold (NaN, infinities, null keys) rejected.
 */
import {
  isAlias,
  isMap,
  isScalar,
  isSeq,
  visit,
  type Alias,
  type Document,
  type Node,
  type Scalar,
} from 'yaml';
import { childPath, indexPath } from './field-path.js';
import { resolvePlainScalar, resolveTaggedScalar, type ResolvedScalar } from './go-yaml-scalar.js';
import { setJsonKey, type JsonObject, type JsonValue } from './json-value.js';

/** A problem found while converting, with the field path it concerns. */
export interface YamlJsonIssue {
  readonly path: string;
  readonly reason: string;
}

/** The converted value (undefined where an error made it unusable) and what was found on the way. */
export interface YamlJsonResult {
  readonly value: JsonValue | undefined;
  readonly errors: readonly YamlJsonIssue[];
  readonly warnings: readonly YamlJsonIssue[];
}

/**
 * Default number of nodes that aliases of one input (a whole file, all its documents together)
 * may expand to. Aliases can make a few bytes expand exponentially ("billion laughs"), and a file
 * of many such documents multiplies that, so the budget is per file, not per document. Nodes
 * written out in the text are not counted: the file size cap bounds them. Real Istio files use
 * few aliases, if any. A document is checked and encoded without pausing, node by expanded node,
 * so the limit also bounds how long one document can hold the event loop (a few ms).
 */
export const ALIAS_EXPANSION_LIMIT = 25_000;

/**
 * The alias expansion allowance of one input, shared by every `yamlToJson` call on it. Mutable:
 * each conversion spends from it; once spent, every later alias of that input is refused.
 */
export class AliasBudget {
  private used = 0;

  constructor(readonly limit: number = ALIAS_EXPANSION_LIMIT) {}

  /** Spends `nodes` (default one); false once the limit is passed. */
  spend(nodes = 1): boolean {
    this.used += nodes;
    return this.used <= this.limit;
  }

  /** Whether the limit has been passed. */
  get exhausted(): boolean {
    return this.used > this.limit;
  }
}

const YAML_TAG_PREFIX = 'tag:yaml.org,2002:';

class Budget extends Error {
  constructor(readonly path: string) {
    super('alias expansion limit');
  }
}

/** Go's `strconv.FormatFloat(f, 'g', -1, 32)`, which sigs.k8s.io/yaml uses for float map keys. */
function formatGoFloat32(value: number): string {
  if (Number.isNaN(value)) return '.nan';
  if (value === Number.POSITIVE_INFINITY) return '.inf';
  if (value === Number.NEGATIVE_INFINITY) return '-.inf';
  const f = Math.fround(value);
  if (f === 0) return Object.is(f, -0) ? '-0' : '0';
  // Shortest digits that read back as the same float32.
  let digits = '';
  let exponent = 0;
  for (let precision = 1; precision <= 9; precision++) {
    const text = Math.abs(f).toExponential(precision - 1);
    if (Math.fround(Number(text)) === Math.abs(f)) {
      const [mantissa = '', exp = '0'] = text.split('e');
      digits = mantissa.replace('.', '');
      exponent = Number(exp);
      break;
    }
  }
  const sign = f < 0 ? '-' : '';
  // With the shortest precision Go uses exponent form for exponents below -4 or from 6 upwards.
  if (exponent < -4 || exponent >= 6) {
    const mantissa = digits.length > 1 ? `${digits[0] ?? ''}.${digits.slice(1)}` : digits;
    const expSign = exponent < 0 ? '-' : '+';
    return `${sign}${mantissa}e${expSign}${String(Math.abs(exponent)).padStart(2, '0')}`;
  }
  if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
  if (digits.length <= exponent + 1) return `${sign}${digits}${'0'.repeat(exponent + 1 - digits.length)}`;
  return `${sign}${digits.slice(0, exponent + 1)}.${digits.slice(exponent + 1)}`;
}

class Converter {
  readonly errors: YamlJsonIssue[] = [];
  readonly warnings: YamlJsonIssue[] = [];
  /** How many aliases enclose the node being converted: nodes reached through one are charged. */
  private aliasDepth = 0;
  private readonly resolving = new Set<Node>();
  private aliasTargets: Map<Alias, Node | undefined> | undefined;
  /** Nodes converted so far: the size of a value is the count its conversion added. */
  private visited = 0;
  /**
   * Converted anchored nodes that produced no error or warning, with their expanded size. An
   * alias reuses the value (JSON values are never altered afterwards) and spends its size from
   * the budget at once: an alias bomb then costs time in proportion to its text, while its
   * expanded size is still counted against the limit.
   */
  private readonly anchored = new Map<Node, { readonly value: JsonValue; readonly size: number }>();

  constructor(
    private readonly doc: Document,
    private readonly budget: AliasBudget,
  ) {}

  /**
   * Each alias's anchor, found in one walk of the document: the nearest anchor of that name before
   * the alias. (Looking each alias up separately costs a walk per alias, which a document of many
   * aliases turns into quadratic time.)
   */
  private targets(): Map<Alias, Node | undefined> {
    if (this.aliasTargets !== undefined) return this.aliasTargets;
    const targets = new Map<Alias, Node | undefined>();
    const anchors = new Map<string, Node>();
    visit(this.doc, {
      Node: (_key, node) => {
        if (isAlias(node)) targets.set(node, anchors.get(node.source));
        else if (node.anchor !== undefined) anchors.set(node.anchor, node);
      },
    });
    this.aliasTargets = targets;
    return targets;
  }

  private error(path: string, reason: string): undefined {
    this.errors.push({ path, reason });
    return undefined;
  }

  /** The node an alias points at, or undefined (with an error) when it is dangling or circular. */
  private deref(node: unknown, path: string): Node | null | undefined {
    if (!isAlias(node)) return node as Node | null;
    const index = this.targets();
    // A node outside the document's tree (a caller's own) falls back to the library's lookup.
    const target = index.has(node) ? index.get(node) : node.resolve(this.doc);
    if (target === undefined) return this.error(path, `alias *${node.source} has no anchor before it`);
    if (this.resolving.has(target)) return this.error(path, `alias *${node.source} refers to itself`);
    return target;
  }

  convert(input: unknown, path: string): JsonValue | undefined {
    if (this.aliasDepth > 0 && !this.budget.spend()) throw new Budget(path);
    this.visited++;
    if (input === null || input === undefined) return null;
    const node = this.deref(input, path);
    if (node === undefined) return undefined;
    if (node === null) return null;
    const viaAlias = isAlias(input);
    const cached = viaAlias ? this.anchored.get(node) : undefined;
    if (cached !== undefined) {
      // Counted as if expanded, so the values that hold this one have their full size too.
      this.visited += cached.size - 1;
      if (!this.budget.spend(cached.size)) throw new Budget(path);
      return cached.value;
    }
    if (viaAlias && !this.budget.spend()) throw new Budget(path);
    const before = { visited: this.visited, errors: this.errors.length, warnings: this.warnings.length };
    const value = this.convertNode(node, path, viaAlias);
    if (
      node.anchor !== undefined &&
      value !== undefined &&
      this.errors.length === before.errors &&
      this.warnings.length === before.warnings
    ) {
      this.anchored.set(node, { value, size: this.visited - before.visited + 1 });
    }
    return value;
  }

  private convertNode(node: Node, path: string, viaAlias: boolean): JsonValue | undefined {
    if (viaAlias) this.aliasDepth++;
    this.resolving.add(node);
    try {
      if (isScalar(node)) return this.scalarValue(node, path);
      if (isSeq(node)) {
        const out: JsonValue[] = [];
        node.items.forEach((item, i) => {
          const v = this.convert(item, indexPath(path, i));
          out.push(v ?? null);
        });
        return out;
      }
      if (isMap(node)) {
        const out: JsonObject = {};
        this.fillMap(node.items, out, path, new Set());
        return out;
      }
      return this.error(path, 'unsupported YAML node');
    } finally {
      this.resolving.delete(node);
      if (viaAlias) this.aliasDepth--;
    }
  }

  private fillMap(
    items: readonly { key: unknown; value: unknown }[],
    out: JsonObject,
    path: string,
    explicitKeys: Set<string>,
  ): void {
    for (const pair of items) {
      const keyNode = this.deref(pair.key, path);
      if (keyNode === undefined) continue;
      if (isScalar(keyNode) && this.isMergeKey(keyNode)) {
        this.merge(pair.value, out, path);
        continue;
      }
      const key = this.keyString(keyNode, path);
      if (key === undefined) continue;
      const childAt = childPath(path, key);
      if (explicitKeys.has(key)) {
        this.warnings.push({
          path: childAt,
          reason: `duplicate key ${JSON.stringify(key)}; the last one wins`,
        });
      }
      explicitKeys.add(key);
      const value = this.convert(pair.value, childAt);
      if (value !== undefined) setJsonKey(out, key, value);
    }
  }

  private isMergeKey(key: Scalar): boolean {
    if (key.type !== 'PLAIN' || key.value !== '<<') return false;
    return key.tag === undefined || key.tag === `${YAML_TAG_PREFIX}merge`;
  }

  /** go-yaml v2 applies `<<` where it appears; a list of maps is applied last to first. */
  private merge(valueNode: unknown, out: JsonObject, path: string): void {
    const node = this.deref(valueNode, path);
    if (node === undefined) return;
    const apply = (source: unknown): boolean => {
      const m = this.deref(source, path);
      if (!isMap(m)) return false;
      const viaAlias = isAlias(source) || isAlias(valueNode);
      if (viaAlias) this.aliasDepth++;
      this.resolving.add(m);
      try {
        this.fillMap(m.items, out, path, new Set());
      } finally {
        this.resolving.delete(m);
        if (viaAlias) this.aliasDepth--;
      }
      return true;
    };
    if (isMap(node)) {
      apply(node);
      return;
    }
    if (isSeq(node)) {
      for (const item of [...node.items].reverse()) {
        if (!apply(item)) this.error(path, 'a << merge list may only hold maps');
      }
      return;
    }
    this.error(path, 'a << merge needs a map or a list of maps');
  }

  private resolve(node: Scalar, path: string): ResolvedScalar | undefined {
    // The failsafe schema leaves every scalar as its text (an empty one may come back as null).
    const text = typeof node.value === 'string' ? node.value : '';
    const tag = node.tag;
    if (tag === undefined) {
      return node.type === 'PLAIN' || node.type === undefined
        ? resolvePlainScalar(text)
        : { tag: 'str', value: text };
    }
    if (!tag.startsWith(YAML_TAG_PREFIX)) return { tag: 'str', value: text }; // custom tags keep their text
    const short = tag.slice(YAML_TAG_PREFIX.length);
    switch (short) {
      case 'str':
      case 'int':
      case 'float':
      case 'bool':
      case 'null': {
        const r = resolveTaggedScalar(short, text);
        return 'error' in r ? this.error(path, r.error) : r;
      }
      case 'binary':
        return { tag: 'str', value: Buffer.from(text.replace(/\s+/g, ''), 'base64').toString('utf8') };
      default:
        // !!timestamp and anything else go-yaml cannot resolve keep their text.
        return { tag: 'str', value: text };
    }
  }

  private scalarValue(node: Scalar, path: string): JsonValue | undefined {
    const r = this.resolve(node, path);
    if (r === undefined) return undefined;
    if ((r.tag === 'float' || r.tag === 'int') && !Number.isFinite(r.value)) {
      return this.error(path, `${String(r.value)} cannot be represented in JSON`);
    }
    return r.value;
  }

  private keyString(keyNode: Node | null, path: string): string | undefined {
    if (keyNode === null) return this.error(path, 'a map key is missing (null)');
    if (!isScalar(keyNode)) return this.error(path, 'map keys must be scalars, not lists or maps');
    const r = this.resolve(keyNode, path);
    if (r === undefined) return undefined;
    switch (r.tag) {
      case 'str':
        return r.value;
      case 'bool':
        return r.value ? 'true' : 'false';
      case 'int':
        return Number.isSafeInteger(r.value) ? String(r.value) : BigInt(r.value).toString();
      case 'float':
        return formatGoFloat32(r.value);
      case 'null':
        return this.error(path, 'a map key is null');
    }
  }
}

/**
 * Converts one node of `doc` (usually its contents, or a part of them) as sigs.k8s.io/yaml would.
 * `path` prefixes every issue's field path. Aliases spend from `budget`: pass one budget for all
 * documents of a file (the default is a fresh one per call). Never throws: problems come back as
 * errors (the value is then partial or undefined) and duplicate keys as warnings; a spent budget
 * is an error whose reason starts with "alias expansion limit", and the value is undefined.
 */
export function yamlToJson(
  node: unknown,
  doc: Document,
  path = '',
  budget: AliasBudget = new AliasBudget(),
): YamlJsonResult {
  const converter = new Converter(doc, budget);
  try {
    const value = converter.convert(node, path);
    return { value, errors: converter.errors, warnings: converter.warnings };
  } catch (err) {
    if (!(err instanceof Budget)) throw err;
    return {
      value: undefined,
      errors: [
        {
          path: err.path,
          reason: `alias expansion limit: the aliases of this file expand to more than ${budget.limit} nodes`,
        },
      ],
      warnings: converter.warnings,
    };
  }
}
