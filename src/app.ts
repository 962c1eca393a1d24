import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { isDeepStrictEqual } from 'node:util';
import { appendAll } from './core/append-all.js';
import { fitMarkingToCpu } from './core/concurrent-marking.js';
import { MeshmuxError, toMeshmuxError } from './core/errors.js';
import { heapCollections } from './core/heap-collections.js';
import { filter, take } from './core/rx.js';
import { settleWithin } from './core/settle-within.js';
import { componentLogger, type Logger } from './core/logger.js';
import type { ConfigResource } from './core/resource.js';
import { AdsServer } from './downstream/ads-server.js';
import { anonymousIdentity, type ClientIdentity, withNode } from './downstream/client-identity.js';
import { PolicyChanges } from './downstream/policy/policy-changes.js';
import { KnownClients } from './downstream/policy/known-clients.js';
import {
  type ClientHolding,
  holdingsUnder,
  type PolicyGuardRules,
} from './downstream/policy/policy-guard.js';
import { PolicySet } from './downstream/policy/policy-set.js';
import { previewClient, type Preview } from './downstream/preview.js';
import type { WriteBudgetOptions } from './downstream/write-budget.js';
import { AdminGuard } from './http/admin-guard.js';
import { debugActions, debugPages, hookActions, type DebugPageSources } from './http/debug-pages.js';
import { HttpServer } from './http/http-server.js';
import { MergeEngine, type MergeInput } from './merge/merge-engine.js';
import type { SourceRecord } from './merge/source-record.js';
import { semanticRuleOf } from './schema/semantic-keys.js';
import { KINDS } from './schema/kinds.js';
import { messageType } from './schema/proto-root.js';
import { encodeProtoJson } from './schema/proto-json.js';
import {
  configError,
  configProblems,
  parsePolicies,
  type PolicyConfig,
  restartOnlyChanges,
  type MeshmuxConfig,
  type SourceConfig,
} from './settings/meshmux-config.js';
import { sameConnection, sourcePolicy } from './settings/merge-rules.js';
import { renderStatusPage } from './http/status-page.js';
import { ConfigReloads } from './telemetry/config-reloads.js';
import type { Metrics } from './telemetry/metrics.js';
import { StateMetrics } from './telemetry/state-metrics.js';
import { ServerTlsReadMetrics } from './telemetry/server-tls-reads.js';
import { hostOfAddress } from './core/loopback.js';
import { openRecordStore } from './state/open-record-store.js';
import type { EtcdPolicyRecords } from './state/etcd-policy-records.js';
import {
  POLICY_RECORD_FILE,
  type PolicyRecord,
  PolicyRecordFile,
  readPolicyRecord,
  type RecordedClient,
} from './state/policy-record.js';
import { ReplicaDecisions } from './state/replica-decisions.js';
import { processCounters } from './telemetry/process-counters.js';
import { Telemetry } from './telemetry/telemetry.js';
import { tracingFromEnv, type TracingEnv } from './telemetry/tracing-env.js';
import {
  reloadingServerCredentials,
  serverTlsProblems,
  type ServerTlsFiles,
  type ServerTlsReads,
} from './tls/server-tls.js';
import { createSource, loadSourceLibraries, type SourceHooks } from './upstream/source-registry.js';
import type { UpstreamSource } from './upstream/upstream-source.js';

/** A running meshmux: its bound ports and a way to stop it. */
export interface RunningMeshmux {
  readonly xdsPort: number;
  /** The TLS ADS port, when `server.xdsTls` is configured. */
  readonly xdsTlsPort?: number;
  readonly httpPort: number;
  /** The admin listener: status page, `/debug/*`, confirmations. */
  readonly adminPort: number;
  readonly engine: MergeEngine;
  readonly ads: AdsServer;
  readonly metrics: Metrics;
  /**
   * Applies a new configuration without a restart: sources and policies change in place; clients
   * whose view changed receive the difference, the others nothing. Every other setting (`server`,
   * `mesh`, `state`, `merge`, `syncTimeout`) applies only on restart: a warning names each one the
   * new configuration sets otherwise than the process started with, and the status page shows them
   * until a restart, or an edit that takes them back. Given a function, calls it to read the
   * configuration, so a file that cannot be read or parsed counts as a failed reload too.
   * Everything new (sources, policies) is built before anything is swapped: on any error nothing
   * changes, no stream is touched, and the error is returned, logged, shown on the status page and
   * in `meshmux_config_last_reload_successful`. Reloads run one at a time, in the order asked.
   * Never rejects.
   */
  reload(config: MeshmuxConfig | (() => MeshmuxConfig)): Promise<ReloadOutcome>;
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

/** A source of a new configuration, built but not yet running; `source` is set when it is new. */
interface PlannedInput {
  readonly config: SourceConfig;
  readonly fingerprint: string;
  readonly input: MergeInput;
  /** The source it runs: the running one when its connection did not change. */
  readonly source: UpstreamSource;
}

/**
 * Encodes the configured MeshConfig once; a config error names the field. Each field it drops (a
 * field MeshConfig does not have at that place, or a second spelling of one) is appended to
 * `warnings`: a start never refused them, so they stay no error, but most are typos.
 */
function encodeMeshConfig(config: MeshmuxConfig, warnings: MeshmuxError[]): Uint8Array | undefined {
  if (config.mesh === undefined) return undefined;
  try {
    return encodeProtoJson(messageType('istio.mesh.v1alpha1.MeshConfig'), config.mesh, {
      path: 'mesh',
      onPruned: (field: string) =>
        warnings.push(
          new MeshmuxError('CONFIG', 'ignored: no such field in MeshConfig, or a second spelling of one', {
            file: config.origin,
            field,
          }),
        ),
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
 * Says what each read of a listener's TLS files found, in the log and in the metric of `listener`
 * (`server.xdsTls`, an `mcp-sink` source's name).
 */
function serverTlsReads(metrics: ServerTlsReadMetrics, log: Logger, listener: string): ServerTlsReads {
  return {
    listening: () => metrics.listening(listener),
    closed: () => metrics.closed(listener),
    failed: (problem) => {
      metrics.failed(listener);
      log.warn(
        { err: problem.describe() },
        'server TLS files unusable as read: new connections keep the last usable certificate',
      );
    },
    recovered: () => {
      metrics.recovered(listener);
      log.info('server TLS files usable again: new connections get them');
    },
  };
}

/** The TLS files of the ADS listener, as the configuration names them. */
function serverTlsFiles(tls: NonNullable<MeshmuxConfig['server']['tls']>): ServerTlsFiles {
  return {
    cert: tls.cert,
    key: tls.key,
    clientCa: tls.clientCa,
    refreshIntervalMs: tls.refreshInterval,
    field: 'server.tls',
  };
}

/** A configuration checked beyond its schema: what only encoding its sections and reading its files tells. */
export interface CheckedConfig {
  /** The MeshConfig istiods are answered with, encoded once; undefined without a `mesh` section. */
  readonly meshConfig: Uint8Array | undefined;
  /** What is accepted but ignored (fields of the mesh section MeshConfig does not have), each naming file and field. */
  readonly warnings: readonly MeshmuxError[];
}

/**
 * Checks what the schema cannot, the same way for `meshmux check-config`, a start and a reload, so
 * that a configuration they accept also starts: the mesh section encodes as a MeshConfig, and the
 * PEM files of `server.tls` can be read and make a TLS identity. Throws one CONFIG error whose
 * `configProblems` name each file and field.
 */
export async function checkBeyondSchema(config: MeshmuxConfig): Promise<CheckedConfig> {
  const problems: MeshmuxError[] = [];
  const warnings: MeshmuxError[] = [];
  let meshConfig: Uint8Array | undefined;
  try {
    meshConfig = encodeMeshConfig(config, warnings);
  } catch (err) {
    problems.push(toMeshmuxError(err, 'CONFIG', { file: config.origin }));
  }
  if (config.server.tls !== undefined) {
    appendAll(problems, await serverTlsProblems(serverTlsFiles(config.server.tls)));
  }
  appendAll(problems, await sourceProblems(config));
  if (problems.length > 0) throw configError(config.origin, 'invalid configuration', problems);
  return { meshConfig, warnings };
}

/**
 * What keeps a source from being built, each naming its field (a kubeconfig that cannot be read or
 * names no cluster for the context asked for): a start would fail on it. Builds each source and
 * drops it: sources are cold until the merge subscribes, so nothing is dialled or read beyond
 * what building one reads.
 */
async function sourceProblems(config: MeshmuxConfig): Promise<MeshmuxError[]> {
  try {
    await loadSourceLibraries(config.sources);
  } catch (err) {
    return [toMeshmuxError(err, 'CONFIG', { file: config.origin, field: 'sources' })];
  }
  return config.sources.flatMap((sc, i) => {
    try {
      createSource(sc);
      return [];
    } catch (err) {
      const kubeconfig = sc.type === 'kubernetes' ? sc.kubeconfig : undefined;
      return [
        toMeshmuxError(err, 'CONFIG', {
          file: kubeconfig ?? config.origin,
          field: kubeconfig === undefined ? `sources[${i}]` : `sources[${i}].kubeconfig`,
        }),
      ];
    }
  });
}

/** Logs each thing a configuration has that is accepted but ignored, naming its file and field. */
function logIgnored(log: Logger, checked: CheckedConfig): void {
  for (const w of checked.warnings) log.warn({ file: w.location.file, field: w.location.field }, w.message);
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
    /** The admin listener's address (its token file stays the configuration's). */
    admin?: string;
    log?: Logger;
    env?: TracingEnv;
    /** Bytes of responses in flight over all streams (benchmarks); default the ADS server's. */
    writeBudget?: Partial<WriteBudgetOptions>;
  } = {},
): Promise<RunningMeshmux> {
  const log = overrides.log ?? componentLogger('app');
  // Before anything starts: a configuration that cannot start leaves nothing to tear down.
  const checked = await checkBeyondSchema(config);
  const meshConfig = checked.meshConfig;
  logIgnored(log, checked);
  const marking = fitMarkingToCpu();
  if (!marking.concurrent && !marking.explicit) {
    log.info(
      { cpus: marking.budget.cpus, boundBy: marking.budget.boundBy },
      'fewer than two CPUs: V8 marks the heap on the main thread only (node --concurrent-marking keeps its threads)',
    );
  }
  const tracing = await tracingFromEnv(overrides.env ?? process.env, componentLogger('tracing'));
  const telemetry: Telemetry = new Telemetry({
    kindOf: (typeUrl) => KINDS.resolveTypeUrl(typeUrl)?.kind.key,
    clients: () => ads.reports(),
    ...(tracing === undefined ? {} : { tracing }),
  });
  const metrics = telemetry.metrics;
  // Sampled every 10 ms for /debug/counters; the cost is one timer.
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  // The heap's collections are counted from here on, for the same counters.
  heapCollections();
  /** The running sources by name, with the configuration they run with. */
  const running = new Map<string, PlannedInput>();
  let connections = 0;
  const tlsReads = new ServerTlsReadMetrics(metrics.registry);
  const sourceHooks: SourceHooks = {
    // A listening source's TLS files are a listener's, labelled with the source's name.
    tlsReads: (name) => serverTlsReads(tlsReads, log.child({ source: name }), name),
  };
  /**
   * Builds the merge inputs of a configuration, keeping each running source whose connection did
   * not change (only its merge rules are new). Changes nothing: sources are cold until the merge
   * subscribes, so a plan that is dropped leaves nothing behind. A source built anew starts from
   * `recordOf` its name: the stored record at a start, what the merge holds on a reload. Throws
   * when a source cannot be built.
   */
  const planInputs = (
    c: MeshmuxConfig,
    recordOf: (source: string) => SourceRecord | undefined,
  ): PlannedInput[] =>
    c.sources.map((sc) => {
      const policy = sourcePolicy(sc.rules);
      const kept = running.get(sc.name);
      if (kept !== undefined && sameConnection(kept.config, sc)) {
        return { ...kept, config: sc, input: { ...kept.input, policy } };
      }
      const source = createSource(sc, () => restoredObjects(recordOf(sc.name), sc), sourceHooks);
      // An opaque id per connection: the merge resubscribes a source when it changes.
      const fingerprint = `${sc.name}#${++connections}`;
      return {
        config: sc,
        fingerprint,
        source,
        input: { descriptor: source.descriptor, events$: source.events$, fingerprint, policy },
      };
    });
  /** Makes planned inputs the running ones. */
  const commitInputs = (planned: readonly PlannedInput[]): MergeInput[] => {
    running.clear();
    for (const p of planned) running.set(p.config.name, p);
    return planned.map((p) => p.input);
  };
  await loadSourceLibraries(config.sources);
  // Sources start once the merge subscribes, after the records are read.
  const inputs = commitInputs(planInputs(config, (name) => persisted.restored.get(name)));
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
      onPutBack: (source) => stateMetrics.onPutBack(source),
      onStoreUp: (up) => stateMetrics.onStoreUp(up),
      onWriter: (writer) => stateMetrics.onWriter(writer),
      // Replicas serve an object under the creation time the writer gave it (byte-identical responses).
      onRecord: (record) => engine.adoptCreateTimes(record),
    },
    config.state.etcd,
  );
  // The istiods a change of the policies is judged for: this process's, the last run's, and with
  // etcd every replica's (their records, kept up to date by a watch).
  const knownClients = new KnownClients([], 0, Date.now());
  const policyShared = persisted.shared?.openPolicyRecords((_replica, record) =>
    knownClients.merge(seenHere(record, Date.now()), Date.now()),
  );
  const configuredPolicies = plainPolicies(config.policies);
  // The policies a restart serves until it has judged the configured ones for the istiods the last
  // run served: those it ran under, when the state folder or etcd kept them.
  const { last: recordedPolicies, problem: policyRecordProblem } = await policiesOfLastRun(
    persisted.local?.dir,
    policyShared,
    configuredPolicies,
    log,
  );
  if (recordedPolicies !== undefined) knownClients.merge(recordedPolicies.clients, Date.now());
  const startPolicies =
    recordedPolicies !== undefined && !isDeepStrictEqual(recordedPolicies.configs, configuredPolicies)
      ? recordedPolicies
      : undefined;
  const policyFile =
    persisted.local === undefined ? undefined : new PolicyRecordFile(persisted.local.dir, log);
  const observeConnected = (): ClientIdentity[] => {
    const connected = ads.holdings().map((h) => h.client);
    knownClients.observe(connected, Date.now());
    return connected;
  };
  /** The istiods a change of the policies is judged for: connected now, or lately (see KnownClients). */
  const judgedClients = (): ClientHolding[] =>
    holdingsUnder(policyChanges.set, knownClients.identities(observeConnected()));
  let recordedMembership = -1;
  let recordedConfigs: unknown;
  let recordedAtMs = Number.NEGATIVE_INFINITY;
  /**
   * Keeps the policies in force and the istiods known, when either changed, and now and then
   * anyway (when each istiod was last seen moves on: the other replicas age them by it); `always`
   * at a stop. An istiod that came must be on record within a second: another replica judges a
   * change of the policies for the istiods it finds there. The record is bounded (see
   * KnownClients), so a fleet that churns costs at most that much a second.
   */
  const recordPolicies = (always = false): void => {
    if (policyFile === undefined && policyShared === undefined) return;
    observeConnected();
    const nowMs = Date.now();
    if (
      !always &&
      knownClients.membership === recordedMembership &&
      policyChanges.configs === recordedConfigs &&
      nowMs - recordedAtMs < POLICY_RECORD_REFRESH_MS
    ) {
      return;
    }
    recordedMembership = knownClients.membership;
    recordedConfigs = policyChanges.configs;
    recordedAtMs = nowMs;
    const record: PolicyRecord = {
      savedAt: new Date(nowMs).toISOString(),
      policies: policyChanges.configs,
      clients: knownClients.toRecord(),
    };
    policyFile?.write(record);
    policyShared?.write(record);
  };
  const engine: MergeEngine = new MergeEngine(
    inputs,
    {
      syncTimeoutMs: config.syncTimeout,
      restored: persisted.restored,
      ...(persisted.store === undefined ? {} : { store: persisted.store }),
      keepWaitMs: config.state.keepWait,
      semanticRules: semanticRuleOf,
      semanticConflicts: config.merge.semanticConflicts,
      log: componentLogger('merge'),
    },
    telemetry,
  );
  const ads: AdsServer = new AdsServer({
    reader: engine,
    kinds: KINDS,
    log: componentLogger('ads'),
    meshConfig: () => meshConfig,
    policies: (startPolicies ?? { set: new PolicySet(configuredPolicies) }).set,
    ...(overrides.writeBudget === undefined ? {} : { writeBudget: overrides.writeBudget }),
    limits: {
      sendTimeoutMs: config.server.sendTimeout,
      maxTypesPerStream: config.server.maxTypesPerStream,
      maxNodeIdLength: config.server.maxNodeIdLength,
      maxMetadataBytes: config.server.maxMetadataBytes,
      maxRequestBytes: config.server.maxRequestBytes,
      firstRequestTimeoutMs: config.server.firstRequestTimeout,
      maxStreamsPerConnection: config.server.maxStreamsPerConnection,
    },
    maxViews: config.server.maxViews,
    viewGraceMs: config.server.viewGrace,
    hooks: telemetry,
  });
  const policyChanges = new PolicyChanges({
    running:
      startPolicies === undefined
        ? { set: ads.policies, configs: configuredPolicies }
        : { set: startPolicies.set, configs: startPolicies.configs },
    rules: policyGuardRules(config.policyGuard),
    snapshot: () => engine.current(),
    holdings: judgedClients,
    apply: (set, configs) => {
      telemetry.onPoliciesChanged(
        ads.policies.names(),
        configs.map((p) => p.name),
      );
      ads.setPolicies(set);
      recordPolicies();
    },
    onHeld: (held) => {
      telemetry.onPolicyChangeHeld(
        held === undefined ? undefined : Math.max(0, ...held.losses.map((l) => l.lost)),
      );
      // A confirmation another replica made before this one held the same change applies now.
      if (held !== undefined) queueMicrotask(() => decisions?.retry());
    },
    log: componentLogger('policies'),
  });
  /** The configuration applied last. */
  let current = config;
  // A restart whose configuration changed the policies judges the change, once the merge serves
  // what the last run did, for the istiods the last run served. Until then a reload's policies
  // wait for that judgement, which takes the latest configured.
  let startJudged = startPolicies === undefined;
  const judgedAtStart =
    startPolicies === undefined
      ? undefined
      : engine.snapshots$
          .pipe(
            // Or once the startup budget passed: a required source that never answers must not
            // freeze the policies at the last run's.
            filter((s) => s.ready || s.budgetPassed),
            take(1),
          )
          .subscribe((s) => {
            startJudged = true;
            const configured = plainPolicies(current.policies);
            const outcome = policyChanges.propose(new PolicySet(configured), configured);
            log.info(
              { outcome, ready: s.ready },
              'the configured policies, changed since the last run, judged',
            );
          });
  if (startPolicies !== undefined) {
    log.warn(
      {
        inForce: startPolicies.configs.map((p) => p.name),
        configured: configuredPolicies.map((p) => p.name),
      },
      "the configured policies differ from the last run's: serving under those until the merge is ready (or syncTimeout passes), then judging the change for the istiods the last run served",
    );
  }
  const policyRecordTimer = setInterval(() => recordPolicies(), POLICY_RECORD_INTERVAL_MS);
  policyRecordTimer.unref();
  // Decisions made on another replica (confirmations, push notifications) applied here.
  const decisions =
    persisted.shared === undefined
      ? undefined
      : new ReplicaDecisions(
          {
            confirmHeld: (source, digest) =>
              source === POLICIES_SIGNAL
                ? policyChanges.confirmHeld(digest)
                : engine.confirmHeld(source, digest),
          },
          (name) => running.get(name)?.source.refresh?.('another replica received a push notification'),
          componentLogger('replicas'),
        );
  const signals =
    decisions === undefined ? undefined : persisted.shared?.openSignals((s) => decisions.onSignal(s));
  if (decisions !== undefined) engine.snapshots$.subscribe(() => decisions.retry());
  const sources: DebugPageSources = {
    snapshot: () => engine.current(),
    clients: () => ads.reports(),
    counters: () => ({ ...ads.counters(), process: processCounters(loopDelay) }),
    resetCounters: () => loopDelay.reset(),
    state: () => ({
      dir: persisted.local?.dir ?? 'none',
      files: persisted.local?.report() ?? [],
      ...(persisted.shared === undefined
        ? {}
        : { etcd: persisted.shared.report(), confirmationsFromOtherReplicas: decisions?.report() ?? [] }),
      problems: [
        ...persisted.problems,
        ...(policyRecordProblem === undefined ? [] : [policyRecordProblem]),
      ].map((e) => e.describe()),
    }),
    preview: (query) => preview(query),
    details: (type) =>
      [...running.values()].flatMap((p) =>
        p.config.type === type && p.source.details !== undefined ? [p.source.details()] : [],
      ),
    notifiable: (type, name) => {
      const p = running.get(name);
      if (p?.config.type !== type || p.source.notify === undefined) return undefined;
      return p.source.notificationRefusal?.() ?? 'ready';
    },
    notify: (type, name, notification) => {
      const p = running.get(name);
      const answer = p?.config.type === type ? p.source.notify?.(notification) : undefined;
      // An accepted notification makes every replica fetch, not only the one it reached.
      return answer?.then((a) => {
        if (a.status === 202) void signals?.send({ kind: 'refresh', source: name });
        return a;
      });
    },
    policies: () => policyChanges.report(),
    confirmPolicies: () => {
      const digest = policyChanges.report().held?.digest;
      const confirmed = policyChanges.confirm();
      // Every replica holding the same change applies it too.
      if (confirmed && digest !== undefined) {
        void signals?.send({ kind: 'confirm', source: POLICIES_SIGNAL, digest });
      }
      return confirmed;
    },
    confirm: (name) => {
      if (!engine.has(name)) return undefined;
      const digest = engine.current().sources.find((s) => s.name === name)?.held?.digest;
      const confirmed = engine.confirm(name);
      // Every replica holding the same update applies it too.
      if (confirmed && digest !== undefined) void signals?.send({ kind: 'confirm', source: name, digest });
      return confirmed;
    },
  };
  const metricsPage = async (): Promise<{ contentType: string; body: string }> => ({
    contentType: metrics.registry.contentType,
    body: await metrics.registry.metrics(),
  });
  const adminAddress = overrides.admin ?? config.server.admin.address;
  const admin = new HttpServer({
    name: 'admin',
    reader: engine,
    log: componentLogger('http'),
    guard: new AdminGuard({ host: hostOfAddress(adminAddress), tokenFile: config.server.admin.tokenFile }),
    onRefused: (refusal) => metrics.onAdminRefused(refusal.reason),
    statusPage: () =>
      renderStatusPage(engine.current(), ads.reports(), {
        reloadFailure: reloads.failure(),
        restartPending: reloads.pendingRestart,
        configLoadedAt: reloads.loadedAt,
        heldPolicies: policyChanges.report().held,
        dashboardUrl: config.server.admin.dashboardUrl,
      }),
    metrics: metricsPage,
    debugPages: debugPages(sources),
    actions: debugActions(sources),
  });
  // What Prometheus and the kubelet read, and the git forges' webhooks: no objects, no actions.
  const http = new HttpServer({
    name: 'http',
    reader: engine,
    log: componentLogger('http'),
    metrics: metricsPage,
    debugPages: {},
    actions: hookActions(sources),
  });
  const preview = (request: PreviewRequest): Preview => {
    const anon = anonymousIdentity(0, `${request.peer ?? '127.0.0.1'}:0`, request.sans ?? []);
    return previewClient(
      engine.current(),
      policyChanges.set,
      KINDS,
      withNode(anon, request.nodeId, request.metadata),
    );
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
          await reloadingServerCredentials(
            serverTlsFiles(tls),
            serverTlsReads(tlsReads, log, 'server.xdsTls'),
          ),
        );
  const httpPort = await http.listen(overrides.http ?? config.server.http);
  const adminPort = await admin.listen(adminAddress);
  log.info(
    { sources: config.sources.map((s) => s.name), xdsPort, xdsTlsPort, httpPort, adminPort },
    'meshmux started',
  );
  let reloading: Promise<void> = Promise.resolve();
  const reloadNow = async (load: MeshmuxConfig | (() => MeshmuxConfig)): Promise<ReloadOutcome> => {
    const at = new Date();
    // Build: read the file, then every part that can fail, before anything running changes.
    let next: MeshmuxConfig;
    let planned: PlannedInput[];
    let nextPolicies: PolicySet | undefined;
    try {
      next = typeof load === 'function' ? load() : load;
      await loadSourceLibraries(next.sources);
      logIgnored(log, await checkBeyondSchema(next));
      nextPolicies = isDeepStrictEqual(next.policies, current.policies)
        ? undefined
        : new PolicySet(plainPolicies(next.policies));
      // A source run anew starts from what it holds, as after a restart: a file broken now keeps
      // the objects it held.
      planned = planInputs(next, (name) => engine.record(name));
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
    // Compared with the configuration the process started with, not the last one applied: a
    // change waiting for a restart is named again by every reload until then, and one that an
    // edit takes back is no longer named.
    const restartOnly = restartOnlyChanges(config, next);
    if (restartOnly.length > 0) {
      log.warn(
        { restartOnly, file: next.origin },
        'settings that apply only on restart changed; they keep their running values, sources and policies are applied now',
      );
    }
    engine.reconfigure(commitInputs(planned));
    policyChanges.setRules(policyGuardRules(next.policyGuard));
    if (nextPolicies !== undefined && startJudged) {
      policyChanges.propose(nextPolicies, plainPolicies(next.policies));
    }
    current = next;
    reloads.succeeded(at, restartOnly);
    return { applied: true };
  };

  return {
    xdsPort,
    ...(xdsTlsPort === undefined ? {} : { xdsTlsPort }),
    httpPort,
    adminPort,
    engine,
    ads,
    metrics,
    preview,
    reload(load: MeshmuxConfig | (() => MeshmuxConfig)): Promise<ReloadOutcome> {
      // One at a time: a reload that waits for a library must not be overtaken by a later one.
      const outcome = reloading.then(() => reloadNow(load));
      // A reload that failed past its checks must not hold back the ones after it.
      reloading = outcome.then(
        () => undefined,
        () => undefined,
      );
      return outcome;
    },
    async stop() {
      loopDelay.disable();
      judgedAtStart?.unsubscribe();
      clearInterval(policyRecordTimer);
      policyChanges.close();
      recordPolicies(true);
      await policyFile?.flushed();
      await ads.close();
      await http.close();
      await admin.close();
      engine.stop();
      // The last state is written before the folder is released; a store that does not answer
      // (etcd gone) and a collector that does not take the last spans cannot hold the exit.
      if ((await settleWithin(persisted.close(), STATE_CLOSE_MS)) === 'late') {
        log.warn({ waitedMs: STATE_CLOSE_MS }, 'the state store did not close in time; exiting without it');
      }
      if ((await settleWithin(telemetry.shutdown(), TELEMETRY_SHUTDOWN_MS)) === 'late') {
        log.warn(
          { waitedMs: TELEMETRY_SHUTDOWN_MS },
          'the last spans were not exported in time; exiting without them',
        );
      }
    },
  };
}

/**
 * What a confirmation of a held change of the policies names in place of a source, between
 * replicas: no source can be called so (a source's name is a DNS label).
 */
const POLICIES_SIGNAL = '(policies)';

/** How long a stop waits for the state store's last writes, and for the last spans' export. */
const STATE_CLOSE_MS = 5_000;
const TELEMETRY_SHUTDOWN_MS = 2_000;

/** How often the istiods connected are compared with those the policy record names. */
const POLICY_RECORD_INTERVAL_MS = 1_000;
/** How often the policy record is written when nothing in it changed but when istiods were seen. */
const POLICY_RECORD_REFRESH_MS = 60_000;
/** How long a start waits for etcd to hand over the other replicas' policy records. */
const POLICY_RECORDS_READ_MS = 5_000;

/**
 * The objects a source served before the restart, from its record: none from a record of another
 * type of source, whose objects name their files otherwise or not at all.
 */
function restoredObjects(
  record: SourceRecord | undefined,
  config: SourceConfig,
): Iterable<ConfigResource> | undefined {
  return record?.type === config.type ? record.resources : undefined;
}

/** When a record was saved (Unix ms); now when it does not say in a form that can be read. */
function recordTimeOf(record: PolicyRecord): number {
  const ms = Date.parse(record.savedAt);
  return Number.isNaN(ms) ? Date.now() : ms;
}

/** Policies as JSON holds them (no absent fields spelled out), so that kept and configured compare equal. */
function plainPolicies(policies: readonly PolicyConfig[]): PolicyConfig[] {
  return JSON.parse(JSON.stringify(policies)) as PolicyConfig[];
}

function policyGuardRules(guard: MeshmuxConfig['policyGuard']): PolicyGuardRules {
  return {
    keepOnEmpty: guard.onEmpty === 'keep',
    maxDeleteRatio: guard.maxDeleteRatio,
    ...(guard.confirmAfter === undefined ? {} : { confirmAfterMs: guard.confirmAfter }),
  };
}

/**
 * The policies the last run kept in the state folder, with the istiods it served, when it kept
 * any that can still be read; a record that cannot is logged and passed over.
 */
async function policiesOfLastRun(
  dir: string | undefined,
  shared: EtcdPolicyRecords | undefined,
  configured: readonly PolicyConfig[],
  log: Logger,
): Promise<{
  last?: { set: PolicySet; configs: PolicyConfig[]; clients: readonly RecordedClient[] };
  problem?: MeshmuxError;
}> {
  // Ranked newest first: the replicas' records by etcd's order of writes (no replica's clock can
  // skew it), then the state folder's, which a replica also keeps in etcd.
  const found: Array<{ record: PolicyRecord; where: string; rank: bigint }> = [];
  let problem: MeshmuxError | undefined;
  if (dir !== undefined) {
    const local = await readPolicyRecord(dir);
    problem = local.problem;
    if (local.record !== undefined) {
      found.push({ record: local.record, where: path.join(dir, POLICY_RECORD_FILE), rank: 0n });
    }
  }
  if (shared !== undefined) {
    try {
      for (const { record, revision } of await shared.readAll(POLICY_RECORDS_READ_MS)) {
        found.push({ record, where: 'etcd', rank: revision });
      }
    } catch (err) {
      log.warn(
        { err: String(err) },
        'the policy records of the replicas cannot be read from etcd: judging by the state folder alone',
      );
    }
  }
  // The newest record says which policies were in force, unless some replica already runs the
  // configured ones (nothing left to judge); every record names istiods to judge for.
  const nowMs = Date.now();
  let last: { configs: PolicyConfig[]; rank: bigint; inForce: boolean } | undefined;
  const clients: RecordedClient[] = [];
  for (const { record, where, rank } of found) {
    try {
      const configs = plainPolicies(parsePolicies(record.policies));
      const inForce = isDeepStrictEqual(configs, configured);
      if (last === undefined || (!last.inForce && (inForce || rank > last.rank))) {
        last = { configs, rank, inForce };
      }
      appendAll(clients, seenHere(record, nowMs));
    } catch (err) {
      problem ??= toMeshmuxError(err, 'STATE', { file: where });
    }
  }
  if (last === undefined) {
    if (problem !== undefined) {
      log.error(
        { err: problem.describe() },
        'the policies of the last run cannot be read: the configured ones apply without being judged',
      );
    }
    return problem === undefined ? {} : { problem };
  }
  return {
    last: { set: new PolicySet(last.configs), configs: last.configs, clients },
    ...(problem === undefined ? {} : { problem }),
  };
}

/**
 * A record's istiods, each as last seen by this process's clock: as long before `nowMs` as before
 * the record was saved, so a replica whose clock is off neither ages them early nor keeps them.
 */
function seenHere(record: PolicyRecord, nowMs: number): RecordedClient[] {
  const savedAtMs = recordTimeOf(record);
  return record.clients.map((c) => ({
    ...c,
    seenAtMs: nowMs - Math.max(0, savedAtMs - (c.seenAtMs ?? savedAtMs)),
  }));
}
