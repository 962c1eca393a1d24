import type { SourceTiming } from '../runtime/source-clock.js';
import type { ServerTlsReads } from '../../tls/server-tls.js';
import type { DialSettings } from '../streaming/dial-settings.js';
import type { ListenerTlsSettings } from '../streaming/tls-credentials.js';
import type { SinkNode } from './mcp-sink-session.js';

/** What both Galley-era MCP sources share, in the shape of their configuration. */
export interface McpSinkSettings extends SourceTiming {
  readonly name: string;
  /** Namespace of objects whose name carries none. */
  readonly namespace: string;
  /** Kind names or registry keys; default every kind that had a Galley collection. */
  readonly kinds?: readonly string[] | undefined;
  /** Ask for incremental updates. Default false. */
  readonly incremental?: boolean | undefined;
  readonly sinkNode?: SinkNode | undefined;
}

/** A Galley-era MCP source meshmux dials (`type: mcp`): it serves `ResourceSource`. */
export interface McpSourceOptions extends McpSinkSettings, DialSettings {
  /** `host:port` of the Galley (9901 by default in Istio 1.1–1.8). */
  readonly address: string;
}

/** A Galley-era MCP source that dials meshmux (`type: mcp-sink`): meshmux serves `ResourceSink`. */
export interface McpSinkSourceOptions
  extends McpSinkSettings, Pick<DialSettings, 'maxReceiveSize' | 'syncTimeout'> {
  /** `host:port` to listen on. */
  readonly listen: string;
  /** Absent: plaintext h2c. `cert` and `key` for TLS, re-read while listening; `ca` requires client certificates. */
  readonly tls?: ListenerTlsSettings | undefined;
  /** Told what each read of the `tls` files finds (see `reloadingServerCredentials`). */
  readonly tlsReads?: ServerTlsReads | undefined;
  /** Called with the bound port once listening (useful with port 0). */
  readonly onListening?: ((port: number) => void) | undefined;
}
