import { z } from 'zod';
import { FileSourceConfig } from './sources/file.js';
import { GitSourceConfig } from './sources/git.js';
import { ZookeeperSourceConfig } from './sources/zookeeper.js';
import { McpSinkSourceConfig } from './sources/mcp-sink.js';
import { McpSourceConfig } from './sources/mcp.js';
import { XdsSourceConfig } from './sources/xds.js';

/**
 * Every source type's configuration schema, discriminated by `type`. A new source type adds its
 * schema file under sources/ and one entry here.
 */
export const SourceConfig = z.discriminatedUnion('type', [
  FileSourceConfig,
  GitSourceConfig,
  ZookeeperSourceConfig,
  XdsSourceConfig,
  McpSourceConfig,
  McpSinkSourceConfig,
]);

export type SourceConfig = z.infer<typeof SourceConfig>;
