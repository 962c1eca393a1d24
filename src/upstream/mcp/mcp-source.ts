import { Observable } from '../../core/rx.js';
import { componentLogger } from '../../core/logger.js';
import type { SourceDescriptor, SourceEvent } from '../../core/source-event.js';
import { backoffOf, transportOf } from '../streaming/dial-settings.js';
import { openSubscription, streamingDescriptor } from '../streaming/streaming-source.js';
import { ReconnectingStream } from '../streaming/reconnecting-stream.js';
import type { SubscriptionChannel } from '../streaming/subscription-state.js';
import type { UpstreamSource } from '../upstream-source.js';
import { planCollections } from './mcp-collections.js';
import { McpSinkSession } from './mcp-sink-session.js';
import type { McpSourceOptions } from './mcp-source-options.js';
import { MCP_RESOURCE_SOURCE_METHOD } from '../../wire/method-paths.js';

/** gRPC path of the Galley's source service, where the sink (meshmux) is the client. */

/**
 * A Galley-era MCP upstream meshmux dials (`type: mcp`, Istio 1.1–1.8 Galley, nacos-istio):
 * `ResourceSource/EstablishResourceStream`, one `RequestResources` per configured collection,
 * full-state or incremental answers ACKed or NACKed by nonce. Reconnects, staleness and
 * quarantine behave as for `xds` sources.
 *
 * The constructor validates the kinds and throws a CONFIG error.
 */
export class McpSource implements UpstreamSource {
  readonly descriptor: SourceDescriptor;
  readonly events$: Observable<SourceEvent>;
  /** The collections asked for. */
  readonly channels: readonly SubscriptionChannel[];

  constructor(options: McpSourceOptions) {
    const channels = planCollections(options.kinds, options.name);
    this.channels = Object.freeze(channels);
    this.descriptor = streamingDescriptor('mcp', options, channels);
    const describe = `mcp://${options.address}`;

    this.events$ = new Observable<SourceEvent>((subscriber) => {
      const log = componentLogger('mcp-source', { source: options.name, upstream: describe });
      const { state, reader } = openSubscription(options, channels, describe, log, (event) =>
        subscriber.next(event),
      );
      const session = new McpSinkSession({
        state,
        reader,
        sinkNode: options.sinkNode ?? {},
        incremental: options.incremental ?? false,
        defaultNamespace: options.namespace,
        log,
        describe,
        onAnswer: () => stream.answered(),
      });
      const stream: ReconnectingStream = new ReconnectingStream(
        {
          address: options.address,
          method: MCP_RESOURCE_SOURCE_METHOD,
          describe,
          tls: options.tls,
          transport: transportOf(options),
          backoff: backoffOf(options),
          log,
          scheduler: options.scheduler,
        },
        {
          onOpen: (s) => session.open((m) => s.send(m)),
          onMessage: (s, message) =>
            session.message(
              message,
              (m) => s.send(m),
              (error) => s.restart(error),
            ),
          onClose: (error) => state.streamClosed(error),
        },
      );
      log.info({ collections: channels.map((c) => c.id) }, 'subscribing');
      state.start();
      stream.start();
      return () => {
        stream.stop();
        state.stop();
      };
    });
  }
}
