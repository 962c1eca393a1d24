/** The gRPC services meshmux serves or dials, and the full paths of their streaming methods. */

/** Envoy's aggregated discovery service: what istiod dials, and what meshmux serves and dials. */
export const ADS_SERVICE = 'envoy.service.discovery.v3.AggregatedDiscoveryService';
/** State-of-the-world ADS. */
export const ADS_SOTW_METHOD = `/${ADS_SERVICE}/StreamAggregatedResources`;
/** Incremental (delta) ADS. */
export const ADS_DELTA_METHOD = `/${ADS_SERVICE}/DeltaAggregatedResources`;
/** Galley-era MCP: a source meshmux dials. */
export const MCP_RESOURCE_SOURCE_METHOD = '/istio.mcp.v1alpha1.ResourceSource/EstablishResourceStream';
/** Galley-era MCP: a sink meshmux serves, which a Galley dials. */
export const MCP_RESOURCE_SINK_METHOD = '/istio.mcp.v1alpha1.ResourceSink/EstablishResourceStream';
