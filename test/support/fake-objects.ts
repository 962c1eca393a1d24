/**
 * Istio objects as a fake upstream serves them ({@link FakeObject}), one builder per kind, so
 * that tests of different sources speak of the same `shop/reviews`. Each call returns a new
 * object that the caller may alter.
 */
import type { FakeObject } from './fake-upstreams.js';

/** A VirtualService `namespace/name` routing `host` (default: its name) to that host. */
export function fakeVirtualService(name: string, host = name, namespace = 'shop'): FakeObject {
  return { namespace, name, spec: { hosts: [host], http: [{ route: [{ destination: { host } }] }] } };
}

/** A DestinationRule `namespace/name` for `host` (default: its name) with Istio mutual TLS. */
export function fakeDestinationRule(name: string, host = name, namespace = 'shop'): FakeObject {
  return { namespace, name, spec: { host, traffic_policy: { tls: { mode: 'ISTIO_MUTUAL' } } } };
}
