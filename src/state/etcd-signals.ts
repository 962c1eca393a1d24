import type { Etcd3 } from 'etcd3';
import type { Logger } from '../core/logger.js';
import { EtcdPrefixWatch } from './etcd-prefix-watch.js';

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
  private watcher: EtcdPrefixWatch | undefined;

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
    await this.watcher?.cancel();
  }

  private key(kind: string, source: string): string {
    return `${this.options.prefix}signals/${kind}/${source}`;
  }

  private watch(): void {
    this.watcher = new EtcdPrefixWatch(
      this.options.client,
      `${this.options.prefix}signals/`,
      'replica signals',
      this.options.log,
      (kv) => {
        const signal = parseSignal(kv.value.toString('utf8'));
        if (signal === undefined) {
          this.options.log.warn(
            { key: kv.key.toString('utf8') },
            'ignored a replica signal meshmux did not write',
          );
          return;
        }
        if (signal.replica !== this.options.identity) this.options.onSignal(signal);
      },
    );
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
