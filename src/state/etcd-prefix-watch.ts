import type { Etcd3, IKeyValue, Watcher } from 'etcd3';
import type { Logger } from '../core/logger.js';

/** How long a lost watch waits before reading the prefix again while etcd does not answer. */
const RETRY_MS = 2_000;

/**
 * A watch of every key under a prefix, kept until {@link EtcdPrefixWatch.cancel}.
 *
 * etcd's client resumes a watch by itself after an outage, from the last revision it delivered;
 * but when etcd compacted that revision away meanwhile, etcd cancels the resumed watch and the
 * client drops it, and nothing written later would be seen. So a watch that ends while not
 * cancelled is replaced: the prefix is read again, every key changed since the last revision
 * handed over is handed over with its current value, and a new watch starts right after the
 * revision of that read, so that nothing written in between is missed.
 */
export class EtcdPrefixWatch {
  private watcher: Watcher | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private cancelled = false;
  /** The revision up to which every change has been handed over; unknown until first connected. */
  private revision: bigint | undefined;
  /** Whether the loss of the current watch has been logged (once until it is watching again). */
  private lost = false;

  /**
   * Watches `prefix` from the moment it is connected and calls `onPut` for every key written
   * under it afterwards, in etcd's order, each revision of a key once. After a lost watch only
   * the current value of a key written meanwhile is handed over (the history etcd compacted is
   * gone), and a key deleted meanwhile is not. `onPut` is synchronous and must not throw. `what`
   * names the watch in the log. With `after` (the revision of a read of the prefix), the keys
   * written since that read are handed over too.
   */
  constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
    private readonly what: string,
    private readonly log: Logger,
    private readonly onPut: (kv: IKeyValue) => void,
    private readonly retryMs = RETRY_MS,
    after?: number,
  ) {
    if (after !== undefined) this.revision = BigInt(after);
    this.watch();
  }

  async cancel(): Promise<void> {
    this.cancelled = true;
    clearTimeout(this.retryTimer);
    const watcher = this.watcher;
    this.watcher = undefined;
    await watcher?.cancel().catch(() => undefined);
  }

  private watch(): void {
    if (this.cancelled) return;
    const builder = this.client.watch().prefix(this.prefix);
    if (this.revision !== undefined) builder.startRevision(String(this.revision + 1n));
    // Listeners go on before the watch connects: `create()` resolves a tick after the answer to
    // the creation, and an event that came with that answer would be emitted to no one.
    const watcher = builder.watcher();
    this.watcher = watcher;
    let connected = false;
    watcher.on('connected', (res) => {
      connected = true;
      // A watch without a start revision follows writes after the one etcd answers with.
      this.revision ??= BigInt(res.header.revision);
      if (this.lost && this.watcher === watcher) {
        this.lost = false;
        this.log.info(`${this.what}: watching etcd again`);
      }
    });
    watcher.on('put', (kv) => {
      if (this.watcher !== watcher) return;
      this.handedOver(kv);
      this.onPut(kv);
    });
    watcher.on('delete', (kv) => {
      if (this.watcher === watcher) this.handedOver(kv);
    });
    // etcd's client drops a watch it reports an error for (a compacted start revision, a refused
    // permission), and ends one only when cancelled.
    watcher.on('error', (err: Error) => this.ended(watcher, connected, err.message));
    watcher.on('end', () => this.ended(watcher, connected, 'the watch ended'));
  }

  private handedOver(kv: IKeyValue): void {
    const revision = BigInt(kv.mod_revision);
    if (this.revision === undefined || revision > this.revision) this.revision = revision;
  }

  private ended(watcher: Watcher, connected: boolean, reason: string): void {
    if (this.cancelled || this.watcher !== watcher) return;
    this.watcher = undefined;
    this.warnLost(reason);
    // A watch refused at once (not a compaction found on resuming) would be refused again: wait.
    if (connected) this.catchUp();
    else this.retryLater();
  }

  /** Hands over what changed since the last revision handed over, then watches from there. */
  private catchUp(): void {
    if (this.cancelled) return;
    const since = this.revision;
    if (since === undefined) {
      this.watch();
      return;
    }
    this.client
      .getAll()
      .prefix(this.prefix)
      .minModRevision(String(since + 1n))
      .exec()
      .then((changed) => {
        if (this.cancelled) return;
        const kvs = [...changed.kvs].sort((a, b) => compareRevisions(a.mod_revision, b.mod_revision));
        for (const kv of kvs) this.onPut(kv);
        this.revision = BigInt(changed.header.revision);
        this.watch();
      })
      .catch((err: unknown) => {
        this.warnLost(String(err));
        this.retryLater();
      });
  }

  private retryLater(): void {
    if (this.cancelled) return;
    this.retryTimer = setTimeout(() => this.catchUp(), this.retryMs);
    this.retryTimer.unref();
  }

  private warnLost(reason: string): void {
    if (this.lost) return;
    this.lost = true;
    this.log.warn(
      { err: reason.slice(0, 500) },
      `${this.what}: lost the watch of etcd; reading what changed meanwhile and watching again`,
    );
  }
}

function compareRevisions(a: string, b: string): number {
  const d = BigInt(a) - BigInt(b);
  return d < 0n ? -1 : d > 0n ? 1 : 0;
}
