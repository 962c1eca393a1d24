import { isIP } from 'node:net';

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '::1']);

/**
 * Whether a host (a name or an address, with or without IPv6 brackets, without port) is a loopback
 * one: `localhost` and its subdomains, `127.0.0.0/8`, `::1`. An empty host (every address) is not.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (LOOPBACK_NAMES.has(h) || h.endsWith('.localhost')) return true;
  return isIP(h) === 4 && h.startsWith('127.');
}

/** The host part of `host:port` or `[v6]:port` (brackets removed; empty for `:port`). */
export function hostOfAddress(address: string): string {
  const colon = address.lastIndexOf(':');
  return (colon < 0 ? address : address.slice(0, colon)).replace(/^\[|\]$/g, '');
}
