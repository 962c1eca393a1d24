/** Who is on the other end of one ADS stream. Node ids are not unique: streams are keyed by `streamId`. */
export interface ClientIdentity {
  /** Unique per stream for the life of the process. */
  readonly streamId: number;
  /** `ip:port` of the TCP peer. */
  readonly peer: string;
  /** From the first request's node; empty until it arrives. */
  readonly nodeId: string;
  /** Node metadata (GENERATOR, ISTIO_REVISION, ISTIO_VERSION, ...). */
  readonly metadata: Readonly<Record<string, unknown>>;
}
