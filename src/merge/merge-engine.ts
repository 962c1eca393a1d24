import { createHash } from 'node:crypto';
import { BehaviorSubject, catchError, type Observable, of, Subscription } from 'rxjs';
import { toMeshmuxError } from '../core/errors.js';
import type { ConfigResource } from '../core/resource.js';
import type { SourceDescriptor, SourceEvent } from '../core/source-event.js';
import type { ConfigSnapshot, KindSnapshot, SnapshotReader } from './config-snapshot.js';
import { SourceLedger } from './source-ledger.js';

/** A source as the merge sees it: a name and a stream of events. */
export interface MergeInput {
  readonly descriptor: SourceDescriptor;
  readonly events$: Observable<SourceEvent>;
}

export interface MergeOptions {
  /** How long to wait for every source's first state before serving anyway. Default 30 s. */
  readonly syncTimeoutMs?: number;
  /** Clock, for tests. */
  readonly now?: () => Date;
}

/** Lifecycle hooks; called synchronously, must not throw. */
export interface MergeHooks {
  onSnapshot?(snapshot: ConfigSnapshot, changedKinds: ReadonlySet<string>, buildMs: number): void;
  onSourceEvent?(source: string, event: SourceEvent): void;
}

/**
 * Merges sources into immutable, versioned snapshots. Each source is isolated (an error of its
 * stream becomes a `failing` status), its last good state is kept, and events that arrive
 * together are folded into one snapshot built on the next turn of the event loop, so a burst
 * costs one build while an isolated change waits for no timer.
 */
export class MergeEngine implements SnapshotReader {
  private readonly ledgers: SourceLedger[];
  private readonly subject: BehaviorSubject<ConfigSnapshot>;
  private readonly subscription = new Subscription();
  private readonly kinds = new Map<string, KindSnapshot>();
  private readonly dirty = new Set<string>();
  private generation = 0;
  private kindGeneration = 0;
  private scheduled: NodeJS.Immediate | undefined;
  private timedOut = false;
  private readonly now: () => Date;

  constructor(
    private readonly inputs: readonly MergeInput[],
    private readonly options: MergeOptions = {},
    private readonly hooks: MergeHooks = {},
  ) {
    this.now = options.now ?? (() => new Date());
    this.ledgers = inputs.map((i) => new SourceLedger(i.descriptor));
    this.subject = new BehaviorSubject(this.build(new Set()));
  }

  get snapshots$(): Observable<ConfigSnapshot> {
    return this.subject.asObservable();
  }

  current(): ConfigSnapshot {
    return this.subject.getValue();
  }

  /** Subscribes to every source. Idempotent only in the sense that it must be called once. */
  start(): void {
    this.inputs.forEach((input, index) => {
      const ledger = this.ledgers[index];
      if (ledger === undefined) return;
      const isolated$ = input.events$.pipe(
        catchError((err: unknown) =>
          of<SourceEvent>({
            type: 'status',
            state: ledger.synced ? 'stale' : 'failing',
            error: toMeshmuxError(err, 'UNAVAILABLE', { file: input.descriptor.name }),
          }),
        ),
      );
      this.subscription.add(
        isolated$.subscribe((event) => {
          this.hooks.onSourceEvent?.(input.descriptor.name, event);
          for (const kind of ledger.apply(event, this.now())) this.dirty.add(kind);
          this.schedule();
        }),
      );
    });
    const timeout = this.options.syncTimeoutMs ?? 30_000;
    const timer = setTimeout(() => {
      this.timedOut = true;
      this.schedule();
    }, timeout);
    this.subscription.add(() => clearTimeout(timer));
    this.schedule();
  }

  /** Unsubscribes from every source; the last snapshot stays readable. */
  stop(): void {
    this.subscription.unsubscribe();
    if (this.scheduled !== undefined) clearImmediate(this.scheduled);
    this.scheduled = undefined;
  }

  private schedule(): void {
    if (this.scheduled !== undefined) return;
    this.scheduled = setImmediate(() => {
      this.scheduled = undefined;
      const started = performance.now();
      const changed = new Set(this.dirty);
      this.dirty.clear();
      const snapshot = this.build(changed);
      const previous = this.subject.getValue();
      if (
        snapshot.version === previous.version &&
        snapshot.ready === previous.ready &&
        sameReports(snapshot, previous)
      ) {
        return;
      }
      this.hooks.onSnapshot?.(snapshot, changed, performance.now() - started);
      this.subject.next(snapshot);
    });
  }

  private build(changed: ReadonlySet<string>): ConfigSnapshot {
    for (const kind of changed) this.rebuildKind(kind);
    const waitingFor = this.ledgers.filter((l) => !l.synced).map((l) => l.descriptor.name);
    const kindVersions = [...this.kinds.values()]
      .sort((a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0))
      .map((k) => `${k.kind}=${k.version}`);
    return Object.freeze({
      generation: ++this.generation,
      version: hashParts(kindVersions),
      kinds: new Map(this.kinds),
      ready: waitingFor.length === 0 || this.timedOut,
      waitingFor,
      sources: this.ledgers.map((l) => l.report()),
    });
  }

  /** Precedence for now: the first source in configuration order holding a key wins. */
  private rebuildKind(kind: string): void {
    const merged = new Map<string, ConfigResource>();
    for (const ledger of this.ledgers) {
      for (const r of ledger.resources(kind)) {
        const key = `${r.namespace}/${r.name}`;
        if (!merged.has(key)) merged.set(key, r);
      }
    }
    if (merged.size === 0) {
      if (this.kinds.delete(kind)) this.kindGeneration++;
      return;
    }
    const resources = [...merged.values()].sort(compareResources);
    const version = hashParts(
      resources.map(
        (r) => `${r.namespace}/${r.name}@${r.version}@${r.createTime.seconds}.${r.createTime.nanos}`,
      ),
    );
    const previous = this.kinds.get(kind);
    if (previous?.version === version) return;
    this.kinds.set(
      kind,
      Object.freeze({
        kind,
        version,
        generation: ++this.kindGeneration,
        resources: Object.freeze(resources),
      }),
    );
  }
}

function compareResources(a: ConfigResource, b: ConfigResource): number {
  if (a.namespace !== b.namespace) return a.namespace < b.namespace ? -1 : 1;
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  return 0;
}

function hashParts(parts: readonly string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(`${p}\n`);
  return h.digest('base64url').slice(0, 16);
}

function sameReports(a: ConfigSnapshot, b: ConfigSnapshot): boolean {
  if (a.sources.length !== b.sources.length) return false;
  return a.sources.every((s, i) => {
    const o = b.sources[i];
    return (
      o !== undefined &&
      o.state === s.state &&
      o.revision === s.revision &&
      o.errors === s.errors &&
      o.lastError === s.lastError
    );
  });
}
