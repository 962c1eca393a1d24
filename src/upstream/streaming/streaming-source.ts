import type { Logger } from '../../core/logger.js';
import type { SourceDescriptor, SourceEvent } from '../../core/source-event.js';
import type { SourceTiming } from '../runtime/source-clock.js';
import { DEFAULT_SYNC_TIMEOUT_MS } from './dial-settings.js';
import { McpResourceReader } from '../mcp-resource-reader.js';
import { type SubscriptionChannel, SubscriptionState } from './subscription-state.js';

/** What every MCP streaming source (xds, mcp, mcp-sink) is configured with, besides its transport. */
export interface StreamingSourceOptions extends SourceTiming {
  readonly name: string;
  readonly namespace: string;
  readonly syncTimeout?: number | undefined;
}

/** The descriptor of a streaming source: it can only ever deliver the kinds of its channels. */
export function streamingDescriptor(
  type: string,
  options: StreamingSourceOptions,
  channels: readonly SubscriptionChannel[],
): SourceDescriptor {
  return {
    name: options.name,
    type,
    defaultNamespace: options.namespace,
    kinds: new Set(channels.map((c) => c.kind.key)),
  };
}

/**
 * The per-subscription parts every streaming source opens when `events$` is subscribed: the
 * state that turns channel answers into source events, and the reader that turns upstream
 * resources into objects (caching unchanged bytes).
 */
export function openSubscription(
  options: StreamingSourceOptions,
  channels: readonly SubscriptionChannel[],
  describe: string,
  log: Logger,
  emit: (event: SourceEvent) => void,
  /** Whether the reader keeps each result by name (see `McpResourceReaderOptions.remember`). */
  remember = true,
): { state: SubscriptionState; reader: McpResourceReader } {
  const state = new SubscriptionState({
    source: options.name,
    upstream: describe,
    channels,
    emit,
    log,
    syncTimeoutMs: options.syncTimeout ?? DEFAULT_SYNC_TIMEOUT_MS,
    scheduler: options.scheduler,
  });
  const reader = new McpResourceReader({
    defaultNamespace: options.namespace,
    origin: describe,
    source: options.name,
    remember,
  });
  return { state, reader };
}
