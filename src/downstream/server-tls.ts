import { experimental, type ServerCredentials } from '@grpc/grpc-js';
import { MeshmuxError, toMeshmuxError } from '../core/errors.js';
import { checkTlsIdentity, readPemFile } from '../core/pem-files.js';

export interface ServerTlsFiles {
  readonly cert: string;
  readonly key: string;
  /** When set, clients are asked for a certificate verified against this CA; presenting none is still allowed. */
  readonly clientCa?: string | undefined;
  readonly refreshIntervalMs: number;
  /** The configuration field that names these files (`server.tls`), for errors. */
  readonly field: string;
}

/**
 * What keeps these files from making the server's TLS identity now, as CONFIG errors: each file
 * that cannot be read, naming it and its field (`server.tls.key`); when all can be
 * read, a key that does not match the certificate or a file that is not PEM. Empty when usable.
 * A start refuses them, so `meshmux check-config` and a reload report them before one is tried.
 */
export async function serverTlsProblems(files: ServerTlsFiles): Promise<MeshmuxError[]> {
  const read = async (file: string | undefined, what: string, name: string): Promise<Buffer | null> =>
    file === undefined ? null : readPemFile(file, what, `${files.field}.${name}`);
  const [cert, key, ca] = await Promise.allSettled([
    read(files.cert, 'server certificate', 'cert'),
    read(files.key, 'server private key', 'key'),
    read(files.clientCa, 'client CA bundle', 'clientCa'),
  ]);
  if (cert.status === 'rejected' || key.status === 'rejected' || ca.status === 'rejected') {
    return [cert, key, ca].flatMap((r) =>
      r.status === 'rejected' ? [toMeshmuxError(r.reason, 'CONFIG')] : [],
    );
  }
  try {
    checkTlsIdentity(
      { cert: cert.value, key: key.value, ca: ca.value },
      [files.cert, files.key, files.clientCa],
      files.field,
    );
  } catch (err) {
    return [toMeshmuxError(err, 'CONFIG')];
  }
  return [];
}

/**
 * TLS credentials whose files are re-read every `refreshIntervalMs`: a rotated certificate is used
 * for new handshakes while established streams keep running. Client certificates are requested
 * only when a client CA is configured and never required at the TLS layer (stock istiod never
 * presents one); policies decide what a client without one receives. Resolves once the files are
 * loaded, so the first handshake already has them.
 */
export async function reloadingServerCredentials(files: ServerTlsFiles): Promise<ServerCredentials> {
  const [problem] = await serverTlsProblems(files);
  if (problem !== undefined) throw problem;
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
