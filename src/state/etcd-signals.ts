import type { Etcd3, Watcher } from 'etcd3';
import type { Logger } from '../core/logger.js';

/** A decision or a nudge one replica shares with the others through etcd. */
export interface ReplicaSignal {
  readonly kind: 'confirm' | 'refresh';
  readonly source: string;
  /** For `confirm`: the digest of the held update the operator confirmed. */
  readonly digest?: string;
  /** The replica that sent it. */
  readonly replica: string;
  readonly atMs: number;
}

/** Options of {@link EtcdSignals.open}. */
export interface EtcdSignalsOptions {
  readonly client: Etcd3;
  /** Every key starts with it (the `state.etcd` prefix). */
  readonly prefix: string;
  /** This replica's name: its own signals are not handed back to it. */
  readonly identity: string;
  readonly log: Logger;
  /** Another replica sent a signal. Synchronous; must not throw. */
  readonly onSignal: (signal: ReplicaSignal) => void;
}

/**
 * Signals between replicas, one etcd key per kind and source (`<prefix>signals/<kind>/<source>`):
 * a confirmation of a held update, named by its digest, and a "fetch now" after a push
 * notification (a git webhook) reached one replica. Each replica watches the prefix and acts on
 * the others' signals. Best effort and never on the serving path: a signal that cannot be sent is
 * logged, and the replica that received the request has acted on it locally already.
 */
export class EtcdSignals {
  private watcher: Watcher | undefined;
  private closed = false;

  private constructor(private readonly options: EtcdSignalsOptions) {}

  /** Starts watching; never throws (an etcd that does not answer is retried in the background). */
  static open(options: EtcdSignalsOptions): EtcdSignals {
    const signals = new EtcdSignals(options);
    signals.watch();
    return signals;
  }

  /** Tells the other replicas; resolves once etcd stored it, or false (logged) when it could not. */
  async send(signal: Omit<ReplicaSignal, 'replica' | 'atMs'>): Promise<boolean> {
    const full: ReplicaSignal = { ...signal, replica: this.options.identity, atMs: Date.now() };
    try {
      await this.options.client.put(this.key(signal.kind, signal.source)).value(JSON.stringify(full)).exec();
      return true;
    } catch (err) {
      this.options.log.warn(
        { kind: signal.kind, source: signal.source, err: String(err) },
        'could not tell the other replicas through etcd: only this replica acted',
      );
      return false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.watcher?.cancel().catch(() => undefined);
  }

  private key(kind: string, source: string): string {
    return `${this.options.prefix}signals/${kind}/${source}`;
  }

  private watch(): void {
    if (this.closed) return;
    this.options.client
      .watch()
      .prefix(`${this.options.prefix}signals/`)
      .create()
      .then((watcher) => {
        if (this.closed) {
          void watcher.cancel();
          return;
        }
        this.watcher = watcher;
        watcher.on('put', (kv) => {
          const signal = parseSignal(kv.value.toString('utf8'));
          if (signal === undefined) {
            this.options.log.warn(
              { key: kv.key.toString('utf8') },
              'ignored a replica signal meshmux did not write',
            );
            return;
          }
          if (signal.replica !== this.options.identity) this.options.onSignal(signal);
        });
        watcher.on('error', (err: Error) =>
          this.options.log.debug({ err: err.message }, 'signal watch error'),
        );
      })
      .catch((err: unknown) => {
        this.options.log.warn({ err: String(err) }, 'could not watch replica signals in etcd; retrying');
        const retry = setTimeout(() => this.watch(), 2_000);
        retry.unref();
      });
  }
}

function parseSignal(text: string): ReplicaSignal | undefined {
  try {
    const s = JSON.parse(text) as Partial<ReplicaSignal>;
    if ((s.kind !== 'confirm' && s.kind !== 'refresh') || typeof s.source !== 'string') return undefined;
    if (typeof s.replica !== 'string' || typeof s.atMs !== 'number') return undefined;
    if (s.kind === 'confirm' && typeof s.digest !== 'string') return undefined;
    return s as ReplicaSignal;
  } catch {
    return undefined;
  }
}
