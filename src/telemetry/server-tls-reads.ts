import { Gauge, type Registry } from 'prom-client';

/**
 * Whether the ADS listener's TLS files made a usable identity when last read:
 * `meshmux_server_tls_files_usable{listener="server.xdsTls"}` is 1, or 0 while a read that does not (a certificate replaced
 * before its key, a file cut short or gone) leaves the last usable identity in use.
 */
export class ServerTlsReadMetrics {
  private readonly usable: Gauge<'listener'>;

  /** Exported whether or not TLS is configured; a sample only once a listener uses the files. */
  constructor(registry: Registry) {
    this.usable = new Gauge({
      name: 'meshmux_server_tls_files_usable',
      help: 'Whether the server.tls files made a usable identity when last read (1), or not (0, the last usable one stays in use).',
      labelNames: ['listener'] as const,
      registers: [registry],
    });
  }

  /** The files are read for `listener` (`server.xdsTls`): usable, as a listener starts only on usable ones. */
  listening(listener: string): void {
    this.usable.set({ listener }, 1);
  }

  failed(listener: string): void {
    this.usable.set({ listener }, 0);
  }

  recovered(listener: string): void {
    this.usable.set({ listener }, 1);
  }
}
