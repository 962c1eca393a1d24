import type { Logger } from '../../core/logger.js';
import type { McpResourceReader } from '../mcp-resource-reader.js';
import type { NodeIdentity } from '../node-identity.js';
import type { SubscriptionState } from '../subscription-state.js';

/** Any type URL suffix of the MCP envelope around every object. */
export const MCP_RESOURCE_SUFFIX = '/istio.mcp.v1alpha1.Resource';

/** `google.rpc.Code.INVALID_ARGUMENT`, the code of every NACK an ADS client sends. */
export const INVALID_ARGUMENT = 3;

/** What both ADS clients (state of the world and delta) work with; owned by the source. */
export interface AdsClientContext {
  readonly state: SubscriptionState;
  readonly reader: McpResourceReader;
  readonly node: NodeIdentity;
  readonly log: Logger;
  /** `xds://host:port`, for messages. */
  readonly describe: string;
  /** The upstream answered: resets the reconnect backoff. */
  readonly onAnswer: () => void;
}
