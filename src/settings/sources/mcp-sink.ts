import { z } from 'zod';
import { COMMON_SOURCE_FIELDS, Duration, ListenAddress, TlsFiles } from './common.js';
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
  /**
   * Server TLS: `cert` and `key`; with `ca`, client certificates are required and verified. The
   * files are read again every `refreshInterval` (default 10s), so a rotation needs no restart.
   */
  tls: TlsFiles.extend({ refreshInterval: Duration.optional() }).optional(),
  maxReceiveSize: DIAL_FIELDS.maxReceiveSize,
  syncTimeout: DIAL_FIELDS.syncTimeout,
});

export type McpSinkSourceConfig = z.infer<typeof McpSinkSourceConfig>;
