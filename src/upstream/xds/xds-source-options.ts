import type { SourceTiming } from '../runtime/source-clock.js';
import type { DialSettings } from '../streaming/dial-settings.js';
import type { NodeIdentityConfig } from '../streaming/node-identity.js';
import type { ApiVersions } from './type-url-plan.js';

/**
 * An MCP-over-xDS upstream, in the shape of its configuration (`type: xds`). Only `name`,
 * `namespace` and `address` are required.
 */
export interface XdsSourceOptions extends DialSettings, SourceTiming {
  readonly name: string;
  /** Namespace of objects whose name carries none. */
  readonly namespace: string;
  /** `host:port` of the upstream's ADS endpoint. */
  readonly address: string;
  /** Speak delta ADS (`DeltaAggregatedResources`) instead of state of the world. Default false. */
  readonly delta?: boolean | undefined;
  /** Kind names (`VirtualService`) or registry keys to subscribe; default every config kind. */
  readonly kinds?: readonly string[] | undefined;
  /** Type-URL spelling to ask for, globally or per kind. Default `auto`. */
  readonly apiVersions?: ApiVersions | undefined;
  readonly node?: NodeIdentityConfig | undefined;
}
