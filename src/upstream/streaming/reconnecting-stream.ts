import * as grpc from '@grpc/grpc-js';
import { MeshmuxError, toMeshmuxError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { sourceClock, type SourceClock, type SourceTiming } from '../runtime/source-clock.js';
import { ExponentialBackoff, type BackoffPolicy } from './exponential-backoff.js';
import { clientTls, type TlsSettings } from './tls-credentials.js';

/** One open stream, handed to the handlers. Calls after the stream ended are ignored. */
export interface OpenStream {
  /** 1 for the first stream, then one more per attempt. */
  readonly attempt: number;
  /** Writes one encoded message. */
  send(message: Uint8Array): void;
}

/** What a protocol does with a stream; all calls are synchronous and never overlap. */
export interface StreamHandlers {
  /** A stream was created: send the initial requests. */
  onOpen(stream: OpenStream): void;
  /** One message, as raw bytes: decoding (and surviving garbage) is the protocol's job. */
  onMessage(stream: OpenStream, message: Uint8Array): void;
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
  readonly channelOptions: grpc.ChannelOptions;
  readonly backoff: BackoffPolicy;
  readonly log: Logger;
}

const toBuffer = (m: Uint8Array): Buffer => Buffer.from(m.buffer, m.byteOffset, m.byteLength);
const identity = (b: Buffer): Buffer => b;

/** gRPC status codes by number, for messages. */
const STATUS_NAMES: ReadonlyMap<number, string> = new Map(
  Object.entries(grpc.status)
    .filter((e): e is [string, number] => typeof e[1] === 'number')
    .map(([name, code]) => [code, name]),
);

/**
 * Keeps one bidirectional stream to an upstream open: dials, hands the stream to the protocol,
 * and after it ends waits a jittered exponential backoff (reset by `answered()`) before the next
 * attempt, forever, until `stop()`. Every attempt reads the TLS files again and dials a fresh
 * channel, so a restarted upstream or a rotated certificate is picked up without grpc-js's own
 * connection backoff getting in the way.
 */
export class ReconnectingStream {
  private readonly backoff: ExponentialBackoff;
  private client: grpc.Client | undefined;
  private call: grpc.ClientDuplexStream<Uint8Array, Buffer> | undefined;
  private readonly clock: SourceClock;
  private cancelRetry: (() => void) | undefined;
  private attempt = 0;
  private stopped = false;

  constructor(
    private readonly options: ReconnectingStreamOptions,
    private readonly handlers: StreamHandlers,
  ) {
    this.backoff = new ExponentialBackoff(options.backoff);
    this.clock = sourceClock(options.scheduler);
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
    this.client?.close();
    this.client = undefined;
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
    const client = new grpc.Client(this.options.address, tls.credentials, {
      ...this.options.channelOptions,
      ...tls.channelOptions,
    });
    this.client = client;
    const call = client.makeBidiStreamRequest<Uint8Array, Buffer>(this.options.method, toBuffer, identity);
    this.call = call;
    const stream: OpenStream = {
      attempt,
      send: (message) => {
        if (this.call === call) call.write(message);
      },
    };
    this.options.log.debug({ upstream: this.options.describe, attempt, tls: tls.mode }, 'stream opening');
    call.on('data', (message: Buffer) => {
      if (this.call === call) this.handlers.onMessage(stream, message);
    });
    // 'status' carries the same information as 'error'; an unhandled 'error' would crash the process.
    call.on('error', () => undefined);
    call.on('status', (status: grpc.StatusObject) => {
      if (this.call === call) this.closed(call, this.statusError(status));
    });
    this.handlers.onOpen(stream);
  }

  private closed(call: grpc.ClientDuplexStream<Uint8Array, Buffer>, error: MeshmuxError): void {
    this.call = undefined;
    call.cancel();
    this.client?.close();
    this.client = undefined;
    this.failed(error);
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

  private statusError(status: grpc.StatusObject): MeshmuxError {
    const where = { file: this.options.describe };
    const name = STATUS_NAMES.get(status.code) ?? String(status.code);
    const details = status.details === '' ? '' : `: ${status.details}`;
    const code = status.code;
    if (code === grpc.status.UNAUTHENTICATED || code === grpc.status.PERMISSION_DENIED) {
      return new MeshmuxError(
        'PERMISSION_DENIED',
        `the upstream refused the stream (${name}${details}); an istiod with ENABLE_XDS_API_GENERATOR_AUTH ` +
          'serves only mTLS clients whose identity is in its root namespace: set tls.cert and tls.key',
        where,
      );
    }
    if (code === grpc.status.UNIMPLEMENTED) {
      return new MeshmuxError(
        'UNAVAILABLE',
        `the upstream does not serve ${this.options.method} (${name}${details})`,
        where,
      );
    }
    if (code === grpc.status.OK)
      return new MeshmuxError('UNAVAILABLE', 'the upstream ended the stream', where);
    return new MeshmuxError('UNAVAILABLE', `stream ended with ${name}${details}`, where);
  }
}
