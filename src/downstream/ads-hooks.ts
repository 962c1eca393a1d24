import type { MeshmuxError } from '../core/errors.js';
import type { ClientIdentity } from './client-identity.js';
import type { LimitName } from './stream-limits.js';

/**
 * Lifecycle hooks of the ADS server, called synchronously; implementations must be cheap and must
 * not throw. Telemetry turns them into metrics and spans.
 */
export interface AdsHooks {
  onConnect?(client: ClientIdentity): void;
  /** A client was admitted by a policy (`first`), or moved to another policy or view by a reload; `view` is its id, truncated for logs. */
  onAdmit?(client: ClientIdentity, policy: string, view: string, first: boolean): void;
  /** A client was refused (unmatched, or a policy's requirement unmet); its stream ends with PERMISSION_DENIED. */
  onRefuse?(client: ClientIdentity, policy: string, reason: string): void;
  onDisconnect?(client: ClientIdentity, reason: string): void;
  onPush?(client: ClientIdentity, typeUrl: string, version: string, bytes: number, resources: number): void;
  onAck?(client: ClientIdentity, typeUrl: string, version: string, latencyMs: number): void;
  onNack?(client: ClientIdentity, typeUrl: string, version: string, message: string): void;
  onBadRequest?(client: ClientIdentity, error: MeshmuxError): void;
  /**
   * A client hit a limit: refused at admission (INVALID_ARGUMENT, or RESOURCE_EXHAUSTED for
   * `max-views`), or closed with UNAVAILABLE because a response did not flush in time (`send-timeout`).
   */
  onLimit?(client: ClientIdentity, limit: LimitName): void;
}
