import type { RecordedClient } from '../../state/policy-record.js';
import { anonymousIdentity, type ClientIdentity, withNode } from '../client-identity.js';

/** An istiod as a policy may test it, with when it was last seen connected (as the state folder keeps it). */
export type SeenClient = RecordedClient;

/** How long an istiod not connected is still judged for, counted while this process runs. */
export const KEEP_ABSENT_MS = 10 * 60_000;
/** How often the same streams are looked at anew (to forget the absent in time). */
const LOOK_AGAIN_MS = 10_000;
/** Identities kept at most; the least recently seen go first. */
export const MAX_KNOWN_CLIENTS = 1000;

/**
 * The istiods a change of the policies is judged for: those connected now, and those seen
 * connected lately (by this process, or by the last one, as its record says), so that an istiod
 * redialling when the change comes (a restart it has not reached yet, a reconnect under way) is
 * judged too. An identity absent for {@link KEEP_ABSENT_MS} of this process's time is forgotten:
 * a restart after a long outage still judges for every istiod the last run served.
 */
export class KnownClients {
  private readonly seen = new Map<string, { client: SeenClient; identity: ClientIdentity; atMs: number }>();
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
    for (const c of clients) this.remember(c, c.seenAtMs ?? recordedAtMs);
  }

  /** Notes the istiods connected at `nowMs`, and forgets those absent too long. */
  observe(connected: readonly ClientIdentity[], nowMs: number): void {
    const streams = connected.map((c) => c.streamId).join(',');
    if (streams === this.lastStreams && nowMs - this.lastLookMs < LOOK_AGAIN_MS) return;
    this.lastStreams = streams;
    this.lastLookMs = nowMs;
    for (const c of connected) {
      this.remember({ nodeId: c.nodeId, peer: c.peer, metadata: c.metadata, sans: c.sans }, nowMs, c);
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

  /** Every identity known, once each. */
  identities(): ClientIdentity[] {
    return [...this.seen.values()].map((e) => e.identity);
  }

  /** The identities with when each was last seen, for the record. */
  toRecord(): SeenClient[] {
    return [...this.seen.values()].map((e) => ({ ...e.client, seenAtMs: e.atMs }));
  }

  /** Moves whenever an identity comes or goes (not when a known one is seen again). */
  get membership(): number {
    return this.version;
  }

  private remember(client: SeenClient, atMs: number, identity?: ClientIdentity): void {
    const key = JSON.stringify([
      client.nodeId,
      identity?.peerIp ?? peerIpOf(client.peer),
      client.metadata,
      client.sans,
    ]);
    const entry = this.seen.get(key);
    if (entry === undefined) this.version++;
    else if (entry.atMs > atMs) return;
    this.seen.set(key, {
      client: { nodeId: client.nodeId, peer: client.peer, metadata: client.metadata, sans: client.sans },
      identity:
        identity ?? withNode(anonymousIdentity(-1, client.peer, client.sans), client.nodeId, client.metadata),
      atMs,
    });
  }
}

function peerIpOf(peer: string): string {
  return anonymousIdentity(-1, peer, []).peerIp;
}
