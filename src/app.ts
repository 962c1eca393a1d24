import { MeshmuxError } from './core/errors.js';
import { componentLogger, type Logger } from './core/logger.js';
import { AdsServer } from './downstream/ads-server.js';
import { HttpServer } from './http/http-server.js';
import { MergeEngine, type MergeInput } from './merge/merge-engine.js';
import type { SourcePolicy } from './merge/source-rules.js';
import { semanticKeysOf } from './schema/semantic-keys.js';
import { KINDS } from './schema/kinds.js';
import { messageType } from './schema/proto-root.js';
import { encodeProtoJson } from './schema/proto-json.js';
import { decodeBody } from './schema/yaml-reader.js';
import type { MeshmuxConfig, SourceConfig } from './settings/meshmux-config.js';
import { Metrics } from './telemetry/metrics.js';
import { FileSource } from './upstream/file/file-source.js';
import type { UpstreamSource } from './upstream/upstream-source.js';

/** A running meshmux: its bound ports and a way to stop it. */
export interface RunningMeshmux {
  readonly xdsPort: number;
  readonly httpPort: number;
  readonly engine: MergeEngine;
  readonly ads: AdsServer;
  readonly metrics: Metrics;
  /** Ends every stream and closes every listener and source. */
  stop(): Promise<void>;
}

/** One factory per source type: the only place that knows every kind of source. */
const SOURCE_FACTORIES: {
  [T in SourceConfig['type']]: (config: Extract<SourceConfig, { type: T }>) => UpstreamSource;
} = {
  file: (c) =>
    new FileSource({
      name: c.name,
      path: c.path,
      defaultNamespace: c.namespace,
      ...(c.rescanInterval === undefined ? {} : { rescanMs: c.rescanInterval }),
    }),
};

/** The merge rules of a configured source. */
function sourcePolicy(config: SourceConfig | undefined): Partial<SourcePolicy> {
  if (config === undefined) return {};
  return {
    priority: config.priority,
    ...(config.allow === undefined ? {} : { allow: config.allow }),
    ...(config.deny === undefined ? {} : { deny: config.deny }),
    keepOnEmpty: config.onEmpty === 'keep',
    ...(config.maxStale === undefined ? {} : { maxStaleMs: config.maxStale }),
    maxDeleteRatio: config.maxDeleteRatio,
    ...(config.confirmAfter === undefined ? {} : { confirmAfterMs: config.confirmAfter }),
  };
}

function createSource(config: SourceConfig): UpstreamSource {
  return SOURCE_FACTORIES[config.type](config);
}

/** Encodes the configured MeshConfig once; a config error names the field. */
function encodeMeshConfig(config: MeshmuxConfig): Uint8Array | undefined {
  if (config.mesh === undefined) return undefined;
  const warnings: string[] = [];
  try {
    return encodeProtoJson(messageType('istio.mesh.v1alpha1.MeshConfig'), config.mesh, {
      path: 'mesh',
      onPruned: (field: string) => warnings.push(field),
    });
  } catch (err) {
    throw new MeshmuxError(
      'CONFIG',
      `invalid mesh section: ${(err as Error).message}`,
      { file: config.origin },
      {
        cause: err,
      },
    );
  }
}

/**
 * The composition root: builds sources, the merge, the ADS server, HTTP and telemetry from a
 * validated configuration, wires their hooks together and starts them.
 */
export async function startMeshmux(
  config: MeshmuxConfig,
  overrides: { xds?: string; http?: string; log?: Logger } = {},
): Promise<RunningMeshmux> {
  const log = overrides.log ?? componentLogger('app');
  const metrics = new Metrics();
  const meshConfig = encodeMeshConfig(config);
  const sources = config.sources.map(createSource);
  const inputs: MergeInput[] = sources.map((s, i) => ({
    descriptor: s.descriptor,
    events$: s.events$,
    policy: sourcePolicy(config.sources[i]),
  }));
  const engine = new MergeEngine(
    inputs,
    {
      syncTimeoutMs: config.syncTimeout,
      semanticKeys: semanticKeysOf,
      semanticConflicts: config.merge.semanticConflicts,
      log: componentLogger('merge'),
    },
    {
      onSnapshot: (snapshot, _changed, buildMs) => metrics.onSnapshot(snapshot, buildMs),
    },
  );
  const ads = new AdsServer({
    reader: engine,
    kinds: KINDS,
    log: componentLogger('ads'),
    meshConfig: () => meshConfig,
    hooks: {
      onConnect: () => metrics.onConnect(),
      onDisconnect: () => metrics.onDisconnect(),
      onPush: (_c, typeUrl, _v, bytes) => metrics.onPush(typeUrl, bytes),
      onAck: (_c, _t, _v, latencyMs) => metrics.onAck(latencyMs),
      onNack: (_c, typeUrl) => metrics.onNack(typeUrl),
      onBadRequest: () => metrics.onBadRequest(),
    },
  });
  const http = new HttpServer({
    reader: engine,
    log: componentLogger('http'),
    metrics: async () => ({
      contentType: metrics.registry.contentType,
      body: await metrics.registry.metrics(),
    }),
    debugPages: {
      configz: () => configz(engine),
      syncz: () => ads.reports(),
      sources: () => engine.current().sources.map(describeSource),
      counters: () => ads.counters(),
      rejections: () => engine.current().sources.flatMap((s) => s.rejections),
      conflicts: () => engine.current().conflicts,
    },
    actions: [
      {
        pattern: /^\/debug\/sources\/([^/]+)\/confirm$/,
        handle: (match) => {
          const name = decodeURIComponent(match[1] ?? '');
          if (!engine.has(name)) return { status: 404, body: { error: `no source named ${name}` } };
          return engine.confirm(name)
            ? { status: 200, body: { confirmed: name } }
            : { status: 409, body: { error: `source ${name} has no held update` } };
        },
      },
    ],
  });
  engine.start();
  const xdsPort = await ads.listen(overrides.xds ?? config.server.xds);
  const httpPort = await http.listen(overrides.http ?? config.server.http);
  log.info({ sources: sources.map((s) => s.descriptor.name), xdsPort, httpPort }, 'meshmux started');
  return {
    xdsPort,
    httpPort,
    engine,
    ads,
    metrics,
    async stop() {
      await ads.close();
      await http.close();
      engine.stop();
    },
  };
}

function configz(engine: MergeEngine): unknown {
  const out: unknown[] = [];
  for (const kind of engine.current().kinds.values()) {
    for (const r of kind.resources) {
      out.push({
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
        version: r.version,
        labels: r.labels,
        annotations: r.annotations,
        spec: decodeBody(r.kind, r.body),
      });
    }
  }
  return out;
}

function describeSource(s: ReturnType<MergeEngine['current']>['sources'][number]): unknown {
  return {
    name: s.name,
    type: s.type,
    priority: s.priority,
    state: s.state,
    staleSince: s.staleSince?.toISOString(),
    held: s.held,
    synced: s.everSynced,
    revision: s.revision,
    lastSyncTime: s.lastSyncTime?.toISOString(),
    lastError: s.lastError?.describe(),
    counts: s.counts,
    errors: s.errors.map((e) => e.describe()),
    warnings: s.warnings.map((e) => e.describe()),
  };
}
