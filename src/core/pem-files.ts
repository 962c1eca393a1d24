import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import { MeshmuxError } from './errors.js';

/**
 * Reads one PEM file; a missing or unreadable file is a CONFIG error naming it, what it was for
 * and, when given, the configuration field that names it.
 */
export async function readPemFile(file: string, what: string, field?: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new MeshmuxError(
      'CONFIG',
      `cannot read the ${what}: ${(err as Error).message}`,
      { file, ...(field === undefined ? {} : { field }) },
      { cause: err },
    );
  }
}

/**
 * Checks that PEM contents make a usable TLS identity (the key matches the certificate, both
 * parse) before any handshake depends on them; the error names the files.
 */
export function checkTlsIdentity(
  pem: { cert?: Buffer | null; key?: Buffer | null; ca?: Buffer | null },
  files: readonly (string | undefined)[],
  field?: string,
): void {
  try {
    createSecureContext({
      ...(pem.cert == null ? {} : { cert: pem.cert }),
      ...(pem.key == null ? {} : { key: pem.key }),
      ...(pem.ca == null ? {} : { ca: pem.ca }),
    });
  } catch (err) {
    throw new MeshmuxError(
      'CONFIG',
      `TLS files rejected (${(err as Error).message}); check that the key matches the certificate and both are PEM`,
      { file: files.filter((f) => f !== undefined).join(', '), ...(field === undefined ? {} : { field }) },
      { cause: err },
    );
  }
}
