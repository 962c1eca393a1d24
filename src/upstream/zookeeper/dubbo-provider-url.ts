import { isIP } from 'node:net';
import { truncateForLog } from '../../core/truncate-for-log.js';

/** One provider as a Dubbo registration describes it. Immutable. */
export interface DubboProvider {
  /** The znode name exactly as registered (still percent-encoded): the provider's identity. */
  readonly node: string;
  /** URL scheme: `dubbo`, `tri`, `rest`, ... */
  readonly protocol: string;
  /** An IPv4 or IPv6 literal (without brackets). */
  readonly address: string;
  /** 1–65535. */
  readonly port: number;
  readonly interface: string;
  /** Empty when the provider has none. */
  readonly group: string;
  /** Empty when the provider has none. */
  readonly version: string;
  /** Empty when the provider has none. */
  readonly application: string;
  /** `weight` when it is a positive integer; Dubbo's load-balancing weight. */
  readonly weight?: number;
  /** Every query parameter, raw (Dubbo writes them unencoded inside the encoded URL). */
  readonly parameters: Readonly<Record<string, string>>;
}

/** A parsed provider, or why the registration cannot be used. Failures are values, never thrown. */
export type ProviderParse =
  { readonly ok: true; readonly provider: DubboProvider } | { readonly ok: false; readonly reason: string };

const URL_SHAPE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?(?:#.*)?$/;
const MAX_UINT32 = 0xffff_ffff;

function fail(reason: string): ProviderParse {
  return { ok: false, reason };
}

/**
 * Decodes a znode name the way Dubbo encodes it (Java's URLEncoder: percent-encoding, `+` for a
 * space), or undefined when it is not validly encoded.
 */
export function decodeNodeName(node: string): string | undefined {
  try {
    return decodeURIComponent(node.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/** Query parameters; a key given twice keeps its last value, as Dubbo's own parser does. */
function parseQuery(query: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const key = (eq < 0 ? pair : pair.slice(0, eq)).trim();
    if (key === '') continue;
    out[key] = eq < 0 ? '' : pair.slice(eq + 1);
  }
  return out;
}

/** Dubbo 2.x URLs may carry `default.<key>` instead of `<key>` (provider-level defaults). */
function parameter(params: Readonly<Record<string, string>>, key: string): string {
  const direct = params[key]?.trim();
  if (direct !== undefined && direct !== '') return direct;
  return params[`default.${key}`]?.trim() ?? '';
}

/**
 * Parses one znode name under `<root>/<interface>/providers`: the provider URL percent-encoded once,
 * `<protocol>://<ip>:<port>/<path>?<query>`. `folderInterface` is the `<interface>` the node was
 * found under; a URL that names another interface is rejected, since Dubbo registers each
 * provider under its own interface and a mismatch means the registration is corrupt.
 */
export function parseProviderNode(node: string, folderInterface: string): ProviderParse {
  const text = decodeNodeName(node);
  if (text === undefined) return fail('the node name is not a validly percent-encoded URL');
  const m = URL_SHAPE.exec(text);
  if (m === null)
    return fail(`"${truncateForLog(text)}" is not a URL of the form protocol://ip:port/interface?parameters`);
  const protocol = (m[1] ?? '').toLowerCase();
  // user:password@ may precede the host; only the host and port matter here.
  const authority = (m[2] ?? '').slice((m[2] ?? '').lastIndexOf('@') + 1);
  const hostPort = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(authority);
  if (hostPort === null) return fail(`"${truncateForLog(authority)}" is not ip:port`);
  const address = hostPort[1] ?? hostPort[2] ?? '';
  const family = isIP(address);
  if (family === 0) {
    return fail(
      `host "${truncateForLog(address)}" is not an IP address; a STATIC ServiceEntry needs IP endpoints`,
    );
  }
  if (address === '0.0.0.0' || (family === 6 && /^[0:]+$/.test(address))) {
    return fail(`host ${address} is the unspecified address`);
  }
  const port = Number(hostPort[3]);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    return fail(`port ${hostPort[3]} is not in 1..65535`);
  const params = parseQuery(m[4] ?? '');
  const path = (m[3] ?? '').replace(/^\/+/, '');
  const iface = parameter(params, 'interface') || path;
  if (iface === '') return fail('the URL names no interface (no path and no interface parameter)');
  if (iface !== folderInterface) {
    return fail(
      `the URL is for interface ${truncateForLog(iface)} but is registered under ${truncateForLog(folderInterface)}`,
    );
  }
  const side = params['side'];
  if (side !== undefined && side !== 'provider')
    return fail(`registered with side=${truncateForLog(side)}, not as a provider`);
  const weightText = parameter(params, 'weight');
  const weight = /^\d+$/.test(weightText) ? Number(weightText) : undefined;
  return {
    ok: true,
    provider: Object.freeze({
      node,
      protocol,
      address,
      port,
      interface: iface,
      group: parameter(params, 'group'),
      version: parameter(params, 'version'),
      application: parameter(params, 'application'),
      ...(weight !== undefined && weight >= 1 && weight <= MAX_UINT32 ? { weight } : {}),
      parameters: Object.freeze(params),
    }),
  };
}
