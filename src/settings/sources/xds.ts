import { z } from 'zod';
import { COMMON_SOURCE_FIELDS, HostPort } from './common.js';
import { ApiVersions, DIAL_FIELDS, KindName, NodeIdentity } from './upstream-fields.js';

/**
 * `type: xds`: an MCP-over-xDS upstream (istiod's api generator, Nacos, Higress, another
 * meshmux), subscribed over ADS.
 */
export const XdsSourceConfig = z.strictObject({
  ...COMMON_SOURCE_FIELDS,
  type: z.literal('xds'),
  /** `host:port` of the upstream's ADS endpoint. */
  address: HostPort,
  /** Delta ADS instead of state of the world (Nacos serves it for ServiceEntry). */
  delta: z.boolean().default(false),
  /** Kinds to subscribe; default every config kind. */
  kinds: z.array(KindName).min(1).optional(),
  /** Type-URL spelling to ask for; default `auto`. */
  apiVersions: ApiVersions.default('auto'),
  node: NodeIdentity.optional(),
  ...DIAL_FIELDS,
});

export type XdsSourceConfig = z.infer<typeof XdsSourceConfig>;
