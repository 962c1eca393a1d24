import { experimental, type ServerCredentials } from '@grpc/grpc-js';
import { MeshmuxError } from '../core/errors.js';
import { checkTlsIdentity, readPemFile } from '../core/pem-files.js';

export interface ServerTlsFiles {
  readonly cert: string;
  readonly key: string;
  /** When set, clients are asked for a certificate verified against this CA; presenting none is still allowed. */
  readonly clientCa?: string | undefined;
  readonly refreshIntervalMs: number;
}

/** Reads and checks the PEM files; a bad file is a CONFIG error naming it. */
async function checkFiles(files: ServerTlsFiles): Promise<void> {
  const cert = await readPemFile(files.cert, 'server certificate');
  const key = await readPemFile(files.key, 'server private key');
  const ca = files.clientCa === undefined ? null : await readPemFile(files.clientCa, 'client CA bundle');
  checkTlsIdentity({ cert, key, ca }, [files.cert, files.key, files.clientCa]);
}

/**
 * TLS credentials whose files are re-read every `refreshIntervalMs`: a rotated certificate is used
 * for new handshakes while established streams keep running. Client certificates are requested
 * only when a client CA is configured and never required at the TLS layer (stock istiod never
 * presents one); policies decide what a client without one receives. Resolves once the files are
 * loaded, so the first handshake already has them.
 */
export async function reloadingServerCredentials(files: ServerTlsFiles): Promise<ServerCredentials> {
  await checkFiles(files);
  const provider = new experimental.FileWatcherCertificateProvider({
    certificateFile: files.cert,
    privateKeyFile: files.key,
    caCertificateFile: files.clientCa,
    refreshIntervalMs: files.refreshIntervalMs,
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      provider.removeIdentityCertificateListener(listener);
      reject(new MeshmuxError('CONFIG', 'TLS files did not load within 10 s', { file: files.cert }));
    }, 10_000);
    const listener = (update: experimental.IdentityCertificateUpdate | null): void => {
      if (update === null) return;
      clearTimeout(timer);
      provider.removeIdentityCertificateListener(listener);
      resolve();
    };
    provider.addIdentityCertificateListener(listener);
  });
  // grpc-js takes the identity provider first and the (optional) CA provider second.
  return experimental.createCertificateProviderServerCredentials(
    provider,
    files.clientCa === undefined ? null : provider,
    false,
  );
}
