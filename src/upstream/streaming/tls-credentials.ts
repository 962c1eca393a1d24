import * as grpc from '@grpc/grpc-js';
import type { ConnectionOptions } from 'node:tls';
import { MeshmuxError } from '../../core/errors.js';
import { checkTlsIdentity, readPemFile } from '../../core/pem-files.js';
import { reloadingServerCredentials, type ServerTlsReads } from '../../tls/server-tls.js';

/**
 * PEM files of a TLS identity and trust, as configured (`tls:` of a source). Absent settings
 * mean plaintext h2c, which is what istiod's own config-source client speaks before 1.26.
 */
export interface TlsSettings {
  /** CA bundle to verify the peer; absent means the system roots (client) or no client certificates (server). */
  readonly ca?: string | undefined;
  /** Own certificate chain: the client certificate upstream (mTLS), the server certificate in a sink. */
  readonly cert?: string | undefined;
  /** Private key of `cert`. */
  readonly key?: string | undefined;
  /** Name to verify in the peer's certificate and send as SNI, when it differs from the host dialed. */
  readonly serverName?: string | undefined;
  /** Accept any server certificate: for tests only. */
  readonly insecureSkipVerify?: boolean | undefined;
}

/** TLS settings of a listening source (`tls:` of an `mcp-sink`): its files are re-read while it listens. */
export interface ListenerTlsSettings extends TlsSettings {
  /** How often the files are read for a rotation, ms. Default {@link DEFAULT_TLS_REFRESH_MS}. */
  readonly refreshInterval?: number | undefined;
}

/** How often a listening source reads its TLS files by default: `server.tls`'s default too. */
export const DEFAULT_TLS_REFRESH_MS = 10_000;

/** How a client connects: TLS options (none for plaintext) and the name it addresses. */
export interface ClientTls {
  /** Options of the TLS connection; undefined for plaintext h2c. */
  readonly connect: ConnectionOptions | undefined;
  /** `:authority` (and the name verified) when it is not the address dialed. */
  readonly authority: string | undefined;
  /** `plaintext`, `tls` or `mtls`, for logs and errors. */
  readonly mode: 'plaintext' | 'tls' | 'mtls';
}

function pairCheck(tls: TlsSettings, where: string): void {
  if ((tls.cert === undefined) !== (tls.key === undefined)) {
    throw new MeshmuxError('CONFIG', `tls.cert and tls.key go together (${where})`, { field: 'tls' });
  }
}

/**
 * Reads the PEM files anew on every call, so a rotated certificate is picked up at the next
 * reconnect. Plaintext without settings; TLS with system roots or `ca`; mTLS when `cert` and
 * `key` are set (istiod's api generator wants a client identity in its root namespace).
 */
export async function clientTls(tls: TlsSettings | undefined): Promise<ClientTls> {
  if (tls === undefined) {
    return { connect: undefined, authority: undefined, mode: 'plaintext' };
  }
  pairCheck(tls, 'client');
  const ca = tls.ca === undefined ? null : await readPemFile(tls.ca, 'CA bundle');
  const cert = tls.cert === undefined ? null : await readPemFile(tls.cert, 'client certificate');
  const key = tls.key === undefined ? null : await readPemFile(tls.key, 'client key');
  checkTlsIdentity({ cert, key, ca }, [tls.cert, tls.key, tls.ca]);
  const skip = tls.insecureSkipVerify === true;
  const connect: ConnectionOptions = {
    // Absent: Node's bundled roots.
    ...(ca === null ? {} : { ca }),
    ...(cert === null || key === null ? {} : { cert, key }),
    ...(tls.serverName === undefined ? {} : { servername: tls.serverName }),
    rejectUnauthorized: !skip,
    ...(skip ? { checkServerIdentity: () => undefined } : {}),
  };
  return { connect, authority: tls.serverName, mode: cert === null ? 'tls' : 'mtls' };
}

/**
 * Server credentials of a listening source (the MCP sink): plaintext without settings, TLS with
 * `cert` and `key`, and client certificates required and verified against `ca` when it is set.
 * The files are re-read every `refreshInterval` until `signal` aborts, as the ADS listener's: a
 * rotated certificate or CA is used for new connections without a restart, and a read that does
 * not make a usable identity (a certificate written before its key) keeps the last usable one,
 * said through `reads`. Rejects when the files cannot make one now.
 */
export async function serverTls(
  tls: ListenerTlsSettings | undefined,
  reads: ServerTlsReads | undefined,
  signal: AbortSignal,
): Promise<grpc.ServerCredentials> {
  if (tls === undefined) return grpc.ServerCredentials.createInsecure();
  pairCheck(tls, 'server');
  if (tls.cert === undefined || tls.key === undefined) {
    throw new MeshmuxError('CONFIG', 'a listening source needs tls.cert and tls.key to serve TLS', {
      field: 'tls',
    });
  }
  return reloadingServerCredentials(
    {
      cert: tls.cert,
      key: tls.key,
      clientCa: tls.ca,
      requireClientCert: true,
      refreshIntervalMs: tls.refreshInterval ?? DEFAULT_TLS_REFRESH_MS,
      field: 'tls',
    },
    reads,
    signal,
  );
}
