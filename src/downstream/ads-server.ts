import * as grpc from '@grpc/grpc-js';
import type { Subscription } from 'rxjs';
import type { Logger } from '../core/logger.js';
import type { SnapshotReader } from '../merge/config-snapshot.js';
import type { KindRegistry } from '../schema/kinds.js';
import type { AdsHooks } from './ads-hooks.js';
import type { ClientIdentity } from './client-identity.js';
import { ClientStream, type StreamReport } from './client-stream.js';
import { PolicySet } from './policy/policy-set.js';
import { ResourceEncoder } from './resource-encoder.js';
import { ResponseCache } from './response-cache.js';

const ADS_SERVICE = 'envoy.service.discovery.v3.AggregatedDiscoveryService';

const identity = (b: Buffer): Buffer => b;

/**
 * The service definition with raw bytes on both sides: requests are decoded by the stream, and
 * responses are written as the shared, pre-encoded buffers of the response cache.
 */
const ADS_DEFINITION: grpc.ServiceDefinition = {
  StreamAggregatedResources: {
    path: `/${ADS_SERVICE}/StreamAggregatedResources`,
    requestStream: true,
    responseStream: true,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
  DeltaAggregatedResources: {
    path: `/${ADS_SERVICE}/DeltaAggregatedResources`,
    requestStream: true,
    responseStream: true,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
};

export interface AdsServerOptions {
  readonly reader: SnapshotReader;
  readonly kinds: KindRegistry;
  readonly log: Logger;
  readonly hooks?: AdsHooks;
  /** Encoded MeshConfig to serve; when absent MeshConfig requests are never answered. */
  readonly meshConfig?: () => Uint8Array | undefined;
  /** Who gets what; default: no policies, everything to everyone. */
  readonly policies?: PolicySet;
}

/** gRPC channel options of the server: accept istiod's 30 s keepalive pings, no size limit istiod would hit. */
export const ADS_SERVER_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.http2.min_ping_interval_without_data_ms': 5_000,
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
  'grpc.max_send_message_length': -1,
  'grpc.keepalive_time_ms': 60_000,
  'grpc.keepalive_timeout_ms': 20_000,
};

/**
 * The ADS server istiods connect to. It owns one subscription to the snapshot stream and fans
 * each snapshot out to every stream; streams share responses built once per view and version.
 */
export class AdsServer {
  private readonly server = new grpc.Server(ADS_SERVER_CHANNEL_OPTIONS);
  private readonly streams = new Set<ClientStream>();
  private readonly encoder: ResourceEncoder;
  readonly responses: ResponseCache;
  private snapshotSubscription: Subscription | undefined;
  private nextStreamId = 1;
  private policies: PolicySet;

  constructor(private readonly options: AdsServerOptions) {
    this.encoder = new ResourceEncoder(options.kinds);
    this.responses = new ResponseCache(this.encoder);
    this.policies = options.policies ?? new PolicySet([]);
    const env = {
      reader: options.reader,
      responses: this.responses,
      kinds: options.kinds,
      meshConfig: options.meshConfig ?? (() => undefined),
      admit: (client: ClientIdentity) => this.policies.admit(client),
      hooks: options.hooks ?? {},
      log: options.log,
    };
    this.server.addService(ADS_DEFINITION, {
      StreamAggregatedResources: (call: grpc.ServerDuplexStream<Uint8Array, Buffer>) => {
        const stream = new ClientStream(this.nextStreamId++, call, env, (s) => this.streams.delete(s));
        this.streams.add(stream);
      },
      DeltaAggregatedResources: (call: grpc.ServerDuplexStream<Uint8Array, Buffer>) => {
        // istiod never uses delta for config sources; say so plainly instead of hanging.
        call.emit('error', {
          code: grpc.status.UNIMPLEMENTED,
          details: 'meshmux serves state-of-the-world ADS only',
        });
      },
    });
  }

  /**
   * Binds `host:port` (port 0 picks one) with the given credentials (default plaintext h2c, which
   * is what istiod speaks before 1.26) and starts serving; resolves to the bound port. May be called
   * once per listener, e.g. a plaintext and a TLS port.
   */
  async listen(address: string, credentials = grpc.ServerCredentials.createInsecure()): Promise<number> {
    const port = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(address, credentials, (err, p) => (err ? reject(err) : resolve(p)));
    });
    this.snapshotSubscription ??= this.options.reader.snapshots$.subscribe((snapshot) => {
      for (const stream of this.streams) stream.onSnapshot(snapshot);
    });
    this.options.log.info({ address, port, tls: credentials._isSecure() }, 'ADS server listening');
    return port;
  }

  /** Replaces the policies; every stream is looked up again and receives only what its new view changes. */
  setPolicies(policies: PolicySet): void {
    this.policies = policies;
    for (const stream of [...this.streams]) stream.reevaluate();
  }

  /** Reports of every open stream, for `/debug/syncz`. */
  reports(): StreamReport[] {
    return [...this.streams].map((s) => s.report());
  }

  /** Counters for benchmarks: objects encoded and responses assembled since start. */
  counters(): { encodes: number; assemblies: number; streams: number } {
    return {
      encodes: this.encoder.encodes,
      assemblies: this.responses.counters.assemblies,
      streams: this.streams.size,
    };
  }

  /** Ends every stream, then stops the server; waits at most `graceMs` for in-flight writes. */
  async close(graceMs = 5_000): Promise<void> {
    this.snapshotSubscription?.unsubscribe();
    for (const stream of [...this.streams]) stream.end();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
