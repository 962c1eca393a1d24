import { Observable } from '../../core/rx.js';
import { componentLogger } from '../../core/logger.js';
import type { SourceDescriptor, SourceEvent } from '../../core/source-event.js';
import { backoffOf, transportOf } from '../streaming/dial-settings.js';
import { openSubscription, streamingDescriptor } from '../streaming/streaming-source.js';
import { selectKinds } from '../streaming/kind-selection.js';
import { resolveNodeIdentity } from '../streaming/node-identity.js';
import { ReconnectingStream } from '../streaming/reconnecting-stream.js';
import type { SubscriptionChannel } from '../streaming/subscription-state.js';
import type { UpstreamSource } from '../upstream-source.js';
import { DeltaAdsClient } from './delta-ads-client.js';
import { SotwAdsClient } from './sotw-ads-client.js';
import { ADS_DELTA_METHOD, ADS_SOTW_METHOD } from '../../wire/method-paths.js';
import { DEFAULT_API_VERSIONS, planTypeUrls } from './type-url-plan.js';
import type { XdsSourceOptions } from './xds-source-options.js';

/**
 * An MCP-over-xDS upstream (`type: xds`): an istiod's api generator, Nacos, Higress, or another
 * meshmux. Subscribing dials it and keeps an ADS stream open for as long as the subscription
 * lives, reconnecting with backoff; each response replaces the state of its kind, a disconnect
 * leaves everything served (the source turns `stale`), and a reconnect that brings the same
 * content yields the same resources, so nothing changes downstream.
 *
 * The constructor validates the kinds and type-URL spellings and throws a CONFIG error.
 */
export class XdsSource implements UpstreamSource {
  readonly descriptor: SourceDescriptor;
  readonly events$: Observable<SourceEvent>;
  /** The type URLs subscribed, in request order. */
  readonly channels: readonly SubscriptionChannel[];

  constructor(options: XdsSourceOptions) {
    const kinds = selectKinds(options.kinds, options.name);
    const channels = planTypeUrls(kinds, options.apiVersions ?? DEFAULT_API_VERSIONS, options.name);
    this.channels = Object.freeze(channels);
    this.descriptor = streamingDescriptor('xds', options, channels);
    const node = resolveNodeIdentity(options.node);
    const describe = `xds://${options.address}`;

    this.events$ = new Observable<SourceEvent>((subscriber) => {
      const log = componentLogger('xds-source', { source: options.name, upstream: describe });
      const delta = options.delta === true;
      // The state-of-the-world client finds what it read before in the responses it keeps.
      const { state, reader } = openSubscription(
        options,
        channels,
        describe,
        log,
        (event) => subscriber.next(event),
        delta,
      );
      const context = { state, reader, node, log, describe, onAnswer: () => stream.answered() };
      const stream: ReconnectingStream = new ReconnectingStream(
        {
          address: options.address,
          method: delta ? ADS_DELTA_METHOD : ADS_SOTW_METHOD,
          describe,
          tls: options.tls,
          transport: transportOf(options),
          // The state-of-the-world reader copies what it keeps of a response (its kept buffer).
          lendMessages: !delta,
          backoff: backoffOf(options),
          log,
          scheduler: options.scheduler,
        },
        delta ? new DeltaAdsClient(context) : new SotwAdsClient(context),
      );
      log.info({ typeUrls: channels.length, delta, node: node.id }, 'subscribing');
      state.start();
      stream.start();
      return () => {
        stream.stop();
        state.stop();
      };
    });
  }
}
