import type { MeshmuxError } from '../core/errors.js';
import type { ClientIdentity } from './client-identity.js';

/**
 * Lifecycle hooks of the ADS server, called synchronously; implementations must be cheap and must
 * not throw. Telemetry turns them into metrics and spans.
 */
export interface AdsHooks {
  onConnect?(client: ClientIdentity): void;
  onDisconnect?(client: ClientIdentity, reason: string): void;
  onPush?(client: ClientIdentity, typeUrl: string, version: string, bytes: number, resources: number): void;
  onAck?(client: ClientIdentity, typeUrl: string, version: string, latencyMs: number): void;
  onNack?(client: ClientIdentity, typeUrl: string, version: string, message: string): void;
  onBadRequest?(client: ClientIdentity, error: MeshmuxError): void;
}
