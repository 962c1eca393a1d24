import type { KindSnapshot } from '../merge/config-snapshot.js';
import type { ClientView } from './client-view.js';
import type { AdsRequest } from './discovery-request.js';
import type { BuiltResponse, ResponseCache } from './response-cache.js';

/**
 * One type URL subscribed on one stream, as a variant of the protocol sees it. The stream decides
 * when a response may go (readiness, ACKs, the write budget); the subscription decides what it
 * carries.
 */
export interface TypeSubscription<R extends AdsRequest> {
  /**
   * Applies what a later request of the type changes in the subscription (delta: names subscribed
   * or unsubscribed). True when a response is now owed even if the content did not move.
   */
  update(request: R): boolean;
  /** A response is owed whatever the content version says (first answer, subscription changed). */
  readonly owed: boolean;
  /**
   * The response that brings the client from what it holds to `view`'s content of `kind`
   * (`known`: the type URL names a kind meshmux serves), or undefined when it would carry nothing
   * the client lacks. Building commits nothing: see {@link sent}.
   */
  resources(view: ClientView, kind: KindSnapshot | undefined, known: boolean): BuiltResponse | undefined;
  /** A response carrying one bare message (MeshConfig) as `Any(<bodyTypeUrl>)`. */
  bare(bodyTypeUrl: string, body: Uint8Array): BuiltResponse;
  /** `response`, built by this subscription, was handed to the transport: the client holds what it carries. */
  sent(response: BuiltResponse): void;
}

/**
 * A variant of ADS: state of the world (`StreamAggregatedResources`, what istiod speaks) or delta
 * (`DeltaAggregatedResources`, what another meshmux speaks with `delta: true`). Stateless and shared.
 */
export interface AdsProtocol<R extends AdsRequest> {
  /** For logs and reports. */
  readonly name: 'sotw' | 'delta';
  /**
   * Decodes a request; throws on malformed bytes. `withNode`: the request's node is wanted (the
   * first request's); without it a node sent along (istiod sends one with every ACK) is skipped
   * unread, as decoding it is most of what such a request costs.
   */
  decode(bytes: Uint8Array, withNode: boolean): R;
  /**
   * Bytes of a request's node metadata as encoded, read without decoding them (so a first request
   * can be refused before it costs its decoding); throws on bytes that cannot be walked.
   */
  metadataBytes(bytes: Uint8Array): number;
  /** The version an ACK acknowledges: SotW names it; in delta the nonce alone says which response. */
  ackedVersion(request: R, sentVersion: string | undefined): string;
  /** A new subscription, from the first request of a type URL on a stream. */
  subscribe(typeUrl: string, request: R, responses: ResponseCache): TypeSubscription<R>;
}
