import type { Observable } from 'rxjs';
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
}
