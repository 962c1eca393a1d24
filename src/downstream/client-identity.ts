import { truncateForLog } from '../core/truncate-for-log.js';

/** Who is on the other end of one ADS stream. Node ids are not unique: streams are keyed by `streamId`. */
export interface ClientIdentity {
  /** Unique per stream for the life of the process. */
  readonly streamId: number;
  /** `ip:port` of the TCP peer, as gRPC reports it. */
  readonly peer: string;
  /** The peer's IP address alone. */
  readonly peerIp: string;
  /** From the first request's node; empty until it arrives. */
  readonly nodeId: string;
  /** Pod and namespace parsed from an istiod-style node id (`type~ip~pod.ns~ns.svc.cluster.local`). */
  readonly pod: string;
  readonly namespace: string;
  /** Node metadata (GENERATOR, ISTIO_REVISION, ISTIO_VERSION, ...). */
  readonly metadata: Readonly<Record<string, unknown>>;
  /** `ISTIO_REVISION` from the metadata; empty when absent. */
  readonly revision: string;
  /** Subject alternative names of a verified client certificate (`DNS:...`, `URI:...`, `IP Address:...`). */
  readonly sans: readonly string[];
}

/** Splits gRPC's peer string (`1.2.3.4:5`, `[::1]:5`, `ipv4:1.2.3.4:5`) into its IP. */
export function peerIpOf(peer: string): string {
  const bare = peer.replace(/^ipv[46]:/, '');
  const bracketed = /^\[([^\]]+)\]:\d+$/.exec(bare);
  const ip = bracketed?.[1] ?? bare.slice(0, Math.max(0, bare.lastIndexOf(':')));
  return ip.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1');
}

/** Pod and namespace from an istiod node id; empty strings when the id has another shape. */
export function parseNodeId(nodeId: string): { pod: string; namespace: string } {
  const parts = nodeId.split('~');
  if (parts.length !== 4) return { pod: '', namespace: '' };
  const workload = parts[2] ?? '';
  const namespace = (parts[3] ?? '').split('.')[0] ?? '';
  const suffix = `.${namespace}`;
  const pod = namespace !== '' && workload.endsWith(suffix) ? workload.slice(0, -suffix.length) : workload;
  return { pod, namespace };
}

/** `DNS:a, URI:spiffe://x` (Node's `subjectaltname`) as a list. */
export function parseSans(subjectAltName: string | undefined): string[] {
  if (subjectAltName === undefined || subjectAltName === '') return [];
  return subjectAltName.split(/,\s*/).filter((s) => s.length > 0);
}

/** The identity of a stream before its first request names a node. */
export function anonymousIdentity(streamId: number, peer: string, sans: readonly string[]): ClientIdentity {
  return {
    streamId,
    peer,
    peerIp: peerIpOf(peer),
    nodeId: '',
    pod: '',
    namespace: '',
    metadata: {},
    revision: '',
    sans,
  };
}

/** The identity once the node is known. */
export function withNode(
  identity: ClientIdentity,
  nodeId: string,
  metadata: Readonly<Record<string, unknown>>,
): ClientIdentity {
  const revision = metadata['ISTIO_REVISION'];
  return {
    ...identity,
    nodeId,
    ...parseNodeId(nodeId),
    metadata,
    revision: typeof revision === 'string' ? revision : '',
  };
}

/** A one-line description for refusals and audit lines. */
export function describeIdentity(c: ClientIdentity): string {
  // Client-supplied parts are truncated: the line goes to logs and into the refusal status.
  const rev = c.revision === '' ? '' : ` revision=${truncateForLog(c.revision, 64)}`;
  const sans =
    c.sans.length === 0
      ? ' no client certificate'
      : ` sans=[${c.sans
          .slice(0, 8)
          .map((san) => truncateForLog(san, 128))
          .join(', ')}${c.sans.length > 8 ? `, … ${c.sans.length - 8} more` : ''}]`;
  return `node=${c.nodeId === '' ? '(none)' : truncateForLog(c.nodeId)} peer=${c.peer}${rev}${sans}`;
}
