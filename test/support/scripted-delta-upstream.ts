/**
 * A delta ADS upstream whose every response the test writes itself: the way to put on a live
 * delta stream what no well-behaved server sends (resources in the wrong `Any`, removals riding
 * on a response that must be refused).
 */
import * as grpc from '@grpc/grpc-js';
import { messageType } from '../../src/schema/proto-root.js';
import { XdsSource } from '../../src/upstream/xds/xds-source.js';
import type { RawAny } from './faulty-responses.js';
import { rawBidiMethod } from './raw-grpc-method.js';
import { SourceEventRecorder } from './source-event-recorder.js';

const DELTA_REQUEST = messageType('envoy.service.discovery.v3.DeltaDiscoveryRequest');
const DELTA_RESPONSE = messageType('envoy.service.discovery.v3.DeltaDiscoveryResponse');
const DELTA_PATH = '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources';

/** One request as the upstream decoded it. */
export interface DeltaRequestSeen {
  readonly typeUrl: string;
  readonly nonce: string;
  readonly errorDetail: { code?: number; message?: string } | null;
}

/**
 * An encoded `DeltaDiscoveryResponse`. A resource without `any` is a name the upstream does not
 * have (sent with no resource).
 */
export function deltaResponse(
  typeUrl: string,
  resources: ReadonlyArray<{ readonly name: string; readonly any?: RawAny }>,
  nonce: string,
  removed: readonly string[] = [],
): Uint8Array {
  return DELTA_RESPONSE.encode(
    DELTA_RESPONSE.fromObject({
      system_version_info: nonce,
      type_url: typeUrl,
      nonce,
      removed_resources: removed,
      resources: resources.map((r) =>
        r.any === undefined
          ? { name: r.name, version: nonce }
          : { name: r.name, version: nonce, resource: { type_url: r.any.typeUrl, value: r.any.value } },
      ),
    }),
  ).finish();
}

export class ScriptedDeltaUpstream {
  /** Every request received, in order. */
  readonly requests: DeltaRequestSeen[] = [];
  private readonly calls = new Set<grpc.ServerDuplexStream<Buffer, Uint8Array>>();
  private waiters: Array<() => void> = [];

  private readonly server = new grpc.Server();
  private port = 0;

  private constructor() {
    this.server.addService(
      {
        delta: rawBidiMethod(DELTA_PATH),
      },
      { delta: (call: grpc.ServerDuplexStream<Buffer, Uint8Array>) => this.onStream(call) },
    );
  }

  /** Listens on 127.0.0.1, on an ephemeral port. */
  static async start(): Promise<ScriptedDeltaUpstream> {
    const upstream = new ScriptedDeltaUpstream();
    upstream.port = await new Promise<number>((resolve, reject) =>
      upstream.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err === null ? resolve(p) : reject(err),
      ),
    );
    return upstream;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Writes one message on every open stream. */
  send(bytes: Uint8Array): void {
    for (const call of this.calls) call.write(bytes);
  }

  /** Ends every open stream with UNAVAILABLE, as an upstream restarting does. */
  endStreams(): void {
    for (const call of this.calls) {
      call.emit('error', {
        code: grpc.status.UNAVAILABLE,
        details: 'the scripted upstream ended the stream',
      });
    }
    this.calls.clear();
  }

  /** The initial requests for `typeUrl` (no nonce): one per stream that subscribed it. */
  subscriptions(typeUrl: string): number {
    return this.requests.filter((r) => r.typeUrl === typeUrl && r.nonce === '').length;
  }

  /** Resolves once `check()` holds (checked on every request); rejects after `timeoutMs`. */
  waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== attempt);
        reject(new Error(`no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      const attempt = (): void => {
        if (!check()) return;
        clearTimeout(deadline);
        this.waiters = this.waiters.filter((w) => w !== attempt);
        resolve();
      };
      this.waiters.push(attempt);
      attempt();
    });
  }

  stop(): void {
    this.server.forceShutdown();
  }

  private onStream(call: grpc.ServerDuplexStream<Buffer, Uint8Array>): void {
    this.calls.add(call);
    const gone = (): void => {
      this.calls.delete(call);
    };
    call.on('error', gone);
    call.on('cancelled', gone);
    call.on('end', gone);
    call.on('data', (bytes: Buffer) => {
      const req = DELTA_REQUEST.toObject(DELTA_REQUEST.decode(bytes), { defaults: true }) as {
        type_url: string;
        response_nonce: string;
        error_detail: DeltaRequestSeen['errorDetail'];
      };
      this.requests.push({
        typeUrl: req.type_url,
        nonce: req.response_nonce,
        errorDetail: req.error_detail ?? null,
      });
      for (const w of [...this.waiters]) w();
    });
  }
}

/** The ServiceEntry type URL a delta source subscribes with `apiVersions: current`. */
const SE_V1 = 'networking.istio.io/v1/ServiceEntry';

/**
 * An `xds` source over delta ADS (`delta: true`) reading ServiceEntries from `upstream`, its events
 * recorded, once it has subscribed.
 */
export async function subscribedDeltaSource(
  upstream: ScriptedDeltaUpstream,
  name: string,
  timeoutMs = 5_000,
): Promise<SourceEventRecorder> {
  const recorder = new SourceEventRecorder(
    new XdsSource({
      name,
      namespace: 'default',
      address: upstream.address,
      delta: true,
      kinds: ['ServiceEntry'],
      apiVersions: 'current',
      reconnect: { initialDelay: 50, maxDelay: 400 },
    }).events$,
  );
  await upstream.waitFor(
    () => upstream.requests.some((r) => r.typeUrl === SE_V1),
    timeoutMs,
    'the subscription',
  );
  return recorder;
}
