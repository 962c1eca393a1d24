import type { IncomingHttpHeaders } from 'node:http';
import type { Observable } from '../core/rx.js';
import type { SourceDescriptor, SourceEvent } from '../core/source-event.js';

/**
 * A config source. `events$` is cold: subscribing starts the source (opens files, dials, watches)
 * and unsubscribing stops it and releases everything it holds. It never errors and never
 * completes while subscribed: failures arrive as `status` events, so one broken source cannot
 * end the merged stream.
 */
export interface UpstreamSource {
  readonly descriptor: SourceDescriptor;
  readonly events$: Observable<SourceEvent>;
  /**
   * Present when its upstream can announce a change over HTTP (a git forge's webhook, served at
   * `/hooks/<type>/<name>`): checks and handles one notification. Never throws.
   */
  readonly notify?: (notification: PushNotification) => Promise<PushAnswer>;
  /**
   * Present with `notify`: the answer to every notification while the source takes none (no
   * webhook configured), decided before a body is read; undefined when it takes them. Cheap and
   * synchronous.
   */
  readonly notificationRefusal?: () => PushAnswer | undefined;
  /**
   * Present with `notify`: reads its upstream now, as an accepted notification would (another
   * replica received one). Returns at once; the read reports itself. Never throws.
   */
  readonly refresh?: (reason: string) => void;
  /**
   * Present when the source has more to show than its events (a git mirror's commit and last
   * fetch), served at `/debug/<type>`. Cheap and synchronous.
   */
  readonly details?: () => unknown;
}

/** A change announced over HTTP, as the HTTP layer hands it over. */
export interface PushNotification {
  readonly headers: IncomingHttpHeaders;
  /** The raw body, exactly as signed. */
  readonly body: Buffer;
}

/**
 * The answer to a {@link PushNotification}: an HTTP status and a JSON body. 202 means the source
 * started reading its upstream (and every replica is told to do the same).
 */
export interface PushAnswer {
  readonly status: number;
  readonly body: unknown;
}
