import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** PEM files of a test CA and certificates it signed. */
export interface TestPki {
  readonly dir: string;
  readonly caCert: string;
  /** Issues a certificate with the given SANs (`DNS:localhost,IP:127.0.0.1,URI:spiffe://...`). */
  issue(name: string, sans: string): Promise<{ cert: string; key: string }>;
  read(file: string): Promise<Buffer>;
}

/** Creates a CA with openssl in `dir`. */
export async function createTestPki(dir: string, caName = 'meshmux test CA'): Promise<TestPki> {
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
