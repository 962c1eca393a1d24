import { createHash, randomBytes } from 'node:crypto';
import { circuitBreaker, ConsecutiveBreaker, handleWhen, retry } from 'cockatiel';
import { Etcd3, isRecoverableError, type Campaign, type IOptions } from 'etcd3';
import { MeshmuxError, toMeshmuxError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { RecordOrigin, SourceRecord, SourceRecordStore } from '../merge/source-record.js';
import type { LoadedRecords } from './file-record-store.js';
import {
  RecordWriteQueue,
  type RecordWriteQueueOptions,
  type RecordWriteStatus,
  type SinkWrite,
} from './record-write-queue.js';
import { EtcdPrefixWatch } from './etcd-prefix-watch.js';
import { EtcdPolicyRecords } from './etcd-policy-records.js';
import { EtcdSignals, type ReplicaSignal } from './etcd-signals.js';
import type { PolicyRecord } from './policy-record.js';
import { decodeStateFile, encodeStateFile } from './state-file.js';

/** How to reach etcd, as the configuration gives it (secrets already read from their files). */
export interface EtcdConnection {
  /** Client URLs, `http(s)://host:port`. */
  readonly endpoints: readonly string[];
  /** Every key meshmux writes starts with this. Default `/meshmux/`. */
  readonly prefix: string;
  /** PEM contents: the CA that signs etcd's certificate, and a client certificate and key. */
  readonly tls?: { readonly ca?: Buffer; readonly cert?: Buffer; readonly key?: Buffer };
  readonly username?: string;
  readonly password?: string;
  /** Lease of the writer's election, seconds: a dead writer is replaced within this. Default 10. */
  readonly leaseTtlS?: number;
  /**
   * How often the writer compacts etcd's history, ms, keeping the last interval of it; 0 never
   * (etcd compacts itself). Default 60 s.
   */
  readonly compactionMs?: number;
}

/** Options of {@link EtcdRecordStore.open}. */
export interface EtcdRecordStoreOptions extends RecordWriteQueueOptions {
  readonly etcd: EtcdConnection;
  /** This replica's name in the writer election (host name and pid, say). */
  readonly identity: string;
  /** etcd became reachable (true) or stopped answering (false). Synchronous; must not throw. */
  readonly onStoreUp?: (up: boolean) => void;
  /** This replica became the writer (true) or stopped being it (false). */
  readonly onWriter?: (writer: boolean) => void;
  /**
   * While this replica is not the writer: the writer stored a new record of a source (read back
   * whole and checked). Synchronous; must not throw.
   */
  readonly onRecord?: (record: SourceRecord) => void;
  /** Deadline of one etcd request. Default 5 s. */
  readonly requestTimeoutMs?: number;
  /** How often reachability is checked. Default 2 s. */
  readonly probeMs?: number;
}

/** What `/debug/state` shows of the etcd store. */
export interface EtcdStoreStatus {
  readonly endpoints: readonly string[];
  readonly prefix: string;
  readonly up: boolean;
  readonly writer: boolean;
  readonly identity: string;
  readonly records: readonly RecordWriteStatus[];
}

/**
 * After a quiet spell, a change is stored this long after it: the pieces of one change come
 * within it, and a writer killed after serving a change loses only what came in it (a second,
 * the spacing of writes under churn, before).
 */
const QUIET_DELAY_MS = 100;

/** etcd refuses requests over 1.5 MiB by default: a record is cut into values well below that. */
const CHUNK_BYTES = 1024 * 1024;

/** The manifest of one source's record: which chunks make it up, and their digest. */
interface Manifest {
  readonly generation: string;
  readonly chunks: number;
  readonly bytes: number;
  readonly sha256: string;
  readonly savedMs: number;
  /** The process that stored it; absent in manifests of earlier releases. */
  readonly writer?: string;
}

/**
 * The merge's records in etcd, shared by the replicas of a fleet, so that a replica that starts on
 * an empty disk during an upstream outage restores the last good state the fleet had.
 *
 * One replica writes, chosen by etcd's lease election; the others keep their latest records in
 * memory and write them once they are elected (a writer that dies loses its lease within
 * `leaseTtlS`), except a record of a source whose record in etcd another replica stored after its
 * upstream last changed it here. A record is stored as chunks under a fresh generation, then a
 * manifest naming the generation is swapped in with a compare-and-swap that also requires the
 * writer's campaign key (a former writer that lost its lease cannot overwrite a newer record),
 * then the previous generation is deleted: a reader sees the old record or the new one, never a
 * mix. Writes follow {@link RecordWriteQueue}'s policy; the writer also compacts etcd's history
 * and, as it is elected, removes the chunks of records never finished.
 *
 * etcd is never on the serving path: when it does not answer, the store reports it
 * (`onStoreUp(false)`, a warning), keeps the latest records and writes them once it is back.
 */
export class EtcdRecordStore implements SourceRecordStore {
  private readonly queue: RecordWriteQueue;
  private readonly client: Etcd3;
  private readonly prefix: string;
  private campaign: Campaign | undefined;
  private watch: EtcdPrefixWatch | undefined;
  private signals: EtcdSignals | undefined;
  private policyRecords: EtcdPolicyRecords | undefined;
  private campaignTimer: NodeJS.Timeout | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private compactionTimer: NodeJS.Timeout | undefined;
  /** etcd's revision at the writer's last compaction tick: the next tick compacts up to it. */
  private compactTo: number | undefined;
  /** The last failure of a compaction, said once until it changes. */
  private compactionError: string | undefined;
  private up = false;
  private writer = false;
  private closed = false;
  /** Sources whose record is still to be removed from etcd, and those being removed now. */
  private readonly removals = new Set<string>();
  private readonly removing = new Set<string>();
  /** The last error each removal met, said once until it changes. */
  private readonly removalErrors = new Map<string, string>();
  /** etcd's cluster, once a read of every record or a write answered; with it, {@link revisions}. */
  private cluster: string | undefined;
  /** The revision of etcd's answer to the read of every record at start: the records watch goes on from it. */
  private watchFrom: number | undefined;
  /** Per source, the revision of its record in etcd this replica knows of (read, watched or written). */
  private readonly revisions = new Map<string, number>();
  /**
   * Per source, the revision of its record in etcd this replica knew of when its upstream last
   * changed it here (Infinity: etcd's state was unknown then): a record another replica stored in
   * etcd since was taken after this one. See {@link supersededBy}.
   */
  private readonly changedOver = new Map<string, number>();
  /**
   * Per source, the revision of its record in etcd when this store read every record at its start
   * (0: there was none); undefined when that read failed (etcd did not answer).
   */
  private readAtOpen: Map<string, number> | undefined;
  /** Per source, the revision of the last record this replica stored. */
  private readonly stored = new Map<string, number>();

  private constructor(private readonly options: EtcdRecordStoreOptions) {
    const { etcd } = options;
    this.prefix = etcd.prefix;
    this.client = new Etcd3(clientOptions(etcd, options.requestTimeoutMs ?? 5_000));
    this.queue = new RecordWriteQueue(
      { write: (source, record) => this.write(source, record), where: (source) => this.manifestKey(source) },
      { ...options, quietDelayMs: options.quietDelayMs ?? QUIET_DELAY_MS },
    );
    this.queue.pause();
  }

  /**
   * Connects, reads every record under the prefix and starts campaigning to be the writer. Never
   * throws for an unreachable etcd: `loaded` is then empty with the reason in `problems`, and the
   * store keeps trying in the background. Records that cannot be believed (a missing chunk, a
   * digest that does not match) are reported and skipped.
   */
  static async open(
    options: EtcdRecordStoreOptions,
  ): Promise<{ store: EtcdRecordStore; loaded: LoadedRecords }> {
    const store = new EtcdRecordStore(options);
    let loaded: LoadedRecords;
    try {
      loaded = await loadRecords(store.client, store.prefix, options, options.requestTimeoutMs ?? 5_000);
      // Every record's, those that could not be read too: this replica's is written over them.
      for (const [source, revision] of loaded.manifests ?? []) store.noteRevision(source, revision);
      store.readAtOpen = new Map(store.revisions);
      store.cluster = loaded.cluster;
      store.watchFrom = loaded.revision;
      store.setUp(true);
    } catch (err) {
      const error = toMeshmuxError(err, 'STATE', { file: options.etcd.endpoints.join(',') });
      options.log.warn({ err: error.describe() }, 'etcd does not answer: starting from the local state only');
      store.setUp(false);
      loaded = { records: new Map(), problems: [error] };
    }
    store.startCampaign();
    store.probe();
    store.watchRecords();
    return { store, loaded };
  }

  /**
   * Written later, never waited for: etcd stays off the serving path (the local folder is not).
   * `upstream`: the change carries what the source's upstream sent, which orders this replica's
   * record against another's (see {@link supersededBy}).
   */
  changed(source: string, read: () => SourceRecord, upstream = true): void {
    this.removals.delete(source);
    if (upstream)
      this.changedOver.set(source, this.cluster === undefined ? Infinity : (this.revisions.get(source) ?? 0));
    void this.queue.changed(source, read);
  }

  /**
   * Forgets the source's record, and removes it from etcd: at once when this replica is the
   * writer, else once it is elected; a removal etcd did not take is tried again (see
   * {@link removePending}), so that no replica started later restores the source's objects.
   */
  removed(source: string): void {
    this.queue.forget(source);
    this.changedOver.delete(source);
    this.stored.delete(source);
    this.removals.add(source);
    this.removePending();
  }

  /**
   * Signals between the replicas over the same etcd connection (see {@link EtcdSignals}); opened
   * once, closed with the store.
   */
  openSignals(onSignal: (signal: ReplicaSignal) => void): EtcdSignals {
    this.signals ??= EtcdSignals.open({
      client: this.client,
      prefix: this.prefix,
      identity: this.options.identity,
      log: this.options.log,
      onSignal,
    });
    return this.signals;
  }

  /**
   * The replicas' policy records over the same etcd connection (see {@link EtcdPolicyRecords});
   * opened once, closed with the store.
   */
  openPolicyRecords(onRecord: (replica: string, record: PolicyRecord) => void): EtcdPolicyRecords {
    this.policyRecords ??= EtcdPolicyRecords.open({
      client: this.client,
      prefix: this.prefix,
      identity: this.options.identity,
      log: this.options.log,
      onRecord,
    });
    return this.policyRecords;
  }

  /**
   * This process, and the revision of the source's record in etcd it knows of now: stamped on the
   * records the local folder keeps, so that a start tells which of the two was taken later by
   * etcd's order, not by two machines' clocks. Without etcd's cluster known (etcd never answered a
   * read of every record nor a write), no revision: the start then goes by the clocks.
   */
  originOf(source: string): RecordOrigin {
    const replica = this.options.identity;
    if (this.cluster === undefined) return { replica };
    return { replica, etcd: { cluster: this.cluster, revision: this.revisions.get(source) ?? 0 } };
  }

  /** Reachability, the writer role and each source's last write, for `/debug/state`. */
  report(): EtcdStoreStatus {
    return {
      endpoints: this.options.etcd.endpoints,
      prefix: this.prefix,
      up: this.up,
      writer: this.writer,
      identity: this.options.identity,
      records: this.queue.report(),
    };
  }

  /** Writes what is pending (when the writer), gives up the writer role and disconnects. */
  async close(): Promise<void> {
    this.closed = true;
    this.stopCompacting();
    if (this.probeTimer !== undefined) clearTimeout(this.probeTimer);
    if (this.campaignTimer !== undefined) clearTimeout(this.campaignTimer);
    await this.queue.close();
    await this.watch?.cancel();
    await this.signals?.close();
    await this.policyRecords?.close();
    const campaign = this.campaign;
    this.campaign = undefined;
    if (campaign !== undefined) await campaign.resign().catch(() => undefined);
    this.client.close();
  }

  private manifestKey(source: string): string {
    return `${this.prefix}records/${source}`;
  }

  private chunkPrefix(source: string, generation?: string): string {
    return `${this.prefix}chunks/${source}/${generation === undefined ? '' : `${generation}/`}`;
  }

  private setUp(up: boolean): void {
    if (up === this.up) return;
    this.up = up;
    if (up) this.options.log.info({ endpoints: this.options.etcd.endpoints }, 'etcd answers');
    else
      this.options.log.warn(
        { endpoints: this.options.etcd.endpoints },
        'etcd does not answer: serving goes on from memory and local state; records are written once it is back',
      );
    this.options.onStoreUp?.(up);
  }

  private setWriter(writer: boolean): void {
    if (writer === this.writer) return;
    this.writer = writer;
    this.options.log.info(
      { identity: this.options.identity, writer },
      writer ? 'elected the state writer' : 'no longer the state writer',
    );
    if (writer) {
      // Its writes wait for the sweep: a generation being written is named by no record yet.
      void this.sweepChunks().finally(() => {
        if (this.writer) this.queue.resume();
      });
      this.compactLater();
    } else {
      this.queue.pause();
      this.stopCompacting();
    }
    this.removePending();
    this.options.onWriter?.(writer);
  }

  /**
   * Removes the chunks no record names: those of a write a writer did not finish (killed between
   * its chunks and its record, or cut off from etcd before it could remove them). Each is up to a
   * record's size and, unlike history, no compaction removes it. Runs as a replica is elected,
   * before its own writes: only the writer writes, so what no record names then is left over.
   * A failure is logged; the next election tries again.
   */
  private async sweepChunks(): Promise<void> {
    const chunks = `${this.prefix}chunks/`;
    try {
      const [keys, manifests] = await Promise.all([
        this.client.getAll().prefix(chunks).keys(),
        this.client.getAll().prefix(`${this.prefix}records/`).exec(),
      ]);
      const named = new Set<string>();
      for (const kv of manifests.kvs) {
        const source = sourceOfRecord(this.prefix, kv.key);
        const generation = parseManifest(kv.value.toString('utf8'))?.generation;
        if (generation !== undefined) named.add(`${source}/${generation}/`);
      }
      const leftOver = new Set<string>();
      for (const key of keys) {
        // <source>/<generation>/<index>: the source's name may hold a slash, the others do not.
        const parts = key.slice(chunks.length).split('/');
        if (parts.length < 3) continue;
        const group = `${parts.slice(0, -1).join('/')}/`;
        if (!named.has(group)) leftOver.add(group);
      }
      for (const group of leftOver) {
        if (!this.writer) return;
        await this.client.delete().prefix(`${chunks}${group}`).exec();
      }
      if (leftOver.size > 0)
        this.options.log.info(
          { generations: leftOver.size },
          'removed from etcd the chunks of records never finished (a writer stopped mid-write)',
        );
    } catch (err) {
      this.options.log.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'could not look for chunks of unfinished records in etcd: the next election tries again',
      );
    }
  }

  /**
   * etcd keeps every revision of every key until its history is compacted: each whole record the
   * writer stores stays in etcd's backend, which fills its quota (2 GiB by default) under churn.
   * etcd then raises its NOSPACE alarm and refuses every write, this fleet's and anyone else's,
   * until an operator compacts, defragments and disarms it. So the writer compacts, every
   * `compactionMs`, up to the revision etcd was at one interval before: the pages freed are
   * reused, and watches (the replicas' own included) keep an interval of history to resume from.
   */
  private compactLater(): void {
    const every = this.options.etcd.compactionMs ?? 60_000;
    if (every <= 0 || this.closed || this.compactionTimer !== undefined) return;
    this.compactionTimer = setTimeout(() => {
      this.compactionTimer = undefined;
      void this.compact().finally(() => {
        if (this.writer) this.compactLater();
      });
    }, every);
    this.compactionTimer.unref();
  }

  private stopCompacting(): void {
    if (this.compactionTimer !== undefined) clearTimeout(this.compactionTimer);
    this.compactionTimer = undefined;
    this.compactTo = undefined;
  }

  private async compact(): Promise<void> {
    try {
      const answer = await this.client.get(`${this.prefix}writer-probe`).exec();
      this.sameCluster(answer.header.cluster_id);
      const now = Number(answer.header.revision);
      const upTo = this.compactTo;
      this.compactTo = now;
      if (upTo !== undefined && this.writer) {
        await this.client.kv.compact({ revision: upTo }).catch((err: unknown) => {
          // Compacted further already (by etcd itself, or another tool): nothing to do.
          if (!String(err).includes('required revision has been compacted')) throw err;
        });
        this.options.log.debug({ revision: upTo }, "compacted etcd's history");
      }
      this.compactionError = undefined;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (message === this.compactionError) return;
      this.compactionError = message;
      this.options.log.warn(
        { err: message, endpoints: this.options.etcd.endpoints },
        "could not compact etcd's history: tried again at the next interval",
      );
    }
  }

  /** Removes the records of removed sources from etcd, when the writer; called again on each probe. */
  private removePending(): void {
    if (!this.writer || this.closed) return;
    for (const source of this.removals) {
      if (this.removing.has(source)) continue;
      this.removing.add(source);
      this.remove(source).then(
        () => {
          this.removing.delete(source);
          if (!this.removals.delete(source)) return;
          this.removalErrors.delete(source);
          this.options.log.info({ source }, 'removed the record of a source no longer configured from etcd');
        },
        (err: unknown) => {
          this.removing.delete(source);
          const message = err instanceof Error ? err.message : String(err);
          if (this.removalErrors.get(source) === message) return;
          this.removalErrors.set(source, message);
          this.options.log.warn(
            { source, err: message },
            'could not remove the record of a source no longer configured from etcd: trying again',
          );
        },
      );
    }
  }

  /**
   * Removes a source's record once no write of it is under way (one already sent would put it
   * back), in one transaction fenced as a write is, so that a writer frozen past its lease cannot
   * remove what the writer elected since stored, and on the manifest it read, so that it cannot
   * remove what a write of the source configured again stored since.
   */
  private async remove(source: string): Promise<void> {
    await this.queue.idle(source);
    // Configured again meanwhile: its record stays.
    if (!this.removals.has(source)) return;
    const campaign = this.campaign;
    if (!this.writer || campaign === undefined)
      throw new MeshmuxError('STATE', 'no longer the state writer', { file: this.manifestKey(source) });
    const leader = await campaign.getCampaignKey();
    const key = this.manifestKey(source);
    const kv = (await this.client.get(key).exec()).kvs[0];
    if (kv === undefined) return;
    // The record as read, alone: a write of the source configured again meanwhile swaps another
    // manifest in (this removal then does nothing), and its chunks are of another generation.
    const generation = parseManifest(kv.value.toString('utf8'))?.generation;
    const removed = await this.client
      .if(leader, 'Create', '>', 0)
      .and(key, 'Mod', '==', kv.mod_revision)
      .then(
        this.client.delete().key(key),
        ...(generation === undefined
          ? []
          : [this.client.delete().prefix(this.chunkPrefix(source, generation))]),
      )
      .commit();
    if (!removed.succeeded && this.removals.has(source))
      throw new MeshmuxError(
        'STATE',
        'the record changed in etcd while it was removed, or this replica is no longer the writer',
        { file: key },
      );
  }

  /**
   * Follows the records the writer stores: the revision of each, and the record for `onRecord`
   * (while not the writer). After an outage, a record the writer
   * stored meanwhile is handed over at its current version even when etcd compacted its history
   * (see {@link EtcdPrefixWatch}); the record of a source removed meanwhile is not.
   */
  private watchRecords(): void {
    const recordsPrefix = `${this.prefix}records/`;
    this.watch = new EtcdPrefixWatch(
      this.client,
      recordsPrefix,
      'records of the writer',
      this.options.log,
      (kv) => {
        const source = sourceOfRecord(this.prefix, kv.key);
        this.noteRevision(source, Number(kv.mod_revision));
        if (this.writer || this.options.onRecord === undefined) return;
        loadRecord(this.client, this.prefix, source, kv.value.toString('utf8'))
          .then((record) => this.options.onRecord?.(record))
          .catch((err: unknown) =>
            this.options.log.debug(
              { source, err: String(err) },
              "could not read another replica's record (a newer one replaces it)",
            ),
          );
      },
      undefined,
      this.watchFrom,
    );
  }

  /**
   * Whether etcd's record of the source (`kv`, its manifest) was taken after this replica's.
   *
   * A replica elected writes the records it kept while it was not: one whose upstream stopped
   * answering it (a partition, an upstream instance of its own that hangs) kept an older state
   * than the writer before it stored, and a replica started later on an empty disk would restore
   * that. Records are ordered as a start orders them, by etcd's revisions: a record another
   * replica stored after the source's upstream last changed it here (or, when it has not since
   * this store started, after the store read etcd's records) was taken later. When etcd's state
   * was not known then, nothing orders the two: this replica's record is written, as before.
   */
  private supersededBy(source: string, kv: { mod_revision: string; value: Buffer }): boolean {
    const current = Number(kv.mod_revision);
    if (current === this.stored.get(source)) return false;
    const manifest = parseManifest(kv.value.toString('utf8'));
    // A manifest that cannot be believed orders nothing: the record is written over it.
    if (manifest === undefined || manifest.writer === this.options.identity) return false;
    const over =
      this.changedOver.get(source) ?? this.readAtOpen?.get(source) ?? (this.readAtOpen ? 0 : Infinity);
    return current > over;
  }

  /**
   * What orders this replica's records against etcd's when the read of every record at start
   * failed (etcd did not answer), or etcd answered as another cluster since: the revision of each
   * record there now, and the records watch going on from that read.
   */
  private async readOrder(): Promise<void> {
    const manifests = await this.client.getAll().prefix(`${this.prefix}records/`).exec();
    if (this.readAtOpen !== undefined || this.closed) return;
    this.sameCluster(manifests.header.cluster_id);
    for (const kv of manifests.kvs)
      this.noteRevision(sourceOfRecord(this.prefix, kv.key), Number(kv.mod_revision));
    this.readAtOpen = new Map(this.revisions);
    const watch = this.watch;
    this.watch = undefined;
    this.watchFrom = Number(manifests.header.revision);
    await watch?.cancel();
    if (!this.closed) this.watchRecords();
  }

  /**
   * etcd answered from another cluster than before (rebuilt empty, or restored from a snapshot):
   * its revisions start over, so what this store knew of them orders nothing. Records are written
   * as they come until its records are read again, and the records watch goes on from that read.
   */
  private sameCluster(cluster: string): void {
    if (this.cluster === undefined || this.cluster === cluster) {
      this.cluster ??= cluster;
      return;
    }
    this.options.log.warn(
      { before: this.cluster, now: cluster, endpoints: this.options.etcd.endpoints },
      'etcd answers as another cluster (rebuilt, or restored from a snapshot): its revisions start over',
    );
    this.cluster = cluster;
    this.revisions.clear();
    this.changedOver.clear();
    this.stored.clear();
    this.readAtOpen = undefined;
    this.compactTo = undefined;
    // The records watch goes on from the new cluster's read (the next probe tries again).
    this.readOrder().catch(() => undefined);
  }

  private noteRevision(source: string, revision: number): void {
    if (revision > (this.revisions.get(source) ?? 0)) this.revisions.set(source, revision);
  }

  /** Campaigns until elected; a campaign that fails (lease lost, etcd gone) is started again. */
  private startCampaign(): void {
    if (this.closed || this.campaign !== undefined) return;
    const election = this.client.election(`${this.prefix}writer`, this.options.etcd.leaseTtlS ?? 10);
    const campaign = election.campaign(this.options.identity);
    this.campaign = campaign;
    campaign.on('elected', () => {
      if (this.campaign === campaign) this.setWriter(true);
    });
    campaign.on('error', (err: Error) => {
      if (this.campaign !== campaign) return;
      this.campaign = undefined;
      this.setWriter(false);
      this.options.log.debug({ err: err.message }, 'state writer campaign ended; campaigning again');
      void campaign.resign().catch(() => undefined);
      this.campaignTimer = setTimeout(() => {
        this.campaignTimer = undefined;
        this.startCampaign();
      }, 1_000);
      this.campaignTimer.unref();
    });
  }

  /** Checks reachability now and then; a writer that cannot reach etcd stops writing until it can. */
  private probe(): void {
    if (this.closed) return;
    this.probeTimer = setTimeout(() => {
      this.client
        .get(`${this.prefix}writer-probe`)
        .exec()
        .then(
          async (answer) => {
            this.setUp(true);
            this.sameCluster(answer.header.cluster_id);
            if (this.readAtOpen === undefined) await this.readOrder();
            this.removePending();
          },
          () => this.setUp(false),
        )
        .catch(() => undefined)
        .finally(() => this.probe());
    }, this.options.probeMs ?? 2_000);
    this.probeTimer.unref();
  }

  private async write(source: string, record: SourceRecord): Promise<SinkWrite> {
    const key = this.manifestKey(source);
    const read = await this.client.get(key).exec();
    this.sameCluster(read.header.cluster_id);
    const kv = read.kvs[0];
    if (kv !== undefined && this.supersededBy(source, kv)) {
      this.noteRevision(source, Number(kv.mod_revision));
      this.options.log.info(
        { source, revision: Number(kv.mod_revision), key },
        "kept the source's record in etcd: another replica stored it after this one's upstream last changed it",
      );
      return { bytes: 0, superseded: true };
    }
    const bytes = Buffer.concat(
      await encodeStateFile({ ...record, origin: { replica: this.options.identity } }),
    );
    const generation = `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    const chunks = Math.max(1, Math.ceil(bytes.length / CHUNK_BYTES));
    try {
      for (let i = 0; i < chunks; i++) {
        await this.client
          .put(chunkKey(this.prefix, source, generation, i))
          .value(bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES))
          .exec();
      }
      const manifest: Manifest = {
        generation,
        chunks,
        bytes: bytes.length,
        sha256: createHash('sha256').update(bytes).digest('hex'),
        savedMs: record.savedMs,
        writer: this.options.identity,
      };
      // The key of this replica's campaign stands as long as its lease does, and while it stands
      // no other replica is elected: a writer stalled past its lease (a pause of the process, a
      // frozen VM) finds it gone, and leaves the newer record of the writer elected since.
      const campaign = this.campaign;
      if (!this.writer || campaign === undefined)
        throw new MeshmuxError('STATE', 'no longer the state writer', { file: key });
      const leader = await campaign.getCampaignKey();
      const swap = await this.client
        .if(key, 'Mod', '==', kv === undefined ? 0 : kv.mod_revision)
        .and(leader, 'Create', '>', 0)
        .then(this.client.put(key).value(JSON.stringify(manifest)))
        .commit();
      if (!swap.succeeded)
        throw new MeshmuxError(
          'STATE',
          'the record changed in etcd while it was written, or this replica is no longer the writer',
          { file: key },
        );
      this.cluster ??= swap.header.cluster_id;
      const revision = Number(swap.header.revision);
      this.noteRevision(source, revision);
      this.stored.set(source, revision);
      const previous = kv === undefined ? undefined : parseManifest(kv.value.toString('utf8'));
      if (previous !== undefined && previous.generation !== generation)
        await this.client.delete().prefix(this.chunkPrefix(source, previous.generation)).exec();
      this.setUp(true);
      return { bytes: bytes.length };
    } catch (err) {
      // The swap may have been taken with its answer lost (a deadline passed), or the previous
      // generation's removal failed after it: the chunks are then the record's, and it is stored.
      const now = await this.client
        .get(key)
        .exec()
        .catch(() => undefined);
      // Not read back: the chunks may be the record's. They stay (a later election removes them
      // if no record names them).
      if (now === undefined) throw err;
      const named = now.kvs[0];
      if (named !== undefined && parseManifest(named.value.toString('utf8'))?.generation === generation) {
        const revision = Number(named.mod_revision);
        this.noteRevision(source, revision);
        this.stored.set(source, revision);
        this.setUp(true);
        return { bytes: bytes.length };
      }
      await this.client
        .delete()
        .prefix(this.chunkPrefix(source, generation))
        .exec()
        .catch(() => undefined);
      if (refusedForSpace(err))
        throw new MeshmuxError(
          'STATE',
          'etcd is out of space (its backend quota; its NOSPACE alarm is raised) and takes no write until its history is compacted, it is defragmented and the alarm disarmed (etcdctl compact, defrag, alarm disarm)',
          { file: this.manifestKey(source) },
        );
      throw err;
    }
  }
}

/**
 * The records a fleet keeps in etcd, read once without taking part in the writer election: for
 * tools and tests that inspect what a new replica would restore.
 */
export async function readEtcdRecords(
  etcd: EtcdConnection,
  log: Logger,
  requestTimeoutMs = 5_000,
): Promise<LoadedRecords> {
  const client = new Etcd3(clientOptions(etcd, requestTimeoutMs));
  try {
    return await loadRecords(client, etcd.prefix, { log });
  } finally {
    client.close();
  }
}

function parseManifest(text: string): Manifest | undefined {
  try {
    const m = JSON.parse(text) as Partial<Manifest>;
    return typeof m.generation === 'string' &&
      typeof m.chunks === 'number' &&
      typeof m.bytes === 'number' &&
      typeof m.sha256 === 'string' &&
      typeof m.savedMs === 'number' &&
      (m.writer === undefined || typeof m.writer === 'string')
      ? (m as Manifest)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The source a key under `<prefix>records/` is the record of. */
function sourceOfRecord(prefix: string, key: Buffer): string {
  return key.toString('utf8').slice(`${prefix}records/`.length);
}

/** etcd refuses a write for space (its NOSPACE alarm, raised at its backend quota). */
function refusedForSpace(err: unknown): boolean {
  return String(err).includes('database space exceeded');
}

/**
 * What etcd's client tries again and counts against a host: its own choice, less a refusal for
 * space, which it takes for a passing failure (gRPC's RESOURCE_EXHAUSTED). Tried three times and
 * counted, each refused write opened the host's circuit: every request then failed for 5 s,
 * probes included, and etcd out of space was reported as etcd not answering.
 */
const passing = (err: Error): boolean => isRecoverableError(err) && !refusedForSpace(err);

function clientOptions(etcd: EtcdConnection, timeoutMs: number): IOptions {
  const options: IOptions = {
    hosts: etcd.endpoints.map((e) => e.replace(/^https?:\/\//, '')),
    dialTimeout: timeoutMs,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + timeoutMs }),
    faultHandling: {
      host: () =>
        circuitBreaker(handleWhen(passing), { halfOpenAfter: 5_000, breaker: new ConsecutiveBreaker(3) }),
      global: retry(handleWhen(passing), { maxAttempts: 3 }),
    },
  };
  if (etcd.tls?.ca !== undefined)
    Object.assign(options, {
      credentials: {
        rootCertificate: etcd.tls.ca,
        ...(etcd.tls.key === undefined ? {} : { privateKey: etcd.tls.key }),
        ...(etcd.tls.cert === undefined ? {} : { certChain: etcd.tls.cert }),
      },
    });
  if (etcd.username !== undefined)
    Object.assign(options, { auth: { username: etcd.username, password: etcd.password ?? '' } });
  return options;
}

/**
 * Reads every record under `prefix`: a record whose manifest or chunks cannot be believed is
 * reported (logged, `onLoadError`) and skipped.
 */
async function loadRecords(
  client: Etcd3,
  prefix: string,
  options: Pick<EtcdRecordStoreOptions, 'log' | 'hooks'>,
  firstAnswerMs?: number,
): Promise<LoadedRecords> {
  const records = new Map<string, SourceRecord>();
  const problems: MeshmuxError[] = [];
  const manifests = await within(client.getAll().prefix(`${prefix}records/`).exec(), firstAnswerMs);
  const cluster = manifests.header.cluster_id;
  for (const kv of manifests.kvs) {
    const key = kv.key.toString('utf8');
    const source = sourceOfRecord(prefix, kv.key);
    try {
      const record = await loadRecord(client, prefix, source, kv.value.toString('utf8'));
      // Where the record stands in etcd's order, beside who took it.
      const etcd = { cluster, revision: Number(kv.mod_revision) };
      records.set(source, { ...record, origin: { replica: record.origin?.replica ?? '', etcd } });
    } catch (err) {
      const error = toMeshmuxError(err, 'STATE', { file: key });
      problems.push(error);
      options.log.error({ err: error.describe() }, 'ignored a record in etcd that cannot be believed');
      options.hooks?.onLoadError?.(key, error);
    }
  }
  return {
    records,
    problems,
    cluster,
    revision: Number(manifests.header.revision),
    manifests: new Map(manifests.kvs.map((kv) => [sourceOfRecord(prefix, kv.key), Number(kv.mod_revision)])),
  };
}

/**
 * `answer`, or a failure once `ms` passed without it. The first read of a start waits one
 * request's deadline, not the three tries etcd's client makes of a request that times out: an
 * etcd that hangs (a partition) would hold the start for all three.
 */
async function within<T>(answer: Promise<T>, ms: number | undefined): Promise<T> {
  if (ms === undefined) return answer;
  answer.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new MeshmuxError('STATE', `no answer within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([answer, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The key of chunk `index` of a source's record of one generation. */
function chunkKey(prefix: string, source: string, generation: string, index: number): string {
  return `${prefix}chunks/${source}/${generation}/${String(index).padStart(6, '0')}`;
}

/** Reads the record a manifest names and checks it whole; throws a MeshmuxError naming what is wrong. */
async function loadRecord(
  client: Etcd3,
  prefix: string,
  source: string,
  manifestText: string,
): Promise<SourceRecord> {
  const key = `${prefix}records/${source}`;
  const manifest = parseManifest(manifestText);
  if (manifest === undefined)
    throw new MeshmuxError('STATE', 'the manifest is not one meshmux wrote', { file: key });
  // One chunk a request: an answer holding them all would pass the 4 MiB a gRPC client takes by
  // default once a record is over that (a few tens of thousands of objects).
  const chunks: Buffer[] = [];
  for (let i = 0; i < manifest.chunks; i++) {
    const chunk = await client.get(chunkKey(prefix, source, manifest.generation, i)).buffer();
    if (chunk === null)
      throw new MeshmuxError('STATE', `chunk ${i + 1} of its ${manifest.chunks} is not there`, { file: key });
    chunks.push(chunk);
  }
  const bytes = Buffer.concat(chunks);
  if (createHash('sha256').update(bytes).digest('hex') !== manifest.sha256)
    throw new MeshmuxError('STATE', 'its chunks do not match the digest of the manifest', { file: key });
  const record = decodeStateFile(bytes, key);
  if (record.source !== source)
    throw new MeshmuxError('STATE', `holds the state of source "${record.source}", not "${source}"`, {
      file: key,
    });
  return record;
}
