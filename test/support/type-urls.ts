/**
 * The type URLs tests ask for and check, written once. Literal strings on purpose: a test states
 * what istiod sends on the wire, independently of the kind registry it checks.
 */

/** `networking.istio.io/v1/ServiceEntry`, as istiod ≥1.24 asks for it. */
export const SE = 'networking.istio.io/v1/ServiceEntry';
/** `networking.istio.io/v1alpha3/ServiceEntry`, as older istiods and Nacos spell it. */
export const SE_LEGACY = 'networking.istio.io/v1alpha3/ServiceEntry';
/** `networking.istio.io/v1/VirtualService`. */
export const VS = 'networking.istio.io/v1/VirtualService';
/** `networking.istio.io/v1alpha3/VirtualService`, as istiod ≤1.23 asks for it. */
export const VS_LEGACY = 'networking.istio.io/v1alpha3/VirtualService';
/** `networking.istio.io/v1/DestinationRule`. */
export const DR = 'networking.istio.io/v1/DestinationRule';
/** `networking.istio.io/v1/Sidecar`. */
export const SIDECAR = 'networking.istio.io/v1/Sidecar';
/** `networking.istio.io/v1/WorkloadEntry`. */
export const WE = 'networking.istio.io/v1/WorkloadEntry';
/** `networking.istio.io/v1alpha3/EnvoyFilter`. */
export const EF = 'networking.istio.io/v1alpha3/EnvoyFilter';
/** `security.istio.io/v1/AuthorizationPolicy`. */
export const AUTHZ = 'security.istio.io/v1/AuthorizationPolicy';
