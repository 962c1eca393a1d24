import { status } from '@grpc/grpc-js';
import { MeshmuxError, toMeshmuxError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { sourceClock, type SourceClock, type SourceTiming } from '../runtime/source-clock.js';
import type { StreamTransport } from './dial-settings.js';
import { ExponentialBackoff, type BackoffPolicy } from './exponential-backoff.js';
import { GrpcHttp2Stream, type GrpcStatus } from './grpc-http2-stream.js';
import type { MessageMatcher } from './grpc-message-reader.js';
import { ReadPacer, type ReadPacing } from './read-pacer.js';
import { clientTls, type TlsSettings } from './tls-credentials.js';

/** One open stream, handed to the handlers. Calls after the stream ended are ignored. */
export interface OpenStream {
  /** 1 for the first stream, then one more per attempt. */
  readonly attempt: number;
  /**
   * Writes one encoded message. One sent under a `key` replaces a message of the same key the
   * upstream has not taken yet (see `GrpcHttp2Stream.write`): for requests the next one supersedes.
   */
  send(message: Uint8Array, key?: string): void;
  /**
   * During `onMessage` of a lent message: takes the buffer the message lies in (a view of it from
   * its start) for good. Undefined, keeping nothing, when the message has no buffer of its own to
   * give: copy it then.
   */
  adoptMessage(): Buffer | undefined;
  /**
   * Ends this stream for `error` and opens a new one after the backoff, as if the upstream had
   * ended it: for a protocol that can no longer make sense of what the stream sends.
   */
  restart(error: MeshmuxError): void;
}

/** What a protocol does with a stream; all calls are synchronous and never overlap. */
export interface StreamHandlers {
  /** A stream was created: send the initial requests. */
  onOpen(stream: OpenStream): void;
  /**
   * One message, as raw bytes: decoding (and surviving garbage) is the protocol's job. With
   * `lendMessages` the bytes are valid during the call only: what the protocol keeps, it copies.
   */
  onMessage(stream: OpenStream, message: Uint8Array): void;
  /**
   * With `lendMessages`: a matcher for a message of `size` bytes that would need a new buffer
   * (see `GrpcMessageReader`), which hands a message it matches whole on itself.
   */
  expectMessage?(stream: OpenStream, size: number): MessageMatcher | undefined;
  /** The stream ended or could not be created; a new attempt follows after the backoff. */
  onClose(error: MeshmuxError): void;
}

export interface ReconnectingStreamOptions extends SourceTiming {
  /** `host:port`. */
  readonly address: string;
  /** Full gRPC method path of the bidirectional stream. */
  readonly method: string;
  /** `xds://host:port` or similar, for messages. */
  readonly describe: string;
  readonly tls?: TlsSettings | undefined;
  readonly transport: StreamTransport;
  /** Hand messages to `onMessage` as views valid during the call only (no buffer per message). */
  readonly lendMessages?: boolean | undefined;
  readonly backoff: BackoffPolicy;
  readonly log: Logger;
  /** The share of the main thread reading this upstream may take; default `DEFAULT_READ_PACING`. */
  readonly pacing?: ReadPacing | undefined;
}

/** gRPC status codes by number, for messages. */
const STATUS_NAMES: ReadonlyMap<number, string> = new Map(
  Object.entries(status)
    .filter((e): e is [string, number] => typeof e[1] === 'number')
    .map(([name, code]) => [code, name]),
);

/**
 * Keeps one bidirectional stream to an upstream open: dials, hands the stream to the protocol,
 * and after it ends waits a jittered exponential backoff (reset by `answered()`) before the next
 * attempt, forever, until `stop()`. Every attempt reads the TLS files again and dials a fresh
 * connection ({@link GrpcHttp2Stream}), so a restarted upstream or a rotated certificate is picked
 * up at once. Reading the upstream takes at most its share of the main thread ({@link ReadPacer}),
 * one account for every stream of it: a new stream does not start afresh.
 */
export class ReconnectingStream {
  private readonly backoff: ExponentialBackoff;
  private call: GrpcHttp2Stream | undefined;
  private readonly clock: SourceClock;
  private readonly pacer: ReadPacer;
  private cancelRetry: (() => void) | undefined;
  private attempt = 0;
  private stopped = false;

  constructor(
    private readonly options: ReconnectingStreamOptions,
    private readonly handlers: StreamHandlers,
  ) {
    this.backoff = new ExponentialBackoff(options.backoff);
    this.clock = sourceClock(options.scheduler);
    this.pacer = new ReadPacer(this.clock, options.pacing);
  }

  /** Opens the first stream now. */
  start(): void {
    void this.connect();
  }

  /** The upstream answered on the current stream: the next reconnect starts from the shortest delay. */
  answered(): void {
    this.backoff.reset();
  }

  /** Ends the stream and stops reconnecting. Idempotent. */
  stop(): void {
    this.stopped = true;
    this.cancelRetry?.();
    this.cancelRetry = undefined;
    const call = this.call;
    this.call = undefined;
    call?.cancel();
  }

  private async connect(): Promise<void> {
    this.cancelRetry = undefined;
    const attempt = ++this.attempt;
    let tls: Awaited<ReturnType<typeof clientTls>>;
    try {
      tls = await clientTls(this.options.tls);
    } catch (err) {
      if (!this.stopped) this.failed(toMeshmuxError(err, 'CONFIG', { file: this.options.describe }));
      return;
    }
    if (this.stopped) return;
    const { transport } = this.options;
    this.options.log.debug({ upstream: this.options.describe, attempt, tls: tls.mode }, 'stream opening');
    let call: GrpcHttp2Stream | undefined = undefined;
    const stream: OpenStream = {
      attempt,
      send: (message, key) => {
        if (call !== undefined && this.call === call) call.write(message, key);
      },
      adoptMessage: () => (call !== undefined && this.call === call ? call.adoptMessage() : undefined),
      restart: (error) => {
        if (call === undefined || this.call !== call) return;
        this.call = undefined;
        call.finish();
        this.failed(error);
      },
    };
    call = new GrpcHttp2Stream(
      {
        address: this.options.address,
        method: this.options.method,
        tls: tls.connect,
        authority: tls.authority,
        maxReceiveBytes: transport.maxReceiveBytes,
        windowBytes: transport.windowBytes,
        keepalive: transport.keepalive,
        lendMessages: this.options.lendMessages === true,
        pacer: this.pacer,
      },
      {
        onMessage: (message) => {
          if (this.call === call) this.handlers.onMessage(stream, message);
        },
        expectMessage: (size) =>
          this.call === call ? this.handlers.expectMessage?.(stream, size) : undefined,
        onEnd: (end) => {
          if (this.call !== call) return;
          this.call = undefined;
          this.failed(this.statusError(end));
        },
      },
    );
    this.call = call;
    this.handlers.onOpen(stream);
  }

  private failed(error: MeshmuxError): void {
    const delayMs = this.backoff.nextDelayMs();
    this.options.log.warn(
      { upstream: this.options.describe, err: error.message, retryInMs: Math.round(delayMs) },
      'upstream stream ended',
    );
    this.handlers.onClose(error);
    if (this.stopped) return;
    this.cancelRetry = this.clock.after(delayMs, () => void this.connect());
  }

  private statusError(end: GrpcStatus): MeshmuxError {
    const where = { file: this.options.describe };
    const name = STATUS_NAMES.get(end.code) ?? String(end.code);
    const details = end.details === '' ? '' : `: ${end.details}`;
    const code = end.code;
    if (code === status.UNAUTHENTICATED || code === status.PERMISSION_DENIED) {
      return new MeshmuxError(
        'PERMISSION_DENIED',
        `the upstream refused the stream (${name}${details}); an istiod with ENABLE_XDS_API_GENERATOR_AUTH ` +
          'serves only mTLS clients whose identity is in its root namespace: set tls.cert and tls.key',
        where,
      );
    }
    if (code === status.UNIMPLEMENTED) {
      return new MeshmuxError(
        'UNAVAILABLE',
        `the upstream does not serve ${this.options.method} (${name}${details})`,
        where,
      );
    }
    if (code === status.OK) return new MeshmuxError('UNAVAILABLE', 'the upstream ended the stream', where);
    return new MeshmuxError('UNAVAILABLE', `stream ended with ${name}${details}`, where);
  }
}
