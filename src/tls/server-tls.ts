import { experimental, type ServerCredentials } from '@grpc/grpc-js';
import { MeshmuxError, toMeshmuxError } from '../core/errors.js';
import { checkTlsIdentity, readPemFile } from '../core/pem-files.js';

/** The PEM files of a listener's TLS identity and of the CA its clients' certificates are checked against. */
export interface ServerTlsFiles {
  readonly cert: string;
  readonly key: string;
  /**
   * When set, clients are asked for a certificate verified against this CA; presenting none is
   * still allowed unless `requireClientCert`.
   */
  readonly clientCa?: string | undefined;
  /** With `clientCa`: a client that presents no certificate verified against it is refused in the handshake. */
  readonly requireClientCert?: boolean | undefined;
  readonly refreshIntervalMs: number;
  /** The configuration field that names these files (`server.tls`, a source's `tls`), for errors. */
  readonly field: string;
}

/** The PEM bytes of the files. */
interface TlsPem {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer | null;
}

/**
 * Reads the files and checks they make a TLS identity: their bytes, or what keeps them from it as
 * CONFIG errors: each file that cannot be read, naming it and its field (`server.tls.key`); when
 * all can be read, a key that does not match the certificate or a file that is not PEM.
 */
async function readServerTls(files: ServerTlsFiles): Promise<TlsPem | MeshmuxError[]> {
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
  if (cert.value === null || key.value === null) throw new MeshmuxError('INTERNAL', 'TLS files read as none');
  return { cert: cert.value, key: key.value, ca: ca.value };
}

/**
 * What keeps these files from making the server's TLS identity now (see `readServerTls`); empty
 * when usable. A start refuses them, so `meshmux check-config` and a reload report them before
 * one is tried.
 */
export async function serverTlsProblems(files: ServerTlsFiles): Promise<MeshmuxError[]> {
  const read = await readServerTls(files);
  return Array.isArray(read) ? read : [];
}

/**
 * What a {@link reloadingServerCredentials} says of its files: that a listener uses them, each read
 * after the first, and that it stopped reading them. Called synchronously; must not throw.
 */
export interface ServerTlsReads {
  /** The first read made a usable identity: credentials are made of it and the files are read from now on. */
  readonly listening?: () => void;
  /** The credentials' `signal` aborted after `listening`: the files are no longer read. Said once. */
  readonly closed?: () => void;
  /** The files read make a usable identity again after `problem`s: it is used from now on. */
  readonly recovered?: () => void;
  /**
   * The files read do not make a usable identity (a certificate replaced before its key, a file
   * cut short or gone): the last usable one stays in use. Said once per problem, not per read.
   */
  readonly failed?: (problem: MeshmuxError) => void;
}

/**
 * A certificate provider that reads `files` every `refreshIntervalMs` while a server listens, and
 * hands a read on only when it makes a usable identity: a read that does not keeps the last one
 * in use (grpc-js's own provider hands any read on, and drops every new connection on one that
 * does not load).
 */
class CheckedTlsFiles implements experimental.CertificateProvider {
  private readonly identityListeners = new Set<experimental.IdentityCertificateUpdateListener>();
  private readonly caListeners = new Set<experimental.CaCertificateUpdateListener>();
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  /** Set by {@link stop}: no more reads, and no read in flight is handed on. */
  private stopped = false;
  /** The problem of the last read, while reads fail; said once each. */
  private problem: string | undefined;

  constructor(
    private readonly files: ServerTlsFiles,
    private current: TlsPem,
    private readonly reads: ServerTlsReads,
  ) {}

  private async refresh(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    try {
      const read = await readServerTls(this.files);
      if (this.stopped) return;
      if (Array.isArray(read)) {
        const problem = read[0] ?? new MeshmuxError('INTERNAL', 'TLS files unusable, for no reason given');
        const said = problem.describe();
        if (said !== this.problem) this.reads.failed?.(problem);
        this.problem = said;
        return;
      }
      if (this.problem !== undefined) {
        this.problem = undefined;
        this.reads.recovered?.();
      }
      const before = this.current;
      if (before.cert.equals(read.cert) && before.key.equals(read.key) && sameBytes(before.ca, read.ca))
        return;
      this.current = read;
      for (const listener of this.identityListeners) listener(identityOf(read));
      for (const listener of this.caListeners) listener(caOf(read));
    } finally {
      this.reading = false;
    }
  }

  /** Stops reading the files for good; the listeners keep the identity they were last handed. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private watch(): void {
    if (this.timer !== undefined || this.stopped) return;
    this.timer = setInterval(() => void this.refresh(), this.files.refreshIntervalMs);
    this.timer.unref();
  }

  private unwatch(): void {
    if (this.identityListeners.size > 0 || this.caListeners.size > 0) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  addCaCertificateListener(listener: experimental.CaCertificateUpdateListener): void {
    this.caListeners.add(listener);
    this.watch();
    process.nextTick(() => {
      if (this.caListeners.has(listener)) listener(caOf(this.current));
    });
  }

  removeCaCertificateListener(listener: experimental.CaCertificateUpdateListener): void {
    this.caListeners.delete(listener);
    this.unwatch();
  }

  addIdentityCertificateListener(listener: experimental.IdentityCertificateUpdateListener): void {
    this.identityListeners.add(listener);
    this.watch();
    process.nextTick(() => {
      if (this.identityListeners.has(listener)) listener(identityOf(this.current));
    });
  }

  removeIdentityCertificateListener(listener: experimental.IdentityCertificateUpdateListener): void {
    this.identityListeners.delete(listener);
    this.unwatch();
  }
}

/**
 * TLS credentials whose files are re-read every `refreshIntervalMs`: a rotated certificate is used
 * for new handshakes while established streams keep running. A read that does not make a usable
 * identity (see `reads`) leaves the last usable one in use, so new istiods still connect while
 * the files are being replaced or are broken. Client certificates are requested only when a
 * client CA is configured, and required at the TLS layer only with `files.requireClientCert` (a
 * listening source's `tls.ca`): stock istiod never presents one, and policies decide what an
 * istiod without one receives. Rejects when the files cannot make one at first. The files are
 * read until `signal` aborts (for good without one): a listener that stops aborts it, since
 * grpc-js keeps using a provider whose server failed to bind.
 */
export async function reloadingServerCredentials(
  files: ServerTlsFiles,
  reads: ServerTlsReads = {},
  signal?: AbortSignal,
): Promise<ServerCredentials> {
  const first = await readServerTls(files);
  if (Array.isArray(first))
    throw first[0] ?? new MeshmuxError('INTERNAL', 'TLS files unusable, for no reason given');
  signal?.throwIfAborted();
  const provider = new CheckedTlsFiles(files, first, reads);
  reads.listening?.();
  signal?.addEventListener(
    'abort',
    () => {
      provider.stop();
      reads.closed?.();
    },
    { once: true },
  );
  // grpc-js takes the identity provider first and the (optional) CA provider second.
  return experimental.createCertificateProviderServerCredentials(
    provider,
    files.clientCa === undefined ? null : provider,
    files.clientCa !== undefined && files.requireClientCert === true,
  );
}

function identityOf(pem: TlsPem): experimental.IdentityCertificateUpdate {
  return { certificate: pem.cert, privateKey: pem.key };
}

function caOf(pem: TlsPem): experimental.CaCertificateUpdate | null {
  return pem.ca === null ? null : { caCertificate: pem.ca };
}

function sameBytes(a: Buffer | null, b: Buffer | null): boolean {
  return a === null || b === null ? a === b : a.equals(b);
}
