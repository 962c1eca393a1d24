/** How `google.protobuf.Any` names a message: this prefix and the message's full name. */
export const TYPE_URL_PREFIX = 'type.googleapis.com/';

/** The `Any` type URL of a message, by its full name (`istio.mcp.v1alpha1.Resource`). */
export function anyTypeUrl(fullName: string): string {
  return `${TYPE_URL_PREFIX}${fullName}`;
}

/** The envelope every MCP-over-xDS object travels in. */
export const MCP_RESOURCE_TYPE_URL = anyTypeUrl('istio.mcp.v1alpha1.Resource');

/** How an `Any`'s type URL ends when it holds an MCP envelope, whatever its host part. */
export const MCP_RESOURCE_SUFFIX = '/istio.mcp.v1alpha1.Resource';
