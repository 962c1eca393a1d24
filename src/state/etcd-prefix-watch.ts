import type { Etcd3, IKeyValue, Watcher } from 'etcd3';
import type { Logger } from '../core/logger.js';

/** A watch of every key under a prefix, kept until {@link EtcdPrefixWatch.cancel}. */
export class EtcdPrefixWatch {
  private watcher: Watcher | undefined;
  private cancelled = false;

  /**
   * Watches `prefix` and calls `onPut` for every key written under it. A watch that cannot be
   * created (etcd down) is tried again every 2 s; once created, etcd's client resumes it by
   * itself after an outage, from the last revision it delivered. `what` names it in the log.
   */
  constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
    private readonly what: string,
    private readonly log: Logger,
    private readonly onPut: (kv: IKeyValue) => void,
  ) {
    this.start();
  }

  async cancel(): Promise<void> {
    this.cancelled = true;
    await this.watcher?.cancel().catch(() => undefined);
  }

  private start(): void {
    if (this.cancelled) return;
    this.client
      .watch()
      .prefix(this.prefix)
      .create()
      .then((watcher) => {
        if (this.cancelled) {
          void watcher.cancel();
          return;
        }
        this.watcher = watcher;
        watcher.on('put', (kv) => this.onPut(kv));
        watcher.on('error', (err: Error) =>
          this.log.debug({ err: err.message }, `${this.what}: watch error`),
        );
      })
      .catch((err: unknown) => {
        this.log.warn({ err: String(err) }, `${this.what}: cannot watch etcd; retrying`);
        const retry = setTimeout(() => this.start(), 2_000);
        retry.unref();
      });
  }
}
