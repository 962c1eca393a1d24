import { makeResource, type ConfigResource } from '../../src/core/resource.js';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';

/** A resource with an opaque body, for tests of layers that never look inside bodies. */
export function fakeResource(
  name: string,
  options: { kind?: string; namespace?: string; body?: string; labels?: Record<string, string> } = {},
): ConfigResource {
  return makeResource({
    kind: options.kind ?? 'networking.istio.io/VirtualService',
    namespace: options.namespace ?? 'default',
    name,
    labels: options.labels ?? {},
    annotations: {},
    createTime: { seconds: 1_700_000_000, nanos: 0 },
    body: new TextEncoder().encode(options.body ?? name),
    origin: {},
  });
}

/**
 * A VirtualService `shop/<name>` read from a file, whose creation time (`seconds`) meshmux stamped
 * when `stamped` (the file named none) or the upstream gave otherwise.
 */
export function stampedObject(name: string, seconds: number, stamped = true, body = name): ConfigResource {
  return makeResource({
    kind: 'networking.istio.io/VirtualService',
    namespace: 'shop',
    name,
    labels: {},
    annotations: {},
    createTime: { seconds, nanos: 0 },
    body: new TextEncoder().encode(body),
    origin: stamped ? { file: 'shop.yaml', createTimeStamped: true } : { file: 'upstream' },
  });
}

/**
 * A source's snapshot event without problems: of the listed kinds only (a partial state), or of
 * every kind when `kinds` is absent (a full state).
 */
export function snapshotEvent(
  resources: readonly ConfigResource[],
  kinds?: Iterable<string>,
  revision = 'r',
): SourceSnapshotEvent {
  return {
    type: 'snapshot',
    resources: [...resources],
    revision,
    errors: [],
    warnings: [],
    ...(kinds === undefined ? {} : { kinds: new Set(kinds) }),
  };
}
