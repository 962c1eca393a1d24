/**
 * A fixed throwaway PKI for upstream tests: a CA, a server certificate for `localhost` and
 * 127.0.0.1, and client certificates carrying istiod-style SPIFFE identities. Built on the
 * general CA helper in test-certificates.ts.
 */
import { createTestPki } from './test-certificates.js';

/** PEM file paths. */
export interface TestPki {
  readonly ca: string;
  readonly serverCert: string;
  readonly serverKey: string;
  /** `spiffe://cluster.local/ns/istio-system/sa/meshmux`. */
  readonly rootClientCert: string;
  readonly rootClientKey: string;
  /** `spiffe://cluster.local/ns/default/sa/meshmux`. */
  readonly otherClientCert: string;
  readonly otherClientKey: string;
}

/** Creates the PKI in `dir` (which must exist). */
export async function makeTestPki(dir: string): Promise<TestPki> {
  const ca = await createTestPki(dir, 'meshmux upstream test CA');
  const server = await ca.issue('server', 'DNS:localhost,IP:127.0.0.1');
  const root = await ca.issue('client-root', 'URI:spiffe://cluster.local/ns/istio-system/sa/meshmux');
  const other = await ca.issue('client-other', 'URI:spiffe://cluster.local/ns/default/sa/meshmux');
  return {
    ca: ca.caCert,
    serverCert: server.cert,
    serverKey: server.key,
    rootClientCert: root.cert,
    rootClientKey: root.key,
    otherClientCert: other.cert,
    otherClientKey: other.key,
  };
}
