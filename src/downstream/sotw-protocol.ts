import type { AdsProtocol } from './ads-protocol.js';
import {
  decodeDiscoveryRequest,
  type DiscoveryRequest,
  discoveryRequestMetadataBytes,
} from './discovery-request.js';
import { truncateForLog } from '../core/truncate-for-log.js';

/**
 * State-of-the-world ADS: every response of a type carries everything the view holds of it, so a
 * subscription keeps no state of its own and every client of a view shares one built response.
 * Resource names in requests are ignored (every subscription is a wildcard, as istiod's are).
 */
export const SOTW_PROTOCOL: AdsProtocol<DiscoveryRequest> = Object.freeze<AdsProtocol<DiscoveryRequest>>({
  name: 'sotw',
  decode: decodeDiscoveryRequest,
  metadataBytes: discoveryRequestMetadataBytes,
  // The version sent, as kept: a client's own string is only as long as a log line allows.
  ackedVersion: (request: DiscoveryRequest, sentVersion: string | undefined) =>
    request.versionInfo === sentVersion ? sentVersion : truncateForLog(request.versionInfo),
  subscribe: (typeUrl, _request, responses) => ({
    owed: false,
    update: () => false,
    resources: (view, kind, known) => responses.response(typeUrl, view, kind, known),
    bare: (bodyTypeUrl, body) => responses.bareResponse(typeUrl, bodyTypeUrl, body),
    sent: () => undefined,
  }),
});
