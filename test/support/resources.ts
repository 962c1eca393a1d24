import { makeResource, type ConfigResource } from '../../src/core/resource.js';

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
