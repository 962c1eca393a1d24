import { Counter, Gauge, type Registry } from 'prom-client';
import type { MeshmuxError } from '../core/errors.js';

/**
 * Metrics of the persisted state: writes, failed writes and state files that could not be
 * believed at start. Labelled by configured source names only.
 */
export class StateMetrics {
  private readonly writes: Counter<'source'>;
  private readonly writeErrors: Counter<'source'>;
  private readonly lastWrite: Gauge<'source'>;
  private readonly writeBytes: Gauge<'source'>;
  private readonly loadErrors: Counter;
  private readonly putBack: Counter<'source'>;
  private readonly storeUp: Gauge<'store'>;
  private readonly writer: Gauge<'store'>;

  constructor(registry: Registry) {
    this.writes = new Counter({
      name: 'meshmux_state_writes_total',
      help: 'State files written (one per source and write).',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.writeErrors = new Counter({
      name: 'meshmux_state_write_errors_total',
      help: 'Failed writes of a source state file (disk full, read-only, ...); serving goes on and the write is retried.',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.lastWrite = new Gauge({
      name: 'meshmux_state_last_write_success_timestamp_seconds',
      help: 'When a source state file was last written (Unix time).',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.writeBytes = new Gauge({
      name: 'meshmux_state_file_bytes',
      help: 'Size of the last state file written per source.',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.loadErrors = new Counter({
      name: 'meshmux_state_load_errors_total',
      help: 'State files ignored at start because they were corrupt, truncated, foreign or unreadable.',
      registers: [registry],
    });
    this.putBack = new Counter({
      name: 'meshmux_state_files_put_back_total',
      help: 'State files or journals found removed or replaced while running, and written back from the open copy.',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.storeUp = new Gauge({
      name: 'meshmux_state_store_up',
      help: 'Whether the shared state store (etcd) answers: 1 yes, 0 no. Serving never waits for it.',
      labelNames: ['store'] as const,
      registers: [registry],
    });
    this.writer = new Gauge({
      name: 'meshmux_state_writer',
      help: 'Whether this replica is the one that writes the shared state (etcd lease election).',
      labelNames: ['store'] as const,
      registers: [registry],
    });
  }

  onStoreUp(up: boolean): void {
    this.storeUp.set({ store: 'etcd' }, up ? 1 : 0);
  }

  onWriter(writer: boolean): void {
    this.writer.set({ store: 'etcd' }, writer ? 1 : 0);
  }

  onWrite(source: string, bytes: number): void {
    this.writes.inc({ source });
    this.lastWrite.set({ source }, Date.now() / 1000);
    this.writeBytes.set({ source }, bytes);
  }

  onWriteError(source: string, _error: MeshmuxError): void {
    this.writeErrors.inc({ source });
  }

  onLoadError(): void {
    this.loadErrors.inc();
  }

  onPutBack(source: string): void {
    this.putBack.inc({ source });
  }
}
