import { z } from 'zod';
import { COMMON_SOURCE_FIELDS, HostPort } from './common.js';
import { CollectionKindName, DIAL_FIELDS, SinkNode } from './upstream-fields.js';

/** `type: mcp`: a Galley-era MCP source meshmux dials (`ResourceSource`, Istio 1.1–1.8). */
export const McpSourceConfig = z.strictObject({
  ...COMMON_SOURCE_FIELDS,
  type: z.literal('mcp'),
  /** `host:port` of the Galley. */
  address: HostPort,
  /** Kinds whose collections to ask for; default every kind that had one. Ask only for what the Galley serves. */
  kinds: z.array(CollectionKindName).min(1).optional(),
  /** Ask for incremental updates; default full state. */
  incremental: z.boolean().default(false),
  sinkNode: SinkNode.optional(),
  ...DIAL_FIELDS,
});

export type McpSourceConfig = z.infer<typeof McpSourceConfig>;
