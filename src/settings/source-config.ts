import { z } from 'zod';
import { FileSourceConfig } from './sources/file.js';
import { GitSourceConfig } from './sources/git.js';
import { KubernetesSourceConfig } from './sources/kubernetes.js';
import { ZookeeperSourceConfig } from './sources/zookeeper.js';
import { McpSinkSourceConfig } from './sources/mcp-sink.js';
import { McpSourceConfig } from './sources/mcp.js';
import { XdsSourceConfig } from './sources/xds.js';
import { MERGE_RULE_FIELDS, type MergeRules } from './sources/common.js';

const SCHEMAS = [
  FileSourceConfig,
  GitSourceConfig,
  ZookeeperSourceConfig,
  KubernetesSourceConfig,
  XdsSourceConfig,
  McpSourceConfig,
  McpSinkSourceConfig,
] as const;

const SOURCE_TYPES: readonly string[] = SCHEMAS.map((schema) => schema.shape.type.value);

/**
 * Every source type's configuration schema, discriminated by `type`. A new source type adds its
 * schema file under sources/ and one entry here.
 */
export const SourceConfig = z.discriminatedUnion('type', SCHEMAS, {
  error: (issue) => {
    if (issue.code !== 'invalid_union') return undefined;
    const type = (issue.input as { type?: unknown } | undefined)?.type;
    const what = type === undefined ? 'a source needs a type' : `unknown source type ${JSON.stringify(type)}`;
    return `${what}: one of ${SOURCE_TYPES.join(', ')}`;
  },
});

/** A source's settings as the schema reads them: merge rules flat beside the rest. */
type FlatSourceConfig = z.infer<typeof SourceConfig>;

/** `Omit` over each member of a union (the plain one would merge the members). */
type OmitEach<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * A configured source: how to reach its upstream (type-specific fields) and, apart, its merge
 * `rules`. Two configurations of one source that differ only in `rules` run the same source.
 */
export type SourceConfig = OmitEach<FlatSourceConfig, keyof MergeRules> & { readonly rules: MergeRules };

const RULE_KEYS = Object.keys(MERGE_RULE_FIELDS) as Array<keyof MergeRules>;

/** Moves the merge-rule fields of a parsed source into `rules`; which fields they are comes from the schema. */
export function withRules(flat: FlatSourceConfig): SourceConfig {
  const rest: Record<string, unknown> = { ...flat };
  const rules: Record<string, unknown> = {};
  for (const key of RULE_KEYS) {
    if (rest[key] !== undefined) rules[key] = rest[key];
    delete rest[key];
  }
  return { ...rest, rules } as SourceConfig;
}
