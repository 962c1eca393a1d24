import { Gauge, type Registry } from 'prom-client';

/**
 * Whether the ADS listener's TLS files made a usable identity when last read:
 * `meshmux_server_tls_files_usable` is 1, or 0 while a read that does not (a certificate replaced
 * before its key, a file cut short or gone) leaves the last usable identity in use.
 */
export class ServerTlsReadMetrics {
  private readonly usable: Gauge;

  constructor(registry: Registry) {
    this.usable = new Gauge({
      name: 'meshmux_server_tls_files_usable',
      help: 'Whether the server.tls files made a usable identity when last read (1), or not (0, the last usable one stays in use).',
      registers: [registry],
    });
    this.usable.set(1);
  }

  failed(): void {
    this.usable.set(0);
  }

  recovered(): void {
    this.usable.set(1);
  }
}
