import { shortDigest } from '../../core/content-digest.js';
import type { RecordedClient } from '../../state/policy-record.js';
import { anonymousIdentity, type ClientIdentity, peerIpOf, withNode } from '../client-identity.js';

/** An istiod as a policy may test it, with when it was last seen connected (as the state folder keeps it). */
export type SeenClient = RecordedClient;

/** How long an istiod not connected is still judged for, counted while this process runs. */
export const KEEP_ABSENT_MS = 10 * 60_000;
/** How often the same streams are looked at anew (to forget the absent in time). */
const LOOK_AGAIN_MS = 10_000;
/** Identities kept at most; the least recently seen go first. */
export const MAX_KNOWN_CLIENTS = 1000;
/** The longest node id, SAN or metadata value kept; a longer one is left out (a node id is cut). */
export const MAX_KEPT_CHARS = 256;
/** The metadata kept of one identity, keys and values counted in characters. */
export const MAX_KEPT_METADATA_CHARS = 2048;
/** SANs kept of one identity. */
const MAX_KEPT_SANS = 16;
/** The most the record of the known identities takes as JSON; the least recently seen are left out. */
export const MAX_RECORD_BYTES = 2 * 1024 * 1024;

interface KnownEntry {
  readonly client: SeenClient;
  readonly identity: ClientIdentity;
  /** Its size in the record, as JSON. */
  readonly bytes: number;
  atMs: number;
}

/**
 * The istiods a change of the policies is judged for: those connected now, and those seen
 * connected lately (by this process, or by the last one, as its record says), so that an istiod
 * redialling when the change comes (a restart it has not reached yet, a reconnect under way) is
 * judged too. An identity absent for {@link KEEP_ABSENT_MS} of this process's time is forgotten:
 * a restart after a long outage still judges for every istiod the last run served.
 */
export class KnownClients {
  private readonly seen = new Map<string, KnownEntry>();
  /** Each stream's identity as kept and its key, worked out once a stream (its claims do not change). */
  private readonly kept = new WeakMap<ClientIdentity, { client: SeenClient; key: string }>();
  private version = 0;
  /** The streams seen at the last full look, and when it was: the same streams are looked at anew only now and then. */
  private lastStreams = '';
  private lastLookMs = Number.NEGATIVE_INFINITY;

  constructor(
    recorded: readonly SeenClient[],
    recordedAtMs: number,
    private readonly startedAtMs: number,
  ) {
    this.merge(recorded, recordedAtMs);
  }

  /**
   * Adds istiods another record names (the last run's, another replica's), each as last seen when
   * it says, or at `recordedAtMs`; an istiod known as seen later keeps that time.
   */
  merge(clients: readonly SeenClient[], recordedAtMs: number): void {
    for (const c of clients) {
      const kept = keptOf(c, peerIpOf(c.peer));
      this.remember(kept.client, kept.key, c.seenAtMs ?? recordedAtMs);
    }
  }

  /** Notes the istiods connected at `nowMs`, and forgets those absent too long. */
  observe(connected: readonly ClientIdentity[], nowMs: number): void {
    const streams = connected.map((c) => c.streamId).join(',');
    if (streams === this.lastStreams && nowMs - this.lastLookMs < LOOK_AGAIN_MS) return;
    this.lastStreams = streams;
    this.lastLookMs = nowMs;
    for (const c of connected) {
      let kept = this.kept.get(c);
      if (kept === undefined) {
        kept = keptOf({ nodeId: c.nodeId, peer: c.peer, metadata: c.metadata, sans: c.sans }, c.peerIp);
        this.kept.set(c, kept);
      }
      this.remember(kept.client, kept.key, nowMs);
    }
    for (const [key, entry] of this.seen) {
      if (nowMs - Math.max(entry.atMs, this.startedAtMs) > KEEP_ABSENT_MS) {
        this.seen.delete(key);
        this.version++;
      }
    }
    if (this.seen.size > MAX_KNOWN_CLIENTS) {
      const oldest = [...this.seen].sort((a, b) => a[1].atMs - b[1].atMs);
      for (const [key] of oldest.slice(0, this.seen.size - MAX_KNOWN_CLIENTS)) this.seen.delete(key);
      this.version++;
    }
  }

  /**
   * Every identity known, once each: one of the streams `connected` (as last observed) as it
   * claims itself, whole, and the others as kept.
   */
  identities(connected: readonly ClientIdentity[] = []): ClientIdentity[] {
    const whole = new Map<string, ClientIdentity>();
    for (const c of connected) {
      const kept = this.kept.get(c);
      if (kept !== undefined) whole.set(kept.key, c);
    }
    return [...this.seen].map(([key, e]) => whole.get(key) ?? e.identity);
  }

  /**
   * The identities as kept with when each was last seen, for the record: the most recently seen
   * within {@link MAX_RECORD_BYTES}.
   */
  toRecord(): SeenClient[] {
    const record: SeenClient[] = [];
    let bytes = 0;
    for (const e of [...this.seen.values()].sort((a, b) => b.atMs - a.atMs)) {
      bytes += e.bytes;
      if (bytes > MAX_RECORD_BYTES) break;
      record.push({ ...e.client, seenAtMs: e.atMs });
    }
    return record;
  }

  /** Moves whenever an identity comes or goes (not when a known one is seen again). */
  get membership(): number {
    return this.version;
  }

  private remember(client: SeenClient, key: string, atMs: number): void {
    const entry = this.seen.get(key);
    if (entry !== undefined) {
      entry.atMs = Math.max(entry.atMs, atMs);
      return;
    }
    this.version++;
    this.seen.set(key, {
      client,
      identity: withNode(anonymousIdentity(-1, client.peer, client.sans), client.nodeId, client.metadata),
      // With `seenAtMs` and the JSON around it.
      bytes: JSON.stringify(client).length + 32,
      atMs,
    });
  }
}

/**
 * What is kept of an identity, and its key: a client claims what it likes (up to 64 KiB of
 * metadata, for each of a thousand identities kept ten minutes and written to the record). A
 * policy tests the node id, string metadata values, the peer and the SANs, so only these are
 * kept, each bounded; the revision's key first, then the others in key order, so that the same
 * istiod is kept alike by every replica and run, whatever order its metadata came in. A claim
 * that is cut is judged as cut: only the istiod that sent it is judged less exactly.
 */
function keptOf(client: SeenClient, peerIp: string): { client: SeenClient; key: string } {
  const metadata: Record<string, string> = {};
  let chars = 0;
  const keys = Object.keys(client.metadata).sort();
  const revision = keys.indexOf(REVISION_KEY);
  if (revision > 0) keys.unshift(...keys.splice(revision, 1));
  for (const key of keys) {
    const value = client.metadata[key];
    if (typeof value !== 'string' || value.length > MAX_KEPT_CHARS || key.length > MAX_KEPT_CHARS) continue;
    chars += key.length + value.length;
    if (chars > MAX_KEPT_METADATA_CHARS) break;
    metadata[key] = value;
  }
  const kept: SeenClient = {
    nodeId: client.nodeId.length > MAX_KEPT_CHARS ? client.nodeId.slice(0, MAX_KEPT_CHARS) : client.nodeId,
    peer: client.peer.slice(0, MAX_KEPT_CHARS),
    metadata,
    sans: client.sans.filter((san) => san.length <= MAX_KEPT_CHARS).slice(0, MAX_KEPT_SANS),
  };
  // One istiod redialling from another port is the same identity.
  const key = shortDigest(JSON.stringify([kept.nodeId, peerIp, kept.metadata, kept.sans]), 22);
  return { client: kept, key };
}

/** The metadata key of an istiod's revision, which a policy's `revision` tests. */
const REVISION_KEY = 'ISTIO_REVISION';
