import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { toMeshmuxError, type MeshmuxError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { RecordOrigin, SourceRecord, SourceRecordStore } from '../merge/source-record.js';
import type { EtcdConnection, EtcdRecordStore } from './etcd-record-store.js';
import { defaultStateDir, fallbackStateDir, FileRecordStore } from './file-record-store.js';
import type { RecordStoreHooks } from './record-write-queue.js';
import { TeeRecordStore } from './tee-record-store.js';

/** `state.etcd` of the configuration: files named, not yet read. */
export interface EtcdStateSettings {
  readonly endpoints: readonly string[];
  readonly prefix: string;
  readonly tls?:
    | {
        readonly ca?: string | undefined;
        readonly cert?: string | undefined;
        readonly key?: string | undefined;
      }
    | undefined;
  readonly username?: string | undefined;
  readonly passwordFile?: string | undefined;
  readonly leaseTtl: number;
  /** How often the writer compacts etcd's history, ms; 0: never. */
  readonly compaction: number;
}

/** What the shared store reports besides writes: reachability, the writer role, the writer's records. */
export interface SharedStateHooks extends RecordStoreHooks {
  onStoreUp?(up: boolean): void;
  onWriter?(writer: boolean): void;
  /** Another replica (the writer) stored a record of a source. */
  onRecord?(record: SourceRecord): void;
}

/** The stores a process runs with, and what it restored; no store when persistence is off or impossible. */
export interface OpenedState {
  /** Where the merge hands its records: the local folder, etcd, or both. */
  readonly store?: SourceRecordStore;
  readonly local?: FileRecordStore;
  readonly shared?: EtcdRecordStore;
  /** Per source, the newest record the local folder and etcd hold. */
  readonly restored: ReadonlyMap<string, SourceRecord>;
  /** Files and keys ignored at start, and why a store could not be used; for the debug page. */
  readonly problems: readonly MeshmuxError[];
  /** Writes what is pending and releases the folder and the etcd connection. */
  close(): Promise<void>;
}

/**
 * Opens the state folder named by the configuration (`none` turns it off) or the default one, and
 * etcd when `state.etcd` is given. A default folder that cannot be created falls back to one under
 * the system's temporary folder (a read-only container root); a folder that cannot be used at all
 * is reported and meshmux runs without it. etcd that does not answer is reported and tried again
 * in the background. Never throws.
 */
export async function openRecordStore(
  configured: string | undefined,
  env: NodeJS.ProcessEnv,
  log: Logger,
  hooks: SharedStateHooks,
  etcd?: EtcdStateSettings,
): Promise<OpenedState> {
  const local = await openFolder(configured, env, log, hooks);
  const shared = etcd === undefined ? undefined : await openEtcd(etcd, log, hooks);
  const sharedStore = shared?.store;
  // With etcd beside it, the folder's records say what this replica knew of etcd's when taken.
  const localStore: SourceRecordStore | undefined =
    local.store === undefined || sharedStore === undefined
      ? local.store
      : new OriginStampingStore(local.store, (source) => sharedStore.originOf(source));
  const stores = [localStore, sharedStore].filter((s) => s !== undefined);
  return {
    ...(stores.length === 0 ? {} : { store: stores.length === 1 ? stores[0] : new TeeRecordStore(stores) }),
    ...(local.store === undefined ? {} : { local: local.store }),
    ...(shared === undefined ? {} : { shared: shared.store }),
    restored: newest(local.restored, shared?.restored),
    problems: [...local.problems, ...(shared?.problems ?? [])],
    close: async () => {
      await Promise.all([local.store?.close(), shared?.store.close()]);
    },
  };
}

/** Per source, the record taken last: the local folder's (`a`) or etcd's (`b`). */
function newest(
  a: ReadonlyMap<string, SourceRecord>,
  b: ReadonlyMap<string, SourceRecord> | undefined,
): ReadonlyMap<string, SourceRecord> {
  if (b === undefined || b.size === 0) return a;
  const out = new Map(a);
  for (const [source, record] of b) {
    const mine = out.get(source);
    if (mine === undefined || takenLater(record, mine)) out.set(source, record);
  }
  return out;
}

/**
 * Whether etcd's record of a source (`theirs`) was taken after the local folder's (`mine`). Taken
 * by the same process, their clock is one. Else etcd's order decides, where the folder's record
 * says what it knew: etcd's is later when etcd holds it at a revision the folder's record did not
 * know of. Clocks decide only for records without that (of earlier releases, or taken while etcd
 * had not answered): a replica whose clock runs an hour ahead would otherwise have its own record
 * win over every record the fleet's writer took in that hour.
 */
export function takenLater(theirs: SourceRecord, mine: SourceRecord): boolean {
  const a = mine.origin;
  const b = theirs.origin;
  if (a !== undefined && b !== undefined && a.replica !== '' && a.replica === b.replica)
    return theirs.savedMs > mine.savedMs;
  if (a?.etcd !== undefined && b?.etcd !== undefined && a.etcd.cluster === b.etcd.cluster)
    return b.etcd.revision > a.etcd.revision;
  return theirs.savedMs > mine.savedMs;
}

/** Hands records on to a store with `origin` stamped on each as it is taken. */
class OriginStampingStore implements SourceRecordStore {
  constructor(
    private readonly store: SourceRecordStore,
    private readonly origin: (source: string) => RecordOrigin,
  ) {}

  changed(source: string, read: () => SourceRecord, upstream: boolean): Promise<void> | void {
    return this.store.changed(source, () => ({ ...read(), origin: this.origin(source) }), upstream);
  }

  removed(source: string): void {
    this.store.removed(source);
  }
}

async function openFolder(
  configured: string | undefined,
  env: NodeJS.ProcessEnv,
  log: Logger,
  hooks: RecordStoreHooks,
): Promise<{
  store?: FileRecordStore;
  restored: ReadonlyMap<string, SourceRecord>;
  problems: MeshmuxError[];
}> {
  const dir = configured ?? defaultStateDir(env);
  if (dir === 'none') {
    log.info('state persistence is off (state.dir: none)');
    return { restored: new Map(), problems: [] };
  }
  const candidates = configured === undefined ? [dir, fallbackStateDir()] : [dir];
  const problems: MeshmuxError[] = [];
  for (const candidate of candidates) {
    try {
      const { store, loaded } = await FileRecordStore.open({ dir: candidate, log, hooks });
      log.info({ dir: candidate, sources: [...loaded.records.keys()] }, 'state folder opened');
      return { store, restored: loaded.records, problems: [...problems, ...loaded.problems] };
    } catch (err) {
      const error = err as MeshmuxError;
      problems.push(error);
      log.error({ dir: candidate, err: error.message }, 'cannot use the state folder');
    }
  }
  log.error('running without a state folder: a restart during an upstream outage starts empty');
  return { restored: new Map(), problems };
}

async function openEtcd(
  settings: EtcdStateSettings,
  log: Logger,
  hooks: SharedStateHooks,
): Promise<
  | { store: EtcdRecordStore; restored: ReadonlyMap<string, SourceRecord>; problems: MeshmuxError[] }
  | undefined
> {
  let connection: EtcdConnection;
  try {
    connection = {
      endpoints: settings.endpoints,
      prefix: settings.prefix,
      leaseTtlS: Math.max(1, Math.round(settings.leaseTtl / 1000)),
      compactionMs: settings.compaction,
      ...(settings.tls === undefined ? {} : { tls: await readTls(settings.tls) }),
      ...(settings.username === undefined ? {} : { username: settings.username }),
      ...(settings.passwordFile === undefined
        ? {}
        : { password: (await readFile(settings.passwordFile, 'utf8')).trim() }),
    };
  } catch (err) {
    const error = toMeshmuxError(err, 'STATE', { file: 'state.etcd' });
    log.error({ err: error.describe() }, 'cannot read the etcd credentials: running without shared state');
    return undefined;
  }
  // Loaded here, not at start: the etcd client (and its gRPC stubs) is only for replicas.
  const { EtcdRecordStore } = await import('./etcd-record-store.js');
  const { store, loaded } = await EtcdRecordStore.open({
    etcd: connection,
    identity: `${hostname()}-${process.pid}`,
    log,
    hooks,
    onStoreUp: (up) => hooks.onStoreUp?.(up),
    onWriter: (writer) => hooks.onWriter?.(writer),
    onRecord: (record) => hooks.onRecord?.(record),
  });
  log.info(
    { endpoints: settings.endpoints, sources: [...loaded.records.keys()] },
    'shared state read from etcd',
  );
  return { store, restored: loaded.records, problems: [...loaded.problems] };
}

async function readTls(
  tls: NonNullable<EtcdStateSettings['tls']>,
): Promise<NonNullable<EtcdConnection['tls']>> {
  const read = async (file: string | undefined): Promise<Buffer | undefined> =>
    file === undefined ? undefined : readFile(file);
  const [ca, cert, key] = await Promise.all([read(tls.ca), read(tls.cert), read(tls.key)]);
  return {
    ...(ca === undefined ? {} : { ca }),
    ...(cert === undefined ? {} : { cert }),
    ...(key === undefined ? {} : { key }),
  };
}
