import { compareByName, type ConfigResource } from '../core/resource.js';
import type { KindSnapshot } from '../merge/config-snapshot.js';
import type { AdsProtocol, TypeSubscription } from './ads-protocol.js';
import type { ClientView } from './client-view.js';
import {
  decodeDeltaDiscoveryRequest,
  type DeltaDiscoveryRequest,
  deltaDiscoveryRequestMetadataBytes,
} from './discovery-request.js';
import type { BuiltResponse, ResponseCache } from './response-cache.js';

/** The name of every object in delta: the MCP name, `<namespace>/<name>` (its key). */
function deltaName(r: ConfigResource): string {
  return r.key;
}

/** The name that subscribes to every object of a type. */
const WILDCARD = '*';

/**
 * Delta ADS: each response carries only the objects that changed since the last one the client was
 * sent, and the names of those it should remove. A stream subscribes a type either as a wildcard
 * (no names on its first request, or `*`) or to explicit `<namespace>/<name>` names; a client
 * that reconnects may list what it holds (`initial_resource_versions`) and then gets only what
 * differs. One object changed among thousands crosses the stream as that object alone.
 */
export const DELTA_PROTOCOL: AdsProtocol<DeltaDiscoveryRequest> = Object.freeze<
  AdsProtocol<DeltaDiscoveryRequest>
>({
  name: 'delta',
  decode: decodeDeltaDiscoveryRequest,
  metadataBytes: deltaDiscoveryRequestMetadataBytes,
  // A delta ACK names no version: the nonce says which response, whose version was sent with it.
  ackedVersion: (_request: DeltaDiscoveryRequest, sentVersion: string | undefined) => sentVersion ?? '',
  subscribe: (typeUrl, request, responses) => new DeltaSubscription(typeUrl, request, responses),
});

/** What a built, not yet sent, response would bring the client to. */
interface Pending {
  readonly nonce: string;
  readonly held: readonly ConfigResource[];
}

/** One type's delta subscription on one stream: what the client holds, and what it subscribed. */
class DeltaSubscription implements TypeSubscription<DeltaDiscoveryRequest> {
  private wildcard = false;
  private readonly names = new Set<string>();
  /** What the client holds (as of the last response handed to the transport), sorted by name. */
  private held: readonly ConfigResource[] = [];
  /** What the client said it held when it subscribed; read by the first response only. */
  private initial: ReadonlyMap<string, string> | undefined;
  /**
   * Explicit names subscribed (or subscribed again) since the last response sent: one that exists
   * is sent even when the client is thought to hold it, one that does not is answered as removed.
   */
  private readonly unanswered = new Set<string>();
  /** `*` subscribed (or subscribed again) since the last response sent: every object is sent. */
  private wildcardUnanswered = false;
  private pending: Pending | undefined;
  owed = true;

  constructor(
    private readonly typeUrl: string,
    first: DeltaDiscoveryRequest,
    private readonly responses: ResponseCache,
  ) {
    this.wildcard = first.subscribe.length === 0;
    this.update(first);
    if (first.initialVersions.size > 0) this.initial = first.initialVersions;
  }

  update(request: DeltaDiscoveryRequest): boolean {
    // A name subscribed again is answered again: a client that dropped an object (or doubts it
    // has it) asks for it this way, and the protocol says every name subscribed is sent.
    let owed = false;
    for (const name of request.subscribe) {
      if (name === WILDCARD) {
        this.wildcard = true;
        this.wildcardUnanswered = true;
      } else {
        this.names.add(name);
        this.unanswered.add(name);
      }
      owed = true;
    }
    for (const name of request.unsubscribe) {
      // The client forgets what it unsubscribed by itself; nothing is sent for it.
      if (name === WILDCARD) {
        this.wildcard = false;
        this.wildcardUnanswered = false;
      } else {
        this.names.delete(name);
        this.unanswered.delete(name);
      }
    }
    if (request.unsubscribe.length > 0) this.forgetUnsubscribed();
    this.owed ||= owed;
    return owed;
  }

  /**
   * Drops from what the client holds every object it no longer subscribes: it dropped them itself,
   * and a later subscription must send them again rather than find them already held.
   */
  private forgetUnsubscribed(): void {
    const kept = (r: ConfigResource): boolean => this.subscribed(deltaName(r));
    this.held = this.held.filter(kept);
    if (this.pending !== undefined)
      this.pending = { nonce: this.pending.nonce, held: this.pending.held.filter(kept) };
  }

  private subscribed(name: string): boolean {
    return this.wildcard || this.names.has(name);
  }

  resources(view: ClientView, kind: KindSnapshot | undefined): BuiltResponse | undefined {
    const content = this.responses.viewContent(view, kind);
    const current =
      this.wildcard && this.names.size === 0
        ? content.resources
        : content.resources.filter((r) => this.subscribed(deltaName(r)));
    const { changed, removed } =
      this.initial === undefined ? this.diff(current) : this.diffFromInitial(current, this.initial);
    if (this.unanswered.size > 0) {
      // Linear in what is subscribed and held: a client may name hundreds of thousands of objects.
      const present = new Set<string>();
      for (const r of current) present.add(deltaName(r));
      const named = new Set(removed);
      for (const name of this.unanswered) {
        if (!present.has(name) && !named.has(name)) removed.push(name);
      }
    }
    if (changed.length === 0 && removed.length === 0 && !this.owed) return undefined;
    const response = this.responses.deltaResponse(this.typeUrl, content.version, changed, removed);
    this.pending = { nonce: response.nonce, held: current };
    return response;
  }

  bare(bodyTypeUrl: string, body: Uint8Array): BuiltResponse {
    return this.responses.deltaBareResponse(this.typeUrl, bodyTypeUrl, body);
  }

  sent(response: BuiltResponse): void {
    this.owed = false;
    if (this.pending?.nonce !== response.nonce) return;
    this.held = this.pending.held;
    this.pending = undefined;
    this.initial = undefined;
    this.unanswered.clear();
    this.wildcardUnanswered = false;
  }

  /**
   * What differs between what the client holds and `current`, both sorted by name: identical
   * instances are skipped by a pointer comparison, so the cost is O(n) comparisons and O(changes)
   * work. An object the client holds but no longer subscribes is not named (it dropped it itself).
   * An object subscribed since the last response is sent though the client holds it.
   */
  private diff(current: readonly ConfigResource[]): { changed: ConfigResource[]; removed: string[] } {
    const changed: ConfigResource[] = [];
    const removed: string[] = [];
    const held = this.held;
    const all = this.wildcardUnanswered;
    // Looked up only for objects held unchanged, and only while some name is owed again.
    const resent = all || this.unanswered.size > 0;
    const owedAgain = (r: ConfigResource): boolean => all || this.unanswered.has(deltaName(r));
    let i = 0;
    let j = 0;
    while (i < held.length || j < current.length) {
      const h = held[i];
      const c = current[j];
      if (h !== undefined && h === c) {
        if (resent && owedAgain(c)) changed.push(c);
        i++;
        j++;
        continue;
      }
      const order = h === undefined ? 1 : c === undefined ? -1 : compareByName(h, c);
      if (order < 0) {
        const name = deltaName(h as ConfigResource);
        if (this.subscribed(name)) removed.push(name);
        i++;
      } else if (order > 0) {
        changed.push(c as ConfigResource);
        j++;
      } else {
        const r = c as ConfigResource;
        if (!sameServed(h as ConfigResource, r) || (resent && owedAgain(r))) changed.push(r);
        i++;
        j++;
      }
    }
    return { changed, removed };
  }

  /** The first answer to a client that listed what it holds: what differs from that list. */
  private diffFromInitial(
    current: readonly ConfigResource[],
    initial: ReadonlyMap<string, string>,
  ): { changed: ConfigResource[]; removed: string[] } {
    const present = new Set<string>();
    const changed: ConfigResource[] = [];
    for (const r of current) {
      const name = deltaName(r);
      present.add(name);
      if (initial.get(name) !== r.version) changed.push(r);
    }
    const removed = [...initial.keys()].filter((name) => !present.has(name) && this.subscribed(name));
    return { changed, removed };
  }
}

/** Whether the client would receive the same bytes for both (same content version and creation time). */
function sameServed(a: ConfigResource, b: ConfigResource): boolean {
  return (
    a.version === b.version &&
    a.createTime.seconds === b.createTime.seconds &&
    a.createTime.nanos === b.createTime.nanos
  );
}
