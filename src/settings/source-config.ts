import { z } from 'zod';
import { FileSourceConfig } from './sources/file.js';
import { GitSourceConfig } from './sources/git.js';
import { ZookeeperSourceConfig } from './sources/zookeeper.js';
import { McpSinkSourceConfig } from './sources/mcp-sink.js';
import { McpSourceConfig } from './sources/mcp.js';
import { XdsSourceConfig } from './sources/xds.js';

const SCHEMAS = [
  FileSourceConfig,
  GitSourceConfig,
  ZookeeperSourceConfig,
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

export type SourceConfig = z.infer<typeof SourceConfig>;
