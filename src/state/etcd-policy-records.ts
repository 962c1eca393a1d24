import type { Etcd3, Lease } from 'etcd3';
import { LatestOnlyWriter } from '../core/latest-only-writer.js';
import type { Logger } from '../core/logger.js';
import { EtcdPrefixWatch } from './etcd-prefix-watch.js';
import { parsePolicyRecord, type PolicyRecord } from './policy-record.js';

/**
 * How long a replica's record outlives it, seconds: as long as an absent istiod is judged for
 * (`KEEP_ABSENT_MS`), so a rollout that replaces every replica still finds what the old ones served.
 */
const RECORD_TTL_S = 600;

/**
 * A replica's record as etcd stores it, with the revision of its last write: etcd's own order of
 * writes, which no replica's clock can skew.
 */
export interface StoredPolicyRecord {
  readonly record: PolicyRecord;
  readonly revision: bigint;
}

/**
 * The most a record takes in etcd (whose requests are limited to 1.5 MiB by default): past it,
 * the istiods seen longest ago are left out.
 */
const MAX_RECORD_BYTES = 1024 * 1024;

/** Options of {@link EtcdPolicyRecords.open}. */
export interface EtcdPolicyRecordsOptions {
  readonly client: Etcd3;
  /** Every key starts with it (the `state.etcd` prefix). */
  readonly prefix: string;
  /** This replica's name: the key of its own record, whose writes are not handed back to it. */
  readonly identity: string;
  readonly log: Logger;
  /** Another replica wrote its record. Synchronous; must not throw. */
  readonly onRecord: (replica: string, record: PolicyRecord) => void;
}

/**
 * Each replica's policy record (the policies in force and the istiods it served) in etcd, one key
 * per replica (`<prefix>policies/<replica>`), kept under a lease that outlives the replica by
 * {@link RECORD_TTL_S}. A replica judges a change of the policies for the istiods of every replica,
 * so replicas that see the same edit decide alike; and a replica started on a new node, its state
 * folder empty, judges the policies it is configured with for the istiods the others served, as a
 * restart on a kept folder does. Best effort: a record that cannot be written is logged and the
 * next one tried.
 */
export class EtcdPolicyRecords {
  private watcher: EtcdPrefixWatch | undefined;
  private lease: Lease | undefined;
  private readonly writer = new LatestOnlyWriter((record: PolicyRecord) => this.writeNow(record));
  private lastError = '';
  private closed = false;
  /** Whether a record was trimmed to fit (said once). */
  private trimmed = false;

  private constructor(private readonly options: EtcdPolicyRecordsOptions) {}

  /** Starts watching the other replicas' records; never throws. */
  static open(options: EtcdPolicyRecordsOptions): EtcdPolicyRecords {
    const records = new EtcdPolicyRecords(options);
    records.watcher = new EtcdPrefixWatch(
      options.client,
      records.folder,
      'policy records',
      options.log,
      (kv) => records.received(kv.key.toString('utf8'), kv.value.toString('utf8')),
    );
    return records;
  }

  /**
   * Every replica's record stored now, this one's last included (a replica restarted under the
   * same name); records that cannot be read are logged and left out. Rejects when etcd does not
   * answer within `timeoutMs`.
   */
  async readAll(timeoutMs: number): Promise<StoredPolicyRecord[]> {
    const read = this.options.client.getAll().prefix(this.folder).exec();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`etcd did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      const { kvs } = await Promise.race([read, timeout]);
      return kvs.flatMap((kv) => {
        const record = this.parse(kv.key.toString('utf8'), kv.value.toString('utf8'));
        return record === undefined ? [] : [{ record, revision: BigInt(kv.mod_revision) }];
      });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Keeps `record` as this replica's; only the latest of those handed in meanwhile is written. */
  write(record: PolicyRecord): void {
    if (!this.closed) this.writer.write(record);
  }

  /** Resolves once every record handed in has been written (or failed). */
  flushed(): Promise<void> {
    return this.writer.flushed();
  }

  /**
   * Stops watching. The lease is left to expire rather than revoked: a replica that stops for a
   * rollout leaves its istiods on record for the one that replaces it.
   */
  async close(): Promise<void> {
    await this.flushed();
    this.closed = true;
    // Its keepalive stops; the record stays until the lease runs out.
    this.lease?.release();
    await this.watcher?.cancel();
  }

  private get folder(): string {
    return `${this.options.prefix}policies/`;
  }

  private received(key: string, text: string): void {
    const replica = key.slice(this.folder.length);
    if (replica === this.options.identity) return;
    const record = this.parse(key, text);
    if (record !== undefined) this.options.onRecord(replica, record);
  }

  private parse(key: string, text: string): PolicyRecord | undefined {
    try {
      return parsePolicyRecord(text);
    } catch (err) {
      this.options.log.warn(
        { key, err: (err as Error).message },
        'ignored a policy record meshmux did not write',
      );
      return undefined;
    }
  }

  private async writeNow(record: PolicyRecord): Promise<void> {
    const key = `${this.folder}${this.options.identity}`;
    try {
      this.lease ??= this.newLease();
      await this.lease.put(key).value(this.bounded(record)).exec();
      this.lastError = '';
    } catch (err) {
      // A lease etcd no longer knows (an outage longer than its time to live) is granted anew;
      // this one's keepalive stops, so a write etcd refuses leaves no lease behind.
      this.lease?.release();
      this.lease = undefined;
      const message = String(err);
      if (message !== this.lastError) {
        this.lastError = message;
        this.options.log.warn({ err: message }, 'cannot write the policies in force to etcd');
      }
    }
  }

  /** `record` as JSON, of at most {@link MAX_RECORD_BYTES}: the istiods seen last kept first. */
  private bounded(record: PolicyRecord): string {
    const whole = JSON.stringify(record);
    if (Buffer.byteLength(whole) <= MAX_RECORD_BYTES) return whole;
    const clients = [...record.clients].sort((a, b) => (b.seenAtMs ?? 0) - (a.seenAtMs ?? 0));
    let room = MAX_RECORD_BYTES - Buffer.byteLength(JSON.stringify({ ...record, clients: [] }));
    const kept = [];
    for (const c of clients) {
      room -= Buffer.byteLength(JSON.stringify(c)) + 1;
      if (room < 0) break;
      kept.push(c);
    }
    if (!this.trimmed) {
      this.trimmed = true;
      this.options.log.warn(
        { istiods: clients.length, kept: kept.length, maxBytes: MAX_RECORD_BYTES },
        'the policy record is too large for etcd: the istiods seen longest ago are left out of it',
      );
    }
    return JSON.stringify({ ...record, clients: kept });
  }

  private newLease(): Lease {
    const lease = this.options.client.lease(RECORD_TTL_S);
    lease.on('lost', () => {
      if (this.lease === lease) this.lease = undefined;
    });
    return lease;
  }
}
