import * as grpc from '@grpc/grpc-js';
import type { ReadPacer } from './read-pacer.js';

/**
 * A gRPC server interceptor that reads every call of the server only while `pacer` allows: an
 * upstream that dials meshmux (a Galley pushing to a sink) takes at most its share of the main
 * thread, as one meshmux dials does ({@link ReadPacer}). The handler charges the pacer with its
 * handling of each message (`pacer.run`); the call's next message is asked for only once the
 * pacer says reading may go on, and until then grpc-js leaves the HTTP/2 stream paused, so the
 * upstream's next bytes wait in its flow-control window. A message is never cut, nor held once
 * read, and nothing else of the call waits: what meshmux sends (an ACK), PINGs and the call's end
 * go on as before. A message grpc-js hands on while the stream's reader asks ahead (several in
 * one chunk) may be read before the handling of the one before it is charged; the wait then
 * comes one message later.
 */
export function pacedServerReads(pacer: ReadPacer): grpc.ServerInterceptor {
  return (_method, call) => new PacedServerCall(call, pacer);
}

/** One call of the server, whose each next read waits for the pacer. */
class PacedServerCall extends grpc.ServerInterceptingCall {
  private readonly hold: PacedRead;

  constructor(next: grpc.ServerInterceptingCallInterface, pacer: ReadPacer) {
    const hold = new PacedRead(pacer, () => next.startRead());
    // The call's end, however it came (its own, a cancel, the server's shutdown), ends the wait.
    super(next, { start: (listen) => listen({ onCancel: () => hold.end() }) });
    this.hold = hold;
  }

  override startRead(): void {
    this.hold.read();
  }
}

/** The next read of one call: now, or once the pacer allows; at most one waiting. */
class PacedRead {
  private cancelWait: (() => void) | undefined;
  private ended = false;

  constructor(
    private readonly pacer: ReadPacer,
    private readonly startRead: () => void,
  ) {}

  read(): void {
    if (this.ended || this.cancelWait !== undefined) return;
    this.cancelWait = this.pacer.hold(() => {
      this.cancelWait = undefined;
      if (!this.ended) this.startRead();
    });
    if (this.cancelWait === undefined) this.startRead();
  }

  end(): void {
    this.ended = true;
    this.cancelWait?.();
    this.cancelWait = undefined;
  }
}
