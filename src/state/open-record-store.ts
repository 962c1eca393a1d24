import type { MeshmuxError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { SourceRecord } from '../merge/source-record.js';
import { defaultStateDir, fallbackStateDir, FileRecordStore } from './file-record-store.js';
import type { RecordStoreHooks } from './record-write-queue.js';

/** The store a process runs with, and what it restored; no store when persistence is off or impossible. */
export interface OpenedState {
  readonly store?: FileRecordStore;
  readonly restored: ReadonlyMap<string, SourceRecord>;
  /** Files ignored at start, and why the folder could not be used; for the debug page. */
  readonly problems: readonly MeshmuxError[];
}

/**
 * Opens the state folder named by the configuration (`none` turns persistence off) or the default
 * one. A default folder that cannot be created falls back to one under the system's temporary
 * folder (a read-only container root); a folder that cannot be used at all is reported and meshmux
 * runs without persistence. Never throws.
 */
export async function openRecordStore(
  configured: string | undefined,
  env: NodeJS.ProcessEnv,
  log: Logger,
  hooks: RecordStoreHooks,
): Promise<OpenedState> {
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
  log.error('running without persisted state: a restart during an upstream outage starts empty');
  return { restored: new Map(), problems };
}
