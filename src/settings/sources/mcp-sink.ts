import { z } from 'zod';
import { COMMON_SOURCE_FIELDS, ListenAddress } from './common.js';
import { CollectionKindName, DIAL_FIELDS, SinkNode } from './upstream-fields.js';

/** `type: mcp-sink`: meshmux listens, and a Galley configured with this sink address pushes to it. */
export const McpSinkSourceConfig = z.strictObject({
  ...COMMON_SOURCE_FIELDS,
  type: z.literal('mcp-sink'),
  /** `host:port` to serve `ResourceSink` on. */
  listen: ListenAddress,
  kinds: z.array(CollectionKindName).min(1).optional(),
  incremental: z.boolean().default(false),
  sinkNode: SinkNode.optional(),
  /** Server TLS: `cert` and `key`; with `ca`, client certificates are required and verified. */
  tls: DIAL_FIELDS.tls,
  maxReceiveSize: DIAL_FIELDS.maxReceiveSize,
  syncTimeout: DIAL_FIELDS.syncTimeout,
});

export type McpSinkSourceConfig = z.infer<typeof McpSinkSourceConfig>;
