import { readFile } from 'node:fs/promises';
import { Observable, type SchedulerLike } from '../../core/rx.js';
import { componentLogger } from '../../core/logger.js';
import type { SourceDescriptor, SourceEvent } from '../../core/source-event.js';
import { sourceClock } from '../runtime/source-clock.js';
import { SourceStatusTracker } from '../runtime/source-status-tracker.js';
import type { UpstreamSource } from '../upstream-source.js';
import { parseProviderNode, type ProviderParse } from './dubbo-provider-url.js';
import { DubboHostTemplate } from './dubbo-host-template.js';
import {
  DubboServiceBuilder,
  SERVICE_ENTRY_KIND,
  WORKLOAD_ENTRY_KIND,
  type EndpointMode,
} from './dubbo-service-builder.js';
import { GlobSelector, type GlobLists } from './glob-selector.js';
import { ZookeeperRegistryWatcher } from './zookeeper-registry-watcher.js';

/** Digest credentials; exactly one of `password` and `passwordFile`. */
export interface ZookeeperDigestAuth {
  readonly username: string;
  readonly password?: string | undefined;
  /** Read for every new session, so a rotated secret is picked up. */
  readonly passwordFile?: string | undefined;
}

export interface ZookeeperSourceOptions {
  readonly name: string;
  /** `host:port[,host:port...]`. */
  readonly servers: string;
  /** Registry root; default `/dubbo`. */
  readonly root?: string;
  /** Namespace of every generated object. */
  readonly namespace: string;
  /** Requested session timeout (the server bounds it); default 30 s. */
  readonly sessionTimeoutMs?: number;
  /** How long an unanswered connection is kept before a new session replaces it; see the watcher. */
  readonly deadConnectionMs?: number;
  /** How long the client may stay unconnected before a new client resumes its session; see the watcher. */
  readonly handshakeTimeoutMs?: number;
  /** How long a connection must stay up to prove healthy; see the watcher. */
  readonly healthyConnectionMs?: number;
  readonly auth?: ZookeeperDigestAuth;
  /** Default {@link DubboHostTemplate.DEFAULT}. */
  readonly hostTemplate?: string;
  /** Default `inline`. */
  readonly endpoints?: EndpointMode;
  readonly interfaces?: GlobLists;
  readonly applications?: GlobLists;
  /** URL parameters that become endpoint labels; default all but `timestamp` and `pid`. */
  readonly labelParameters?: GlobLists;
  /** Quiet time after a watch fires before the state is published, so a burst is published once. Default 50 ms. */
  readonly debounceMs?: number;
  /** Times the debounce; default the wall clock. */
  readonly scheduler?: SchedulerLike | undefined;
}

/** Lifecycle hooks, called synchronously; for telemetry and tests. */
export interface ZookeeperSourceHooks {
  /** A ZooKeeper session was established: the first, or one replacing an expired one. */
  onSession?(sessionId: string): void;
  /** The registry's state was built into objects (`ms`: the build alone), served or not. */
  onBuilt?(built: { readonly objects: number; readonly ms: number }): void;
}

/** Per-process-changing parameters that would rebuild every endpoint on every provider restart. */
const DEFAULT_LABEL_PARAMETERS: GlobLists = { exclude: ['timestamp', 'pid'] };
const SOURCE_KINDS: ReadonlySet<string> = new Set([SERVICE_ENTRY_KIND, WORKLOAD_ENTRY_KIND]);

/** `/dubbo`, `/dubbo/` and `dubbo` all mean `/dubbo`; `/` is the server's root. */
export function normalizeRoot(root: string): string {
  const trimmed = root.replace(/\/+$/, '');
  if (trimmed === '') return '';
  return trimmed.startsWith('/') ? trimmed : `/${trimmed}`;
}

/**
 * Serves Dubbo providers registered in ZooKeeper as ServiceEntries (and WorkloadEntries).
 * Driven by ZooKeeper watches. Publishes nothing until the first complete read of the registry;
 * after a lost connection or an expired session it is `stale`, keeps its last state, and
 * publishes again once a complete read on the new connection is done. Bad registrations and
 * colliding hosts or names are reported in the snapshot's `errors`, never served.
 */
export class ZookeeperSource implements UpstreamSource {
  readonly descriptor: SourceDescriptor;
  readonly events$: Observable<SourceEvent>;

  constructor(options: ZookeeperSourceOptions, hooks: ZookeeperSourceHooks = {}) {
    // Declaring its kinds keeps istiod's readiness for every other kind from waiting on ZooKeeper.
    this.descriptor = {
      name: options.name,
      type: 'zookeeper',
      defaultNamespace: options.namespace,
      kinds: SOURCE_KINDS,
    };
    // Invalid templates fail at construction, where configuration errors belong.
    const hostTemplate = new DubboHostTemplate(options.hostTemplate ?? DubboHostTemplate.DEFAULT);
    const root = normalizeRoot(options.root ?? '/dubbo');
    this.events$ = new Observable<SourceEvent>((subscriber) => {
      const log = componentLogger('zookeeper-source', { source: options.name });
      const interfaces = new GlobSelector(options.interfaces);
      const builder = new DubboServiceBuilder({
        namespace: options.namespace,
        hostTemplate,
        endpoints: options.endpoints ?? 'inline',
        applications: new GlobSelector(options.applications),
        labelParameters: new GlobSelector(options.labelParameters ?? DEFAULT_LABEL_PARAMETERS),
        root,
        originPrefix: `zookeeper://${options.servers}`,
      });
      /**
       * Parses by interface and znode name, with the list they were made from: a znode name never
       * changes, so each is parsed once, and an interface whose list is the same array keeps its
       * map (the builder reuses what it made from a map it has seen).
       */
      const parses = new Map<
        string,
        { list: readonly string[]; byNode: ReadonlyMap<string, ProviderParse> }
      >();
      /** The parses by interface, as the builder reads them: kept up to date, not made anew. */
      const view = new Map<string, ReadonlyMap<string, ProviderParse>>();
      const tracker = new SourceStatusTracker((event) => subscriber.next(event), SOURCE_KINDS);
      /** The errors of the last state served, as logged. */
      let loggedErrors: ReadonlySet<string> = new Set();
      const clock = sourceClock(options.scheduler);
      let cancelDebounce: (() => void) | undefined;

      const currentParses = (): ReadonlyMap<string, ReadonlyMap<string, ProviderParse>> => {
        const providers = watcher.providers;
        for (const [iface, list] of providers) {
          const before = parses.get(iface);
          if (before?.list === list) continue;
          const byNode = new Map<string, ProviderParse>();
          for (const node of list)
            byNode.set(node, before?.byNode.get(node) ?? parseProviderNode(node, iface));
          parses.set(iface, { list, byNode });
          view.set(iface, byNode);
        }
        if (view.size !== providers.size) {
          for (const iface of view.keys()) {
            if (providers.has(iface)) continue;
            view.delete(iface);
            parses.delete(iface);
          }
        }
        return view;
      };

      const publish = (): void => {
        cancelDebounce?.();
        cancelDebounce = undefined;
        if (watcher.syncing) return; // `synced` publishes once the read is complete
        const started = performance.now();
        const result = builder.build(currentParses());
        hooks.onBuilt?.({ objects: result.resources.length, ms: performance.now() - started });
        const errors = [...watcher.readErrors, ...result.errors];
        const revision = result.revision;
        const served = tracker.serve({
          type: 'snapshot',
          kinds: SOURCE_KINDS,
          resources: result.resources,
          revision,
          errors,
          warnings: result.warnings,
        });
        if (!served) return;
        // Each error once, when it first appears: a registry with hundreds of bad registrations
        // changing one at a time would otherwise log all of them again on every change.
        const described = new Set(errors.map((e) => e.describe()));
        for (const d of described)
          if (!loggedErrors.has(d)) log.warn({ error: d }, 'registration not served');
        loggedErrors = described;
        log.info(
          {
            services: result.services,
            objects: result.resources.length,
            errors: errors.length,
            revision,
            buildMs: Math.round(performance.now() - started),
          },
          'registry state read',
        );
      };

      const auth = options.auth;
      const watcher = new ZookeeperRegistryWatcher(
        {
          servers: options.servers,
          root,
          sessionTimeoutMs: options.sessionTimeoutMs ?? 30_000,
          ...(options.deadConnectionMs === undefined ? {} : { deadConnectionMs: options.deadConnectionMs }),
          ...(options.handshakeTimeoutMs === undefined
            ? {}
            : { handshakeTimeoutMs: options.handshakeTimeoutMs }),
          ...(options.healthyConnectionMs === undefined
            ? {}
            : { healthyConnectionMs: options.healthyConnectionMs }),
          ...(auth === undefined
            ? {}
            : {
                digest: async () =>
                  `${auth.username}:${auth.passwordFile === undefined ? (auth.password ?? '') : (await readFile(auth.passwordFile, 'utf8')).trim()}`,
              }),
          acceptInterface: (name) => interfaces.matches(name),
          log,
          clock,
        },
        {
          changed: () => {
            if (watcher.syncing || cancelDebounce !== undefined) return;
            cancelDebounce = clock.after(options.debounceMs ?? 50, publish);
          },
          synced: publish,
          unavailable: (error) => tracker.failed(error),
          session: (sessionId) => hooks.onSession?.(sessionId),
        },
      );

      tracker.connecting();
      watcher.start();
      return () => {
        cancelDebounce?.();
        watcher.stop();
      };
    });
  }
}
