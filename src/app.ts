import { monitorEventLoopDelay } from 'node:perf_hooks';
import { MeshmuxError, toMeshmuxError } from './core/errors.js';
import { componentLogger, type Logger } from './core/logger.js';
import { AdsServer } from './downstream/ads-server.js';
import { anonymousIdentity, describeIdentity, withNode } from './downstream/client-identity.js';
import { PolicySet } from './downstream/policy/policy-set.js';
import { previewClient, type Preview } from './downstream/preview.js';
import { reloadingServerCredentials } from './downstream/server-tls.js';
import type { WriteBudgetOptions } from './downstream/write-budget.js';
import { HttpServer } from './http/http-server.js';
import { MergeEngine, type MergeInput } from './merge/merge-engine.js';
import type { SourcePolicy } from './merge/source-rules.js';
import { semanticKeysOf } from './schema/semantic-keys.js';
import { KINDS } from './schema/kinds.js';
import { messageType } from './schema/proto-root.js';
import { encodeProtoJson } from './schema/proto-json.js';
import { decodeBody } from './schema/yaml-reader.js';
import { configProblems, type MeshmuxConfig, type SourceConfig } from './settings/meshmux-config.js';
import { renderStatusPage } from './http/status-page.js';
import { ConfigReloads } from './telemetry/config-reloads.js';
import type { Metrics } from './telemetry/metrics.js';
import { StateMetrics } from './telemetry/state-metrics.js';
import { openRecordStore } from './state/open-record-store.js';
import { processCounters } from './telemetry/process-counters.js';
import { Telemetry } from './telemetry/telemetry.js';
import { tracingFromEnv, type TracingEnv } from './telemetry/tracing.js';
import { FileSource } from './upstream/file/file-source.js';
import { GitSource } from './upstream/git/git-source.js';
import { handleGitWebhook } from './upstream/git/git-webhook.js';
import type { UpstreamSource } from './upstream/upstream-source.js';
import { ZookeeperSource } from './upstream/zookeeper/zookeeper-source.js';
import { McpSinkSource } from './upstream/mcp/mcp-sink-source.js';
import { McpSource } from './upstream/mcp/mcp-source.js';
import { XdsSource } from './upstream/xds/xds-source.js';

/** A running meshmux: its bound ports and a way to stop it. */
export interface RunningMeshmux {
  readonly xdsPort: number;
  /** The TLS ADS port, when `server.xdsTls` is configured. */
  readonly xdsTlsPort?: number;
  readonly httpPort: number;
  readonly engine: MergeEngine;
  readonly ads: AdsServer;
  readonly metrics: Metrics;
  /**
   * Applies a new configuration without a restart: sources and policies change in place; clients
   * whose view changed receive the difference, the others nothing. Listener addresses, TLS files and
   * the mesh section need a restart (a warning says so). Given a function, calls it to read the
   * configuration, so a file that cannot be read or parsed counts as a failed reload too.
   * Everything new (sources, policies) is built before anything is swapped: on any error nothing
   * changes, no stream is touched, and the error is returned, logged, shown on the status page and
   * in `meshmux_config_last_reload_successful`. Never throws.
   */
  reload(config: MeshmuxConfig | (() => MeshmuxConfig)): ReloadOutcome;
  /** What a client with this identity would receive now. */
  preview(client: PreviewRequest): Preview;
  /** Ends every stream and closes every listener and source. */
  stop(): Promise<void>;
}

/** What a reload did: applied, or refused with the reason (the running configuration stays). */
export type ReloadOutcome =
  { readonly applied: true } | { readonly applied: false; readonly error: MeshmuxError };

/** A client described by hand, for previews. */
export interface PreviewRequest {
  readonly nodeId: string;
  readonly metadata: Readonly<Record<string, string>>;
  /** Peer IP address; default 127.0.0.1. */
  readonly peer?: string;
  /** SANs of a client certificate (`URI:spiffe://...`). */
  readonly sans?: readonly string[];
}

/** A stable description of how a source reaches its upstream: everything but its merge rules. */
function fingerprint(config: SourceConfig): string {
  const {
    priority: _p,
    allow: _a,
    deny: _d,
    onEmpty: _e,
    maxStale: _s,
    maxDeleteRatio: _r,
    confirmAfter: _c,
    settle: _t,
    required: _q,
    ...rest
  } = config;
  return JSON.stringify(rest);
}

/** A source of a new configuration, built but not yet running; `source` is set when it is new. */
interface PlannedInput {
  readonly name: string;
  readonly fingerprint: string;
  readonly input: MergeInput;
  readonly source: UpstreamSource | undefined;
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
      ...(c.vanishGrace === undefined ? {} : { vanishGraceMs: c.vanishGrace }),
      ...(c.maxFileSize === undefined ? {} : { maxFileBytes: c.maxFileSize }),
    }),
  git: (c) =>
    new GitSource({
      name: c.name,
      url: c.url,
      ref: c.ref,
      paths: c.paths,
      defaultNamespace: c.namespace,
      intervalMs: c.interval,
      strict: c.strict,
      timeoutMs: c.timeout,
      credentials: {
        sshKey: c.sshKey,
        knownHosts: c.knownHosts,
        tokenFile: c.tokenFile,
        tokenEnv: c.tokenEnv,
        tokenUser: c.tokenUser,
      },
      webhookSecret: { file: c.webhook?.secretFile, env: c.webhook?.secretEnv },
      cacheDir: c.cacheDir,
      maxFileBytes: c.maxFileSize,
    }),
  zookeeper: (c) =>
    new ZookeeperSource({
      name: c.name,
      servers: c.servers,
      root: c.root,
      namespace: c.namespace,
      sessionTimeoutMs: c.sessionTimeout,
      ...(c.auth === undefined ? {} : { auth: c.auth }),
      hostTemplate: c.host,
      endpoints: c.endpoints,
      ...(c.interfaces === undefined ? {} : { interfaces: c.interfaces }),
      ...(c.applications === undefined ? {} : { applications: c.applications }),
      ...(c.labelParameters === undefined ? {} : { labelParameters: c.labelParameters }),
      debounceMs: c.debounce,
    }),
  xds: (c) => new XdsSource(c),
  mcp: (c) => new McpSource(c),
  'mcp-sink': (c) => new McpSinkSource(c),
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
    settleMs: config.settle,
    required: config.required,
  };
}

function createSource(config: SourceConfig): UpstreamSource {
  // TypeScript cannot correlate `config.type` with the entry's parameter; the mapped type above does.
  const factory = SOURCE_FACTORIES[config.type] as (c: SourceConfig) => UpstreamSource;
  return factory(config);
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
  overrides: {
    xds?: string;
    xdsTls?: string;
    http?: string;
    log?: Logger;
    env?: TracingEnv;
    /** Bytes of responses in flight over all streams (benchmarks); default the ADS server's. */
    writeBudget?: Partial<WriteBudgetOptions>;
  } = {},
): Promise<RunningMeshmux> {
  const log = overrides.log ?? componentLogger('app');
  const tracing = tracingFromEnv(overrides.env ?? process.env, componentLogger('tracing'));
  const telemetry = new Telemetry({
    kindOf: (typeUrl) => KINDS.resolveTypeUrl(typeUrl)?.kind.key,
    clients: () => ads.reports(),
    ...(tracing === undefined ? {} : { tracing }),
  });
  const metrics = telemetry.metrics;
  const meshConfig = encodeMeshConfig(config);
  // Sampled every 10 ms for /debug/counters; the cost is one timer.
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const audit = componentLogger('audit');
  const gitSources = new Map<string, GitSource>();
  const running = new Map<string, { fingerprint: string; input: MergeInput }>();
  /**
   * Builds the merge inputs of a configuration, reusing running sources whose upstream settings
   * did not change. Changes nothing: sources are cold until the merge subscribes, so a plan that
   * is dropped leaves nothing behind. Throws when a source cannot be built.
   */
  const planInputs = (c: MeshmuxConfig): PlannedInput[] =>
    c.sources.map((sc) => {
      const fp = fingerprint(sc);
      const policy = sourcePolicy(sc);
      const kept = running.get(sc.name);
      if (kept?.fingerprint === fp) {
        return { name: sc.name, fingerprint: fp, input: { ...kept.input, policy }, source: undefined };
      }
      const source = createSource(sc);
      const input = { descriptor: source.descriptor, events$: source.events$, fingerprint: fp, policy };
      return { name: sc.name, fingerprint: fp, input, source };
    });
  /** Makes planned inputs the running ones. */
  const commitInputs = (planned: readonly PlannedInput[]): MergeInput[] => {
    const names = new Set(planned.map((p) => p.name));
    for (const name of running.keys()) {
      if (names.has(name)) continue;
      running.delete(name);
      gitSources.delete(name);
    }
    for (const p of planned) {
      running.set(p.name, { fingerprint: p.fingerprint, input: p.input });
      if (p.source === undefined) continue;
      if (p.source instanceof GitSource) gitSources.set(p.name, p.source);
      else gitSources.delete(p.name);
    }
    return planned.map((p) => p.input);
  };
  const inputs = commitInputs(planInputs(config));
  const reloads = new ConfigReloads(new Date());
  reloads.register(metrics.registry);
  const stateMetrics = new StateMetrics(metrics.registry);
  const persisted = await openRecordStore(
    config.state.dir,
    overrides.env ?? process.env,
    componentLogger('state'),
    {
      onWrite: (source, bytes) => stateMetrics.onWrite(source, bytes),
      onWriteError: (source, error) => stateMetrics.onWriteError(source, error),
      onLoadError: () => stateMetrics.onLoadError(),
      onStoreUp: (up) => stateMetrics.onStoreUp(up),
      onWriter: (writer) => stateMetrics.onWriter(writer),
    },
    config.state.etcd,
  );
  let policies = new PolicySet(config.policies);
  let policyConfig = JSON.stringify(config.policies);
  const engine = new MergeEngine(
    inputs,
    {
      syncTimeoutMs: config.syncTimeout,
      restored: persisted.restored,
      ...(persisted.store === undefined ? {} : { store: persisted.store }),
      semanticKeys: semanticKeysOf,
      semanticConflicts: config.merge.semanticConflicts,
      log: componentLogger('merge'),
    },
    {
      onSnapshot: (snapshot, _changed, buildMs) => telemetry.onSnapshot(snapshot, buildMs),
      onSourceEvent: (source, event) => telemetry.onSourceEvent(source, event),
      onUnchanged: () => telemetry.onUnchanged(),
      onHeld: (source, reason) => telemetry.onHeld(source, reason),
    },
  );
  const ads = new AdsServer({
    reader: engine,
    kinds: KINDS,
    log: componentLogger('ads'),
    meshConfig: () => meshConfig,
    policies,
    ...(overrides.writeBudget === undefined ? {} : { writeBudget: overrides.writeBudget }),
    limits: {
      sendTimeoutMs: config.server.sendTimeout,
      maxTypesPerStream: config.server.maxTypesPerStream,
      maxNodeIdLength: config.server.maxNodeIdLength,
      maxMetadataBytes: config.server.maxMetadataBytes,
    },
    maxViews: config.server.maxViews,
    viewGraceMs: config.server.viewGrace,
    hooks: {
      onAdmit: (client, policy, view, first) =>
        audit.info(
          { event: first ? 'admit' : 'reassign', policy, view, client: describeIdentity(client) },
          'client admitted',
        ),
      onRefuse: (client, policy, reason) =>
        audit.warn({ event: 'refuse', policy, client: describeIdentity(client), reason }, 'client refused'),
      onConnect: (client) => telemetry.onConnect(client),
      onDisconnect: (client, reason) => telemetry.onDisconnect(client, reason),
      onPush: (client, typeUrl, version, bytes, resources) =>
        telemetry.onPush(client, typeUrl, version, bytes, resources),
      onAck: (client, typeUrl, version, latencyMs) => telemetry.onAck(client, typeUrl, version, latencyMs),
      onNack: (client, typeUrl, version, message) => telemetry.onNack(client, typeUrl, version, message),
      onBadRequest: () => telemetry.onBadRequest(),
      onLimit: (_client, limit) => telemetry.onLimit(limit),
    },
  });
  const http = new HttpServer({
    reader: engine,
    log: componentLogger('http'),
    statusPage: () => renderStatusPage(engine.current(), ads.reports(), { reloadFailure: reloads.failure() }),
    metrics: async () => ({
      contentType: metrics.registry.contentType,
      body: await metrics.registry.metrics(),
    }),
    debugPages: {
      configz: () => configz(engine),
      syncz: () => ads.reports(),
      sources: () => engine.current().sources.map(describeSource),
      counters: () => ({ ...ads.counters(), process: processCounters(loopDelay) }),
      rejections: () => engine.current().sources.flatMap((s) => s.rejections),
      conflicts: () => engine.current().conflicts,
      git: () => [...gitSources.values()].map((s) => s.status()),
      state: () => ({
        dir: persisted.local?.dir ?? 'none',
        files: persisted.local?.report() ?? [],
        ...(persisted.shared === undefined ? {} : { etcd: persisted.shared.report() }),
        problems: persisted.problems.map((e) => e.describe()),
      }),
      preview: (url) => preview(previewRequestFromUrl(url)),
    },
    actions: [
      {
        // Starts a new event-loop delay window (benchmarks measure one phase at a time).
        pattern: /^\/debug\/counters\/reset$/,
        handle: () => {
          loopDelay.reset();
          return { status: 200, body: { reset: true } };
        },
      },
      {
        pattern: /^\/hooks\/git\/([^/]+)$/,
        handle: (match, body, headers) =>
          handleGitWebhook(gitSources, { source: match[1] ?? '', headers, body }),
      },
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
  const preview = (request: PreviewRequest): Preview => {
    const anon = anonymousIdentity(0, `${request.peer ?? '127.0.0.1'}:0`, request.sans ?? []);
    return previewClient(engine.current(), policies, KINDS, withNode(anon, request.nodeId, request.metadata));
  };
  engine.start();
  const xdsPort = await ads.listen(overrides.xds ?? config.server.xds);
  const tls = config.server.tls;
  const xdsTlsAddress = overrides.xdsTls ?? config.server.xdsTls;
  const xdsTlsPort =
    tls === undefined || xdsTlsAddress === undefined
      ? undefined
      : await ads.listen(
          xdsTlsAddress,
          await reloadingServerCredentials({
            cert: tls.cert,
            key: tls.key,
            clientCa: tls.clientCa,
            refreshIntervalMs: tls.refreshInterval,
          }),
        );
  const httpPort = await http.listen(overrides.http ?? config.server.http);
  log.info({ sources: config.sources.map((s) => s.name), xdsPort, xdsTlsPort, httpPort }, 'meshmux started');
  let current = config;
  return {
    xdsPort,
    ...(xdsTlsPort === undefined ? {} : { xdsTlsPort }),
    httpPort,
    engine,
    ads,
    metrics,
    preview,
    reload(load: MeshmuxConfig | (() => MeshmuxConfig)): ReloadOutcome {
      const at = new Date();
      // Build: read the file, then every part that can fail, before anything running changes.
      let next: MeshmuxConfig;
      let planned: PlannedInput[];
      let nextPolicies: PolicySet | undefined;
      const nextPolicyConfig = (c: MeshmuxConfig): string => JSON.stringify(c.policies);
      try {
        next = typeof load === 'function' ? load() : load;
        encodeMeshConfig(next);
        nextPolicies = nextPolicyConfig(next) === policyConfig ? undefined : new PolicySet(next.policies);
        planned = planInputs(next);
      } catch (err) {
        const error = toMeshmuxError(err, 'CONFIG', { file: current.origin });
        const problems = configProblems(error);
        reloads.failed(problems, at);
        log.error(
          { errors: problems.map((p) => p.describe()) },
          'configuration not reloaded; the running one stays',
        );
        return { applied: false, error };
      }
      // Swap.
      if (
        JSON.stringify(next.server) !== JSON.stringify(current.server) ||
        JSON.stringify(next.mesh) !== JSON.stringify(current.mesh)
      ) {
        log.warn('server and mesh settings change only on restart; sources and policies are applied now');
      }
      engine.reconfigure(commitInputs(planned));
      if (nextPolicies !== undefined) {
        audit.info(
          { event: 'policy-change', from: policies.names(), to: next.policies.map((p) => p.name) },
          'policies changed',
        );
        policies = nextPolicies;
        policyConfig = nextPolicyConfig(next);
        ads.setPolicies(policies);
      }
      current = next;
      reloads.succeeded(at);
      return { applied: true };
    },
    async stop() {
      loopDelay.disable();
      await ads.close();
      await http.close();
      engine.stop();
      // The last state is written before the folder is released.
      await persisted.close();
      await telemetry.shutdown();
    },
  };
}

/** `/debug/preview?node=ID&meta.K=V&peer=IP&san=URI:...` */
function previewRequestFromUrl(url: URL): PreviewRequest {
  const metadata: Record<string, string> = {};
  for (const [k, v] of url.searchParams) if (k.startsWith('meta.')) metadata[k.slice(5)] = v;
  const peer = url.searchParams.get('peer');
  return {
    nodeId: url.searchParams.get('node') ?? '',
    metadata,
    ...(peer === null ? {} : { peer }),
    sans: url.searchParams.getAll('san'),
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
    required: s.required,
    restoredFrom: s.restoredFrom?.toISOString(),
    missingKinds: s.missingKinds,
    counts: s.counts,
    errors: s.errors.map((e) => e.describe()),
    warnings: s.warnings.map((e) => e.describe()),
  };
}
