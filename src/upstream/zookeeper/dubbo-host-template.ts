import { MeshmuxError } from '../../core/errors.js';
import { dnsLabel, dnsPath, istioHostProblem } from './dns-names.js';

/** What a host template can name, from one (interface, group, version) service. */
export interface HostFields {
  readonly interface: string;
  readonly group: string;
  readonly version: string;
  readonly application: string;
  readonly protocol: string;
}

type Placeholder = keyof HostFields;
type Part = { readonly text: string } | { readonly field: Placeholder };
type Segment = { readonly optional: boolean; readonly parts: readonly Part[] };

const PLACEHOLDERS: ReadonlySet<string> = new Set<Placeholder>([
  'interface',
  'group',
  'version',
  'application',
  'protocol',
]);

/** Literal text may only hold what a host may hold. */
const LITERAL = /^[A-Za-z0-9.-]*$/;

/**
 * Turns a service's fields into a ServiceEntry host.
 *
 * Syntax: `{interface}`, `{group}`, `{version}`, `{application}`, `{protocol}` placeholders,
 * literal text of letters, digits, `.` and `-`, and `[...]` optional segments that are left out
 * when a placeholder inside them is empty. `{interface}` keeps its dots as label separators
 * (`com.foo.BarService` → `com.foo.barservice`); every other placeholder becomes one label
 * (`1.0.0` → `1-0-0`). Everything is lower-cased and characters outside `[a-z0-9-]` become `-`.
 *
 * The default, `[{version}.][{group}.]{interface}`, gives `com.foo.barservice`,
 * `1-0-0.com.foo.barservice` or `1-0-0.sales.com.foo.barservice`: the interface stays the tail
 * (so the top-level label is never all digits) and the more specific labels come first, as in DNS.
 */
export class DubboHostTemplate {
  static readonly DEFAULT = '[{version}.][{group}.]{interface}';

  private readonly segments: readonly Segment[];

  /** Throws a MeshmuxError (CONFIG) naming the problem when `source` is not a valid template. */
  constructor(readonly source: string = DubboHostTemplate.DEFAULT) {
    this.segments = parseTemplate(source);
  }

  /**
   * The host for `fields`, or why there is none: a required placeholder is empty, or the result
   * fails Istio's host validation.
   */
  render(fields: HostFields): { readonly host: string } | { readonly error: string } {
    let host = '';
    for (const segment of this.segments) {
      let text = '';
      let missing: Placeholder | undefined;
      for (const part of segment.parts) {
        if ('text' in part) {
          text += part.text.toLowerCase();
          continue;
        }
        const value = part.field === 'interface' ? dnsPath(fields.interface) : dnsLabel(fields[part.field]);
        if (value === '') missing ??= part.field;
        text += value;
      }
      if (missing !== undefined) {
        if (segment.optional) continue;
        return { error: `host template "${this.source}" needs {${missing}}, which is empty` };
      }
      host += text;
    }
    const problem = istioHostProblem(host);
    return problem === undefined ? { host } : { error: `${problem} (from host template "${this.source}")` };
  }
}

function parseTemplate(source: string): Segment[] {
  const bad = (why: string): MeshmuxError => new MeshmuxError('CONFIG', `host template "${source}": ${why}`);
  const segments: Segment[] = [];
  let parts: Part[] = [];
  let optional = false;
  let i = 0;
  const close = (): void => {
    if (parts.length > 0) segments.push({ optional, parts });
    parts = [];
  };
  while (i < source.length) {
    const c = source[i];
    if (c === '[') {
      if (optional) throw bad('optional segments cannot nest');
      close();
      optional = true;
      i++;
    } else if (c === ']') {
      if (!optional) throw bad('"]" without "["');
      if (!parts.some((p) => 'field' in p)) throw bad('an optional segment needs a placeholder');
      close();
      optional = false;
      i++;
    } else if (c === '{') {
      const end = source.indexOf('}', i);
      if (end < 0) throw bad('"{" without "}"');
      const name = source.slice(i + 1, end);
      if (!PLACEHOLDERS.has(name)) {
        throw bad(`unknown placeholder {${name}}; use ${[...PLACEHOLDERS].map((p) => `{${p}}`).join(', ')}`);
      }
      parts.push({ field: name as Placeholder });
      i = end + 1;
    } else {
      let end = i;
      while (end < source.length && !'[]{}'.includes(source[end] ?? '')) end++;
      const text = source.slice(i, end);
      if (!LITERAL.test(text)) throw bad(`"${text}" may only hold letters, digits, "." and "-"`);
      parts.push({ text });
      i = end;
    }
  }
  if (optional) throw bad('"[" without "]"');
  close();
  if (!segments.some((s) => !s.optional && s.parts.some((p) => 'field' in p && p.field === 'interface'))) {
    throw bad('it must contain {interface} outside optional segments, or interfaces would share hosts');
  }
  return segments;
}
