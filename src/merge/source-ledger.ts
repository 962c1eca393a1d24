import type { MeshmuxError } from '../core/errors.js';
import type { ConfigResource } from '../core/resource.js';
import type { SourceDescriptor, SourceEvent, SourceState } from '../core/source-event.js';
import type { SourceReport } from './config-snapshot.js';

/**
 * The last good state of one source. Applying a snapshot replaces the covered kinds; a status
 * event never removes objects, so a source that goes stale keeps serving what it had.
 */
export class SourceLedger {
  private state: SourceState = 'connecting';
  private everSynced = false;
  private revision = '';
  private lastSyncTime: Date | undefined;
  private lastError: MeshmuxError | undefined;
  private errors: readonly MeshmuxError[] = [];
  private warnings: readonly MeshmuxError[] = [];
  /** Per kind, the source's objects; arrays are replaced, never mutated, so identity means "unchanged". */
  private readonly byKind = new Map<string, readonly ConfigResource[]>();

  constructor(readonly descriptor: SourceDescriptor) {}

  /** Applies one event; returns the kinds whose objects changed. */
  apply(event: SourceEvent, now: Date): ReadonlySet<string> {
    if (event.type === 'status') {
      this.state = event.state;
      if (event.error !== undefined) this.lastError = event.error;
      return new Set();
    }
    const grouped = new Map<string, ConfigResource[]>();
    for (const r of event.resources) {
      let list = grouped.get(r.kind);
      if (list === undefined) grouped.set(r.kind, (list = []));
      list.push(r);
    }
    const covered = event.kinds ?? new Set([...this.byKind.keys(), ...grouped.keys()]);
    const changed = new Set<string>();
    for (const kind of covered) {
      const next = grouped.get(kind) ?? [];
      const prev = this.byKind.get(kind) ?? [];
      if (sameResources(prev, next)) continue;
      changed.add(kind);
      if (next.length === 0) this.byKind.delete(kind);
      else this.byKind.set(kind, next);
    }
    this.revision = event.revision;
    this.errors = event.errors;
    this.warnings = event.warnings;
    this.lastSyncTime = now;
    this.everSynced = true;
    this.state = 'synced';
    return changed;
  }

  /** This source's objects of one kind. Must not be altered. */
  resources(kind: string): readonly ConfigResource[] {
    return this.byKind.get(kind) ?? [];
  }

  kinds(): IterableIterator<string> {
    return this.byKind.keys();
  }

  get synced(): boolean {
    return this.everSynced;
  }

  report(): SourceReport {
    const counts: Record<string, number> = {};
    for (const [kind, list] of this.byKind) counts[kind] = list.length;
    return {
      name: this.descriptor.name,
      type: this.descriptor.type,
      state: this.state,
      everSynced: this.everSynced,
      revision: this.revision,
      ...(this.lastSyncTime === undefined ? {} : { lastSyncTime: this.lastSyncTime }),
      ...(this.lastError === undefined ? {} : { lastError: this.lastError }),
      counts,
      errors: this.errors,
      warnings: this.warnings,
    };
  }
}

function sameResources(a: readonly ConfigResource[], b: readonly ConfigResource[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined || y === undefined || x.version !== y.version) return false;
    if (x.createTime.seconds !== y.createTime.seconds || x.createTime.nanos !== y.createTime.nanos)
      return false;
  }
  return true;
}
