/**
 * A throwaway PKI made with the real `openssl` CLI: a CA, a server certificate for `localhost` and
 * 127.0.0.1, and client certificates carrying istiod-style SPIFFE identities.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

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

async function leaf(dir: string, name: string, subject: string, san: string): Promise<void> {
  const key = path.join(dir, `${name}.key`);
  const csr = path.join(dir, `${name}.csr`);
  const ext = path.join(dir, `${name}.ext`);
  await writeFile(ext, `subjectAltName=${san}\n`);
  await run(
    'openssl',
    ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'].concat([
      '-keyout',
      key,
      '-out',
      csr,
      '-subj',
      subject,
    ]),
  );
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    path.join(dir, 'ca.crt'),
    '-CAkey',
    path.join(dir, 'ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    path.join(dir, `${name}.crt`),
    '-extfile',
    ext,
  ]);
}

/** Creates the PKI in `dir` (which must exist). */
export async function makeTestPki(dir: string): Promise<TestPki> {
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '2',
    '-keyout',
    path.join(dir, 'ca.key'),
    '-out',
    path.join(dir, 'ca.crt'),
    '-subj',
    '/CN=meshmux-test-ca',
  ]);
  await leaf(dir, 'server', '/CN=localhost', 'DNS:localhost,IP:127.0.0.1');
  await leaf(dir, 'root-client', '/CN=meshmux', 'URI:spiffe://cluster.local/ns/istio-system/sa/meshmux');
  await leaf(dir, 'other-client', '/CN=meshmux', 'URI:spiffe://cluster.local/ns/default/sa/meshmux');
  const p = (f: string): string => path.join(dir, f);
  return {
    ca: p('ca.crt'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    rootClientCert: p('root-client.crt'),
    rootClientKey: p('root-client.key'),
    otherClientCert: p('other-client.crt'),
    otherClientKey: p('other-client.key'),
  };
}
