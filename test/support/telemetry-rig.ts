/**
 * A real merge engine wired to `Telemetry` exactly as the composition root wires it, with sources
 * the test feeds by hand and ADS hooks the test calls as a stream would. Not a test file itself.
 */
import { filter, firstValueFrom, map, merge, Subject, timeout } from 'rxjs';
import { MeshmuxError } from '../../src/core/errors.js';
import type { SourceEvent, SourceSnapshotEvent } from '../../src/core/source-event.js';
import type { ConfigSnapshot } from '../../src/merge/config-snapshot.js';
import { MergeEngine } from '../../src/merge/merge-engine.js';
import { KINDS } from '../../src/schema/kinds.js';
import { Telemetry, type TelemetryOptions } from '../../src/telemetry/telemetry.js';
import { fakeResource } from './resources.js';

export const VS = 'networking.istio.io/VirtualService';
export const VS_URL = 'networking.istio.io/v1/VirtualService';
export const DR = 'networking.istio.io/DestinationRule';
export const DR_URL = 'networking.istio.io/v1/DestinationRule';

export interface Rig {
  readonly telemetry: Telemetry;
  readonly engine: MergeEngine;
  readonly sources: ReadonlyMap<string, Subject<SourceEvent>>;
  /** Sends an event and resolves with the snapshot that follows it. */
  send(source: string, event: SourceEvent): Promise<ConfigSnapshot>;
  /** A client identity as the ADS server reports it. */
  client(streamId: number, nodeId?: string): { streamId: number; nodeId: string; peer: string };
  stop(): void;
}

/** Starts a merge of sources named `names` (type `test`), every hook forwarded to a new Telemetry. */
export function startRig(names: readonly string[], options: Partial<TelemetryOptions> = {}): Rig {
  const sources = new Map(names.map((n) => [n, new Subject<SourceEvent>()]));
  const unchanged = new Subject<void>();
  const telemetry = new Telemetry({
    kindOf: (u) => KINDS.resolveTypeUrl(u)?.kind.key,
    processMetrics: false,
    ...options,
  });
  const engine = new MergeEngine(
    names.map((name) => ({
      descriptor: { name, type: 'test', defaultNamespace: 'default' },
      events$: sources.get(name) ?? new Subject<SourceEvent>(),
    })),
    { syncTimeoutMs: 60_000 },
    {
      onSnapshot: (snapshot, changed, buildMs) => telemetry.onSnapshot(snapshot, changed, buildMs),
      onPublished: (snapshot) => telemetry.onPublished(snapshot),
      onSourceEvent: (source, event) => telemetry.onSourceEvent(source, event),
      onUnchanged: () => {
        telemetry.onUnchanged();
        unchanged.next();
      },
      onHeld: (source, reason) => telemetry.onHeld(source, reason),
    },
  );
  engine.start();
  return {
    telemetry,
    engine,
    sources,
    async send(source, event) {
      const before = engine.current().generation;
      const next = firstValueFrom(
        merge(
          engine.snapshots$.pipe(filter((s) => s.generation > before)),
          unchanged.pipe(
            map(() => {
              throw new Error(`the ${event.type} event of ${source} changed nothing`);
            }),
          ),
        ).pipe(
          timeout({
            first: 10_000,
            with: () => {
              throw new Error(
                `no snapshot and no "unchanged" within 10000 ms after the ${event.type} event of ${source}`,
              );
            },
          }),
        ),
      );
      sources.get(source)?.next(event);
      return next;
    },
    client: (
      streamId,
      nodeId = `sidecar~10.0.0.${streamId}~istiod-${streamId}.istio-system~istio-system.svc`,
    ) => ({
      streamId,
      nodeId,
      peer: `127.0.0.1:${40000 + streamId}`,
    }),
    stop: () => engine.stop(),
  };
}

/** A full state of VirtualServices (and DestinationRules) with these names. */
export function state(
  names: readonly string[],
  options: { revision?: string; dr?: readonly string[]; traceparent?: string; body?: string } = {},
): SourceSnapshotEvent {
  return {
    type: 'snapshot',
    resources: [
      ...names.map((n) => fakeResource(n, { body: `${n}:${options.body ?? ''}` })),
      ...(options.dr ?? []).map((n) => fakeResource(n, { kind: DR })),
    ],
    revision: options.revision ?? names.join(','),
    errors: [],
    warnings: [],
    ...(options.traceparent === undefined ? {} : { traceparent: options.traceparent }),
  };
}

/** A state with one invalid document. */
export function stateWithInvalidDocument(names: readonly string[]): SourceSnapshotEvent {
  return {
    ...state(names),
    revision: `${names.join(',')}+bad`,
    errors: [new MeshmuxError('SCHEMA', 'spec.http[0].timeout: not a duration', { file: 'bad.yaml' })],
  };
}
