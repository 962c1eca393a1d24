import * as grpc from '@grpc/grpc-js';
import { Observable } from '../../core/rx.js';
import { MeshmuxError, toMeshmuxError } from '../../core/errors.js';
import { componentLogger } from '../../core/logger.js';
import type { SourceDescriptor, SourceEvent } from '../../core/source-event.js';
import { DEFAULT_MAX_RECEIVE_BYTES } from '../streaming/dial-settings.js';
import { openSubscription, streamingDescriptor } from '../streaming/streaming-source.js';
import { DEFAULT_BACKOFF, ExponentialBackoff } from '../streaming/exponential-backoff.js';
import { pacedServerReads } from '../streaming/paced-server-reads.js';
import { ReadPacer } from '../streaming/read-pacer.js';
import type { SubscriptionChannel } from '../streaming/subscription-state.js';
import { serverTls } from '../streaming/tls-credentials.js';
import { sourceClock } from '../runtime/source-clock.js';
import type { UpstreamSource } from '../upstream-source.js';
import { planCollections } from './mcp-collections.js';
import { McpSinkSession } from './mcp-sink-session.js';
import type { McpSinkSourceOptions } from './mcp-source-options.js';
import { MCP_RESOURCE_SINK_METHOD } from '../../wire/method-paths.js';

/** gRPC path of the sink service meshmux serves, where the Galley (source) is the client. */

const toBuffer = (m: Uint8Array): Buffer => Buffer.from(m.buffer, m.byteOffset, m.byteLength);
const identity = (b: Buffer): Buffer => b;

/** Raw bytes both ways: the session decodes and encodes. */
const SINK_SERVICE: grpc.ServiceDefinition = {
  EstablishResourceStream: {
    path: MCP_RESOURCE_SINK_METHOD,
    requestStream: true,
    responseStream: true,
    requestSerialize: toBuffer,
    requestDeserialize: identity,
    responseSerialize: toBuffer,
    responseDeserialize: identity,
  },
};

type SinkCall = grpc.ServerDuplexStream<Buffer, Uint8Array>;

/**
 * A Galley-era MCP source that pushes to meshmux (`type: mcp-sink`): meshmux listens and serves
 * `ResourceSink/EstablishResourceStream`, for a Galley configured with a sink address. The Galley
 * opens the stream with an empty "trigger" `Resources`, which is NACKed as unimplemented (how it
 * knows the sink is there); meanwhile meshmux asks for every configured collection, and the
 * exchange continues as with `type: mcp`. One Galley at a time: a new stream replaces the previous
 * one. While no stream is open, the last state stays served and the source is `stale`. Reading
 * the Galley takes at most its share of the main thread ({@link pacedServerReads}).
 */
export class McpSinkSource implements UpstreamSource {
  readonly descriptor: SourceDescriptor;
  readonly events$: Observable<SourceEvent>;
  readonly channels: readonly SubscriptionChannel[];

  constructor(options: McpSinkSourceOptions) {
    const channels = planCollections(options.kinds, options.name);
    this.channels = Object.freeze(channels);
    this.descriptor = streamingDescriptor('mcp-sink', options, channels);
    const describe = `mcp-sink://${options.listen}`;

    this.events$ = new Observable<SourceEvent>((subscriber) => {
      const log = componentLogger('mcp-sink-source', { source: options.name, listen: options.listen });
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
        onAnswer: () => undefined,
      });
      const clock = sourceClock(options.scheduler);
      // One account for every stream: a pusher that dials again does not start afresh.
      const pacer = new ReadPacer(clock);
      const server = new grpc.Server({
        interceptors: [pacedServerReads(pacer)],
        'grpc.max_receive_message_length': options.maxReceiveSize ?? DEFAULT_MAX_RECEIVE_BYTES,
        'grpc.max_send_message_length': -1,
        'grpc.keepalive_permit_without_calls': 1,
        'grpc.http2.min_ping_interval_without_data_ms': 5_000,
      });
      let active: SinkCall | undefined;
      let stopped = false;
      // Ends the reads of the TLS files with the subscription: grpc-js keeps credentials whose
      // bind failed in use.
      const closing = new AbortController();
      /** Made once the files are usable, then kept: each bind retry uses the same reader of them. */
      let credentials: grpc.ServerCredentials | undefined;
      let cancelRetry: (() => void) | undefined;
      const backoff = new ExponentialBackoff(DEFAULT_BACKOFF);

      server.addService(SINK_SERVICE, {
        EstablishResourceStream: (call: SinkCall) => {
          if (stopped) {
            call.end();
            return;
          }
          const previous = active;
          active = call;
          if (previous !== undefined) {
            log.warn({ peer: call.getPeer() }, 'a new MCP source stream replaces the previous one');
            previous.end();
          }
          log.info({ peer: call.getPeer() }, 'MCP source connected');
          const send = (message: Uint8Array): void => {
            if (active === call) call.write(message);
          };
          const closed = (reason: string): void => {
            if (active !== call) return;
            active = undefined;
            state.streamClosed(new MeshmuxError('UNAVAILABLE', reason, { file: describe }));
          };
          // The session can no longer read the stream: ended with UNAVAILABLE, so the MCP source
          // dials again and begins with every collection's complete state.
          const restart = (error: MeshmuxError): void => {
            if (active !== call) return;
            active = undefined;
            log.warn({ peer: call.getPeer(), err: error.message }, 'ending the MCP source stream');
            state.streamClosed(error);
            call.emit('error', { code: grpc.status.UNAVAILABLE, details: error.message });
          };
          call.on('data', (message: Buffer) => {
            if (active === call) pacer.run(() => session.message(message, send, restart));
          });
          call.on('end', () => {
            closed(`the MCP source ${call.getPeer()} closed its stream`);
            call.end();
          });
          call.on('error', (err: Error) => closed(`stream error: ${err.message}`));
          call.on('cancelled', () => closed(`the MCP source ${call.getPeer()} went away`));
          session.open(send);
        },
      });

      const bind = async (): Promise<void> => {
        cancelRetry = undefined;
        try {
          credentials ??= await serverTls(options.tls, options.tlsReads, closing.signal);
          if (stopped) return;
          const bound = credentials;
          const port = await new Promise<number>((resolve, reject) =>
            server.bindAsync(options.listen, bound, (err, p) => (err ? reject(err) : resolve(p))),
          );
          if (stopped) return;
          log.info({ port }, 'listening for an MCP source');
          options.onListening?.(port);
        } catch (err) {
          if (stopped) return;
          const error = toMeshmuxError(err, 'UNAVAILABLE', { file: describe });
          const delay = backoff.nextDelayMs();
          log.error({ err: error.message, retryInMs: Math.round(delay) }, 'cannot listen');
          state.streamClosed(error);
          cancelRetry = clock.after(delay, () => void bind());
        }
      };

      state.start();
      void bind();
      return () => {
        stopped = true;
        closing.abort();
        cancelRetry?.();
        active?.end();
        active = undefined;
        server.forceShutdown();
        state.stop();
      };
    });
  }
}
