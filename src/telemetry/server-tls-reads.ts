import { Gauge, type Registry } from 'prom-client';

/**
 * Whether a listener's TLS files made a usable identity when last read:
 * `meshmux_server_tls_files_usable{listener}` is 1, or 0 while a read that does not (a certificate
 * replaced before its key, a file cut short or gone) leaves the last usable identity in use. The
 * listener is the ADS one (`server.xdsTls`) or an `mcp-sink` source, by its name: a label set
 * the configuration bounds.
 */
export class ServerTlsReadMetrics {
  private readonly usable: Gauge<'listener'>;
  /**
   * How many credentials read the files of each listener: a source's, replaced on a reload, may
   * start reading before the one it replaces stops; its sample goes once none reads them.
   */
  private readonly readers = new Map<string, number>();

  /** Exported whether or not TLS is configured; a sample only once a listener uses the files. */
  constructor(registry: Registry) {
    this.usable = new Gauge({
      name: 'meshmux_server_tls_files_usable',
      help: 'Whether a listener’s TLS files (server.tls, an mcp-sink source’s tls) made a usable identity when last read (1), or not (0, the last usable one stays in use).',
      labelNames: ['listener'] as const,
      registers: [registry],
    });
  }

  /** The files are read for `listener`: usable, as credentials are made only of usable ones. */
  listening(listener: string): void {
    this.readers.set(listener, (this.readers.get(listener) ?? 0) + 1);
    this.usable.set({ listener }, 1);
  }

  failed(listener: string): void {
    this.usable.set({ listener }, 0);
  }

  recovered(listener: string): void {
    this.usable.set({ listener }, 1);
  }

  /** One reader of `listener`'s files stopped (its source stopped); the sample goes with the last. */
  closed(listener: string): void {
    const left = (this.readers.get(listener) ?? 1) - 1;
    if (left > 0) {
      this.readers.set(listener, left);
      return;
    }
    this.readers.delete(listener);
    this.usable.remove({ listener });
  }
}
