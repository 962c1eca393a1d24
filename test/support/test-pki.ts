/**
 * Certificates for TLS tests, made with openssl in a test's temporary folder: a general CA that
 * issues certificates with any SANs, and the fixed PKI the upstream tests share.
 */
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A throwaway certificate authority made with openssl: its PEM files and the certificates it signs. */
export interface TestCa {
  readonly dir: string;
  readonly caCert: string;
  /** Issues a certificate with the given SANs (`DNS:localhost,IP:127.0.0.1,URI:spiffe://...`). */
  issue(name: string, sans: string): Promise<{ cert: string; key: string }>;
  read(file: string): Promise<Buffer>;
}

/** Creates a CA with openssl in `dir` (which must exist). */
export async function createTestCa(dir: string, caName = 'meshmux test CA'): Promise<TestCa> {
  const caKey = path.join(dir, `${caName.replace(/\W+/g, '-')}.key`);
  const caCert = path.join(dir, `${caName.replace(/\W+/g, '-')}.pem`);
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    caKey,
    '-out',
    caCert,
    '-days',
    '2',
    '-subj',
    `/CN=${caName}`,
  ]);
  return {
    dir,
    caCert,
    read: (file) => readFile(file),
    async issue(name, sans) {
      const key = path.join(dir, `${name}.key`);
      const csr = path.join(dir, `${name}.csr`);
      const cert = path.join(dir, `${name}.pem`);
      const ext = path.join(dir, `${name}.ext`);
      await writeFile(ext, `subjectAltName=${sans}\nbasicConstraints=CA:FALSE\n`);
      await run('openssl', [
        'req',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        csr,
        '-subj',
        `/CN=${name}`,
      ]);
      await run('openssl', [
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        caCert,
        '-CAkey',
        caKey,
        '-CAcreateserial',
        '-out',
        cert,
        '-days',
        '2',
        '-extfile',
        ext,
      ]);
      return { cert, key };
    },
  };
}

/**
 * A fixed PKI for upstream tests: a CA, a server certificate for `localhost` and 127.0.0.1, and client
 * certificates carrying istiod-style SPIFFE identities. PEM file paths.
 */
export interface UpstreamPki {
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
export async function makeUpstreamPki(dir: string): Promise<UpstreamPki> {
  const ca = await createTestCa(dir, 'meshmux upstream test CA');
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

/**
 * Whether a TLS server at `address` (`host:port`) completes a handshake now, trusting the CA in
 * the file `caFile`, as `localhost`: how a test waits for a server whose certificates load in the
 * background.
 */
export async function tlsHandshakes(address: string, caFile: string): Promise<boolean> {
  const ca = await readFile(caFile);
  const at = address.lastIndexOf(':');
  return new Promise((resolve) => {
    const socket = tlsConnect({
      host: address.slice(0, at),
      port: Number(address.slice(at + 1)),
      ca,
      servername: 'localhost',
      ALPNProtocols: ['h2'],
    });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2_000, () => done(false));
    socket.once('secureConnect', () => done(true));
    socket.once('error', () => done(false));
  });
}
