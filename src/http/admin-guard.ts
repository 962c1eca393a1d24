import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { isLoopbackHost } from '../core/loopback.js';

/** Why a request to the admin listener is refused: an HTTP status and a message. */
export interface Refusal {
  readonly status: number;
  readonly reason: RefusalReason;
  readonly error: string;
}

/** A closed list, so the refusal counter's labels stay bounded. */
export type RefusalReason = 'token' | 'host' | 'content-type' | 'origin' | 'identity-claim';

/** `server.admin` as the guard needs it. */
export interface AdminAccess {
  /** The listener's host: a loopback one allows requests without a token when no token file is set. */
  readonly host: string;
  /** File holding the bearer token, read again on each request so a rotated Secret applies at once. */
  readonly tokenFile?: string | undefined;
}

/** The host part of a `Host` or `Origin` authority (`name:port`, `[v6]:port`). */
function hostOf(authority: string): string {
  if (authority.startsWith('[')) return authority.slice(1, authority.indexOf(']'));
  const colon = authority.lastIndexOf(':');
  return colon < 0 ? authority : authority.slice(0, colon);
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/**
 * Who may use the admin listener (status page, `/debug/*`, confirmations, counters reset), in the
 * way Envoy's admin and istiod's debug endpoints are protected:
 * - with a token file, every request carries `Authorization: Bearer <token>` (compared in
 *   constant time); bound beyond loopback a token file is required (the configuration says so);
 * - on loopback, a `Host` that is not a loopback name is refused, so a web page cannot reach the
 *   listener through DNS rebinding;
 * - a POST carries `Content-Type: application/json` (a cross-site form or `text/plain` request
 *   cannot) and no `Origin` of another host;
 * - claiming a certificate identity in `/debug/preview` (`san=`) needs the token: without a token
 *   file it is refused, since anyone on the host could otherwise see what any identity receives.
 */
export class AdminGuard {
  private readonly loopback: boolean;

  constructor(private readonly access: AdminAccess) {
    this.loopback = isLoopbackHost(access.host);
  }

  /** The refusal for `req`, or undefined when it may proceed. Never throws. */
  async check(req: IncomingMessage, url: URL): Promise<Refusal | undefined> {
    const host = req.headers.host ?? '';
    if (this.loopback && !isLoopbackHost(hostOf(host))) {
      return { status: 403, reason: 'host', error: `Host ${JSON.stringify(host)} is not a loopback name` };
    }
    const tokenFile = this.access.tokenFile;
    if (tokenFile !== undefined) {
      let token: string;
      try {
        token = (await readFile(tokenFile, 'utf8')).trim();
      } catch {
        return { status: 503, reason: 'token', error: 'the admin token file cannot be read' };
      }
      const presented = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim() ?? '';
      if (token === '' || !timingSafeEqual(digest(presented), digest(token))) {
        return {
          status: 401,
          reason: 'token',
          error: 'a valid admin token is required (Authorization: Bearer)',
        };
      }
    } else if (url.pathname === '/debug/preview' && url.searchParams.has('san')) {
      return {
        status: 403,
        reason: 'identity-claim',
        error: 'claiming a certificate identity needs the admin token: set server.admin.tokenFile',
      };
    }
    if (req.method === 'POST') {
      const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
      if (type !== 'application/json') {
        return {
          status: 415,
          reason: 'content-type',
          error: 'POST requests need Content-Type: application/json',
        };
      }
      const origin = req.headers.origin;
      if (origin !== undefined && origin !== 'null') {
        let originHost: string;
        try {
          originHost = new URL(origin).host;
        } catch {
          originHost = '';
        }
        if (originHost.toLowerCase() !== host.toLowerCase()) {
          return { status: 403, reason: 'origin', error: `cross-site request from ${origin} refused` };
        }
      } else if (origin === 'null') {
        return { status: 403, reason: 'origin', error: 'cross-site request from an opaque origin refused' };
      }
    }
    return undefined;
  }
}
