import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type * as KubernetesClient from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import { Observable, type SchedulerLike } from '../../core/rx.js';
import { MeshmuxError, toMeshmuxError } from '../../core/errors.js';
import { globMatcher, isPlainName } from '../../core/glob.js';
import { componentLogger } from '../../core/logger.js';
import { resourceKey, type ConfigResource } from '../../core/resource.js';
import type { SourceDescriptor, SourceEvent } from '../../core/source-event.js';
import { CONFIG_KINDS, type KindDescriptor } from '../../schema/kinds.js';
import { sourceClock } from '../runtime/source-clock.js';
import { ContentDigest } from '../../core/content-digest.js';
import { SourceStatusTracker } from '../runtime/source-status-tracker.js';
import type { YamlFileRead } from '../runtime/yaml-file-set.js';
import { ExponentialBackoff } from '../streaming/exponential-backoff.js';
import type { UpstreamSource } from '../upstream-source.js';
import type { KubernetesObject } from './kubernetes-object.js';
import { MAX_OBJECT_BYTES, readKubernetesObject } from './kubernetes-object-reader.js';
import { appendAll } from '../../core/append-all.js';
import { openWatch, type WatchHandle } from './watch-stream.js';

export interface KubernetesSourceOptions {
  readonly name: string;
  readonly defaultNamespace: string;
  /** A kubeconfig file; absent: the in-cluster service account. */
  readonly kubeconfig?: string;
  /** The kubeconfig context; default its current one. */
  readonly context?: string;
  /** Namespace globs; default every namespace. */
  readonly namespaces?: readonly string[];
  readonly labelSelector?: string;
  /** Kind names (`VirtualService`); default every Istio kind. */
  readonly kinds?: readonly string[];
  /** Quiet time after a watch event before the state is published. Default 20 ms. */
  readonly debounceMs?: number;
  /**
   * How long one list or discovery request may take from start to end, however its bytes trickle
   * in, and a watch request until its response headers. Default {@link REQUEST_DEADLINE_MS}.
   */
  readonly requestDeadlineMs?: number;
  /**
   * How long an open watch may bring no byte (not even a bookmark) before it is opened again
   * from its last resourceVersion. Default {@link WATCH_IDLE_MS}.
   */
  readonly watchIdleMs?: number;
  readonly scheduler?: SchedulerLike | undefined;
}

let library: typeof KubernetesClient | undefined;

/**
 * Loads the Kubernetes client library, which only configurations with a kubernetes source need:
 * it is the largest dependency by far (about 28 MB of heap and 80 MB of resident memory once
 * loaded), so a process without such a source never pays for it. A source is built only after
 * this resolved (see `loadSourceLibraries`).
 */
export async function loadKubernetesClient(): Promise<void> {
  library ??= await import('@kubernetes/client-node');
}

function kubernetesClient(): typeof KubernetesClient {
  if (library === undefined)
    throw new Error('the Kubernetes client library is not loaded (loadKubernetesClient)');
  return library;
}

/** Longest stretch of reading objects on this thread, ms, before other work gets its turn. */
const READ_SLICE_MS = 10;

interface KindWatch {
  readonly kind: KindDescriptor;
  /** The one namespace this watch lists; undefined: every namespace. */
  readonly namespace: string | undefined;
  /** `/apis/<group>/<version>/[namespaces/<ns>/]<plural>`; undefined while not discovered or not served. */
  path: string | undefined;
  served: boolean;
  listed: boolean;
  resourceVersion: string;
  readonly objects: Map<string, KubernetesObject>;
  /** What each of `objects` was read as, at its resourceVersion, by the same key. */
  readonly reads: Map<string, { rv: string; read: YamlFileRead }>;
  abort: WatchHandle | undefined;
  /**
   * Counts the watches opened and the ones meshmux ended itself: a watch reports its end only
   * while the count is the one it was opened at, so closing a watch on purpose is no failure.
   */
  generation: number;
  /** When the current watch was opened (the source clock's time). */
  openedAt: number;
  /** Watches in a row that the server ended soon after they opened, with no error. */
  quickEnds: number;
  /** Cancels the re-watch or relist this kind waits for, if any. */
  cancelRetry: (() => void) | undefined;
  /**
   * Lists in a row that found nothing of a kind that had objects (or of a kind at the source's
   * first list), and since when (the source clock): until a list finds some, the kind's watch
   * events only bring its next list forward.
   */
  emptyRelists: number;
  emptySince: number | undefined;
  /** Cancels the list again such a kind waits for (a timer of its own: watches come and go meanwhile). */
  cancelEmptyCheck: (() => void) | undefined;
  /** When that list is due (the source clock); undefined while none waits. */
  emptyCheckDue: number | undefined;
  /** How long after `emptySince` the kind is listed again on its timer. */
  emptyFor: number;
  /** Whether the kind's last list again failed (the source says stale until one succeeds). */
  recheckFailed: boolean;
  /** Why the API server refuses this kind here (403), while it does; retried on its own. */
  refused: MeshmuxError | undefined;
  /**
   * How long the kind waits before it is looked for again while the cluster does not serve it
   * (404): from {@link UNSERVED_RECHECK_POLICY}, started over once it is served.
   */
  readonly unservedBackoff: ExponentialBackoff;
  /** Since when the cluster does not serve the kind (the source clock); undefined while it does. */
  unservedSince: number | undefined;
  /**
   * Lists of this scope started, and the lowest number whose answer may still be taken: that of
   * the last list taken, or the next one once a watch opened. A list that started before either
   * answers what may be older than the objects held (it may lack one the other found or told), so
   * its answer is dropped, however late it comes.
   */
  listsStarted: number;
  listTaken: number;
  /** When the scope's last list started (the source clock); undefined before the first. */
  listStartedAt: number | undefined;
}

/**
 * How long a watch must stay up to prove the API server healthy: the backoff starts over only
 * then, and only a watch ended after that long is opened again at once. A watch that fails or
 * ends sooner waits the backoff, however often it happens.
 */
const STABLE_WATCH_MS = 30_000;

/** Watches in a row ended soon after opening (with no error) after which the kind is listed again. */
const RELIST_AFTER_QUICK_ENDS = 3;

/**
 * A list that finds nothing of a kind that had objects is made again, 2 s later, then twice as
 * long each time up to a minute apart, for 10 minutes: the merge holds such a listing (a kind lost
 * whole), and once an API server that lagged serves the kind again, that list ends the hold
 * without an operator.
 */
const EMPTY_RELIST_CHECK_MS = 2_000;
const EMPTY_RELIST_MAX_MS = 60_000;
const EMPTY_RELIST_FOR_MS = 600_000;
/**
 * A kind found empty at the source's first list (which a restarted process cannot tell from one
 * its API server lags on: the merge may hold the kind from its record) is listed again for 2
 * minutes: some six lists, whatever the number of kinds and namespaces that are simply empty.
 */
const EMPTY_AT_START_FOR_MS = 120_000;

/**
 * A kind the cluster does not serve is looked for again 1 s later, then twice as long each time,
 * up to once a minute: an API server restarted serves its CRDs a few seconds after its own
 * groups, and a CRD installed again should not wait long, while a kind simply not installed costs
 * one discovery request a minute.
 */
const UNSERVED_RECHECK_POLICY = { initialMs: 1_000, maxMs: 60_000, multiplier: 2, jitter: 0.25 } as const;

/**
 * The Istio objects of one Kubernetes cluster, listed then watched per kind (at the group's
 * preferred served version, one watch per kind). A kind whose group or version the cluster does
 * not serve (404) is "not served by this cluster": never a deletion. It is left out of the
 * state's kinds (named `unserved`), so whatever the merge holds of it stays, from this run or
 * restored, and it is looked for again with backoff, up to once a minute, then listed and watched
 * once it is served (a CRD deleted and installed again, an API server whose CRD handlers were not
 * up yet); one that was listed in this run makes the source say stale meanwhile. The source
 * publishes nothing until every served kind was listed once (then `synced`); a failed list or
 * watch makes it `stale` with its last state and retries with backoff, resuming from the last
 * resourceVersion; a `410 Gone` relists and replaces the kind's objects, so only the difference
 * reaches the merge. A kind the API server refuses (403) fails alone: the others are published
 * without it (see `refuse`). An object refused by validation keeps its last good version. Objects
 * become resources through the same reader as files (identical validation), with bookkeeping
 * metadata dropped (see kubernetes-object.ts).
 */
export class KubernetesSource implements UpstreamSource {
  readonly descriptor: SourceDescriptor;
  readonly events$: Observable<SourceEvent>;

  constructor(options: KubernetesSourceOptions) {
    const wanted =
      options.kinds === undefined
        ? CONFIG_KINDS
        : CONFIG_KINDS.filter((k) => options.kinds?.includes(k.kind) === true);
    const kindKeys: ReadonlySet<string> = new Set(wanted.map((k) => k.key));
    this.descriptor = {
      name: options.name,
      type: 'kubernetes',
      defaultNamespace: options.defaultNamespace,
      kinds: kindKeys,
    };
    const client = kubernetesClient();
    /** The kubeconfig as read, and its cluster's address; throws when it names no cluster. */
    const load = (): { config: KubeConfig; server: string } => {
      const loaded = new client.KubeConfig();
      if (options.kubeconfig === undefined) loaded.loadFromCluster();
      else loaded.loadFromFile(options.kubeconfig);
      if (options.context !== undefined) loaded.setCurrentContext(options.context);
      const cluster = loaded.getCurrentCluster();
      if (cluster === null) {
        throw new Error(
          `source ${options.name}: kubeconfig ${options.kubeconfig ?? '(in-cluster)'} names no cluster for its context`,
        );
      }
      return { config: loaded, server: cluster.server.replace(/\/+$/, '') };
    };
    // The kubeconfig is read again when its file changed (see `reloadKubeconfig`): a credential
    // rotated in place is taken up at the next retry, with no reload or restart.
    let { config, server } = load();
    let kubeconfigText =
      options.kubeconfig === undefined ? undefined : readTextOrUndefined(options.kubeconfig);
    const inNamespace = options.namespaces === undefined ? () => true : globMatcher(options.namespaces);
    // Plain namespace names are listed and watched one by one, so a Role in each is enough; a glob
    // needs the cluster-wide list (and a ClusterRole), filtered here.
    const scopes: readonly (string | undefined)[] =
      options.namespaces !== undefined && options.namespaces.every(isPlainName)
        ? [...new Set(options.namespaces)]
        : [undefined];

    this.events$ = new Observable<SourceEvent>((subscriber) => {
      const log = componentLogger('kubernetes-source', { source: options.name, server });
      const clock = sourceClock(options.scheduler);
      const tracker = new SourceStatusTracker((event) => subscriber.next(event), kindKeys);
      const backoff = new ExponentialBackoff();
      const watches: KindWatch[] = wanted.flatMap((kind) =>
        scopes.map((namespace) => ({
          kind,
          namespace,
          path: undefined,
          served: false,
          listed: false,
          resourceVersion: '',
          objects: new Map(),
          reads: new Map(),
          abort: undefined,
          generation: 0,
          openedAt: 0,
          quickEnds: 0,
          cancelRetry: undefined,
          emptyRelists: 0,
          emptySince: undefined,
          cancelEmptyCheck: undefined,
          emptyCheckDue: undefined,
          emptyFor: EMPTY_RELIST_FOR_MS,
          recheckFailed: false,
          refused: undefined,
          unservedBackoff: new ExponentialBackoff(UNSERVED_RECHECK_POLICY),
          unservedSince: undefined,
          listsStarted: 0,
          listTaken: 0,
          listStartedAt: undefined,
        })),
      );
      let stopped = false;
      let cancelDebounce: (() => void) | undefined;
      /** Whether the source has published a state yet. */
      let published = false;
      let cancelRetry: (() => void) | undefined;

      /**
       * Reads the kubeconfig file again when its text changed since it was last read (a token or
       * certificate rotated in place, as a credential helper writes it): each pass and each retry
       * of a kind alone asks, so a credential the API server stopped taking (401) is replaced at
       * the next retry. A file that cannot be read or names no cluster keeps the one in use. A
       * new cluster address lists every kind again.
       */
      const reloadKubeconfig = (): void => {
        if (options.kubeconfig === undefined) return;
        const text = readTextOrUndefined(options.kubeconfig);
        if (text === undefined || text === kubeconfigText) return;
        let next: { config: KubeConfig; server: string };
        try {
          next = load();
        } catch (err) {
          log.warn(
            { kubeconfig: options.kubeconfig, error: toMeshmuxError(err, 'CONFIG').message },
            'the kubeconfig changed but cannot be read: keeping the one in use',
          );
          return;
        }
        kubeconfigText = text;
        config = next.config;
        log.info({ kubeconfig: options.kubeconfig }, 'the kubeconfig changed: using it from now on');
        if (next.server === server) return;
        log.warn(
          { from: server, to: next.server },
          'the kubeconfig names another API server: listing every kind again',
        );
        server = next.server;
        for (const w of watches) w.resourceVersion = '';
      };

      const request = (path: string): Promise<ApiResponse> =>
        getJson(config, `${server}${path}`, options.requestDeadlineMs ?? REQUEST_DEADLINE_MS);

      /** Discovery documents of the API groups, fetched once per connection attempt. */
      let groups = new Map<string, Promise<ApiResponse>>();

      /**
       * Finds the kind's path from its group's discovery document: false when the cluster does not
       * serve it. A kind not served before stays so until a list of it succeeds.
       */
      const discover = async (w: KindWatch): Promise<boolean> => {
        let pending = groups.get(w.kind.group);
        if (pending === undefined) {
          pending = request(`/apis/${w.kind.group}`);
          groups.set(w.kind.group, pending);
        }
        const response = await pending;
        if (response.status === 404) {
          w.path = undefined;
          notServed(w);
          return false;
        }
        if (response.status !== 200) throw httpError(`${server}/apis/${w.kind.group}`, response);
        const group = response.body as {
          versions?: { version: string }[];
          preferredVersion?: { version: string };
        };
        const servedVersions = (group.versions ?? [])
          .map((v) => v.version)
          .filter((v) => w.kind.versions.includes(v));
        const preferred = group.preferredVersion?.version;
        const version =
          preferred !== undefined && servedVersions.includes(preferred) ? preferred : servedVersions[0];
        const scope = w.namespace === undefined ? '' : `namespaces/${encodeURIComponent(w.namespace)}/`;
        w.path =
          version === undefined ? undefined : `/apis/${w.kind.group}/${version}/${scope}${w.kind.plural}`;
        if (version === undefined) {
          notServed(w);
          return false;
        }
        if (w.unservedSince === undefined) w.served = true;
        return true;
      };

      /**
       * The cluster does not serve the kind (its group, version or list answers 404): its watch and
       * its lists again end, and it is looked for again on its own, with its own backoff. What it
       * held stays (see `publish`).
       */
      const notServed = (w: KindWatch): void => {
        w.served = false;
        stopWatch(w);
        w.cancelEmptyCheck?.();
        w.cancelEmptyCheck = undefined;
        w.emptyCheckDue = undefined;
        if (w.unservedSince === undefined) {
          w.unservedSince = clock.now();
          if (w.namespace === scopes[0]) {
            if (w.listed)
              log.warn(
                { kind: w.kind.kind, objects: w.objects.size },
                'kind no longer served by this cluster (404): keeping its objects, looking for it again',
              );
            else log.info({ kind: w.kind.kind }, 'kind not served by this cluster: looking for it again');
          }
        }
        if (!stopped) retryKind(w, w.unservedBackoff.nextDelayMs(), retryAlone);
      };

      /** A list of the kind succeeded: served, whatever it was before. */
      const markServed = (w: KindWatch): void => {
        w.served = true;
        if (w.unservedSince === undefined) return;
        w.unservedSince = undefined;
        w.unservedBackoff.reset();
        if (w.namespace === scopes[0]) log.info({ kind: w.kind.kind }, 'kind served by this cluster: listed');
      };

      /**
       * Lists a kind in pages of {@link LIST_PAGE_SIZE}, as kubectl and client-go do, so the API
       * server never builds one huge answer; a continue token that expired (410) starts the list
       * over. The objects are replaced only once every page has arrived, and only by the answer of
       * the latest list of the scope taken so far: returns false when a list started after this
       * one answered first (this answer is then older than the objects held, and dropped).
       */
      const list = async (w: KindWatch): Promise<boolean> => {
        const number = ++w.listsStarted;
        w.listStartedAt = clock.now();
        const items: KubernetesObject[] = [];
        let resourceVersion = '';
        let token = '';
        for (let restarts = 0; ;) {
          const params = new URLSearchParams({ limit: String(LIST_PAGE_SIZE) });
          if (options.labelSelector !== undefined) params.set('labelSelector', options.labelSelector);
          if (token !== '') params.set('continue', token);
          let response: ApiResponse;
          try {
            response = await request(`${w.path ?? ''}?${params.toString()}`);
          } catch (err) {
            // A list overtaken meanwhile is no longer wanted: its failure is nobody's.
            if (number < w.listTaken) return overtaken(w, number);
            throw err;
          }
          if (number < w.listTaken) return overtaken(w, number);
          if (response.status === 404) {
            w.listTaken = number;
            notServed(w);
            return true;
          }
          if (response.status === 410 && token !== '' && restarts < 3) {
            // The snapshot the pages came from was compacted: list again from the start.
            restarts += 1;
            items.length = 0;
            token = '';
            continue;
          }
          if (response.status !== 200) throw httpError(`${server}${w.path ?? ''}`, response);
          const body = response.body as {
            metadata?: { resourceVersion?: string; continue?: string };
            items?: KubernetesObject[];
          };
          appendAll(items, body.items ?? []);
          if (token === '') resourceVersion = body.metadata?.resourceVersion ?? '';
          token = body.metadata?.continue ?? '';
          if (token === '') break;
        }
        if (number < w.listTaken) return overtaken(w, number);
        w.listTaken = number;
        // The API server lists the kind here again: whatever refused it no longer does.
        w.refused = undefined;
        markServed(w);
        const before = new Set(w.objects.keys());
        w.objects.clear();
        for (const item of items) {
          if (!inNamespace(item.metadata?.namespace ?? '')) continue;
          w.objects.set(objectKey(item), item);
        }
        log.debug(
          {
            kind: w.kind.kind,
            objects: w.objects.size,
            removed: [...before].filter((k) => !w.objects.has(k)).length,
          },
          'kind listed',
        );
        w.resourceVersion = resourceVersion;
        w.listed = true;
        return true;
      };

      const overtaken = (w: KindWatch, number: number): false => {
        log.debug(
          { kind: w.kind.kind, namespace: w.namespace, list: number, taken: w.listTaken },
          'a list answered after a later one of the same kind: dropped',
        );
        return false;
      };

      const fail = (err: unknown, what: string): void => {
        if (stopped) return;
        const error: MeshmuxError = toMeshmuxError(err, 'UNAVAILABLE', { file: `${server} (${what})` });
        log.warn({ error: error.message }, 'kubernetes API unavailable');
        tracker.failed(error);
        cancelRetry?.();
        cancelRetry = clock.after(backoff.nextDelayMs(), () => {
          cancelRetry = undefined;
          void run();
        });
      };

      /** Ends the kind's watch, and any re-watch it waits for, without either counting as a failure. */
      const stopWatch = (w: KindWatch): void => {
        w.generation += 1;
        w.abort?.abort();
        w.abort = undefined;
        w.cancelRetry?.();
        w.cancelRetry = undefined;
      };

      /** Runs `next` for the kind after `delayMs`, replacing whatever it waited for before. */
      const retryKind = (w: KindWatch, delayMs: number, next: (w: KindWatch) => Promise<void>): void => {
        w.cancelRetry?.();
        w.cancelRetry = clock.after(delayMs, () => {
          w.cancelRetry = undefined;
          void next(w);
        });
      };

      /**
       * What follows the end of a watch meshmux did not end itself. A watch that stayed up
       * {@link STABLE_WATCH_MS} proved the server healthy: the backoff starts over and the watch
       * is opened again (or the kind relisted, after a 410) at once. One that ended sooner waits
       * the backoff, so a server or proxy that ends every watch at once, or answers each with a
       * 410, is asked less and less often rather than in a loop; after
       * {@link RELIST_AFTER_QUICK_ENDS} such ends in a row the kind is listed again, in case the
       * watch missed what changed.
       */
      const watchEnded = (w: KindWatch, err: unknown, gone: boolean): void => {
        const stable = clock.now() - w.openedAt >= STABLE_WATCH_MS;
        if (stable) {
          backoff.reset();
          w.quickEnds = 0;
        }
        const delayMs = stable ? 0 : backoff.nextDelayMs();
        // The status of the answer, never its text: a message may hold "410" in a port or a name.
        const status = (err as { statusCode?: unknown } | null | undefined)?.statusCode;
        if (gone || status === 410) {
          log.info({ kind: w.kind.kind, delayMs: Math.round(delayMs) }, 'watch expired (410): relisting');
          w.quickEnds = 0;
          retryKind(w, delayMs, relist);
        } else if (status === 403) {
          refuse(w, new MeshmuxError('PERMISSION_DENIED', `watch ${server}${w.path ?? ''}: HTTP 403`));
        } else if (status === 404) {
          notServed(w);
          publish();
        } else if (err instanceof MeshmuxError && err.code === 'LIMIT') {
          // An event too long to read: this kind's watch alone failed, and what it may have
          // missed is listed again, after the backoff.
          const error = new MeshmuxError('LIMIT', err.message, { file: `${server} (watch ${w.kind.kind})` });
          log.warn(
            { kind: w.kind.kind, error: error.message, delayMs: Math.round(delayMs) },
            'watch failed: relisting',
          );
          tracker.failed(error);
          w.quickEnds = 0;
          retryKind(w, stable ? backoff.nextDelayMs() : delayMs, relist);
        } else if (err === null || err === undefined) {
          if (!stable) w.quickEnds += 1;
          if (w.quickEnds >= RELIST_AFTER_QUICK_ENDS) {
            log.warn(
              { kind: w.kind.kind, watches: w.quickEnds, delayMs: Math.round(delayMs) },
              'the API server ends each watch at once: relisting',
            );
            w.quickEnds = 0;
            retryKind(w, delayMs, relist);
          } else {
            retryKind(w, delayMs, (again) =>
              watch(again).catch((e: unknown) => fail(e, `watch ${again.kind.kind}`)),
            );
          }
        } else {
          fail(err, `watch ${w.kind.kind}`);
        }
      };

      const watch = async (w: KindWatch): Promise<void> => {
        if (stopped) return;
        // One watch per kind: one still open (a relist and a new pass of run() may both get here)
        // is replaced.
        stopWatch(w);
        // The watch takes the objects as they stand and tells every change after them: a list
        // asked for before it answers what may be older than the changes it tells. Not while the
        // kind's last list found nothing: its events are not taken then, only lists are.
        if (w.emptySince === undefined) w.listTaken = w.listsStarted + 1;
        const generation = w.generation;
        w.openedAt = clock.now();
        // The server ends the watch after 5 to 10 minutes, as client-go asks, spread so that the
        // kinds' watches do not all end at once; the client ends it a minute after that, should the
        // server's end never come.
        const timeoutSeconds = Math.round(WATCH_TIMEOUT_S * (1 + Math.random()));
        const query: Record<string, string> = {
          allowWatchBookmarks: 'true',
          resourceVersion: w.resourceVersion,
          timeoutSeconds: String(timeoutSeconds),
        };
        if (options.labelSelector !== undefined) query['labelSelector'] = options.labelSelector;
        let gone = false;
        const ended = (err: unknown, quiet?: boolean): void => {
          // The end of a watch meshmux closed itself is never reported: that watch was replaced or
          // is no longer wanted, and its end is no failure.
          if (stopped || generation !== w.generation) return;
          if (quiet === true)
            log.info(
              { kind: w.kind.kind, namespace: w.namespace, idleMs: options.watchIdleMs ?? WATCH_IDLE_MS },
              'watch brought nothing, not even a bookmark, for too long: opening it again',
            );
          w.generation += 1;
          w.abort = undefined;
          watchEnded(w, err, gone);
        };
        const opening = openWatch({
          config,
          url: `${server}${w.path ?? ''}`,
          query,
          maxLineBytes: MAX_WATCH_LINE_BYTES,
          idleMs: options.watchIdleMs ?? WATCH_IDLE_MS,
          lifetimeMs: (timeoutSeconds + 60) * 1000,
          clock,
          onEnd: ended,
          onEvent: (phase, event) => {
            if (generation !== w.generation || event === null || typeof event !== 'object') return;
            const object = event as KubernetesObject & { code?: number };
            if (phase === 'ERROR') {
              if (object.code === 410) gone = true;
              return;
            }
            // The kind's last list found nothing: an event names one object and says nothing of
            // those the merge still holds from before, so the kind is listed again instead (and
            // a watch opened again from here sees the event again, should that list fail).
            if (phase !== 'BOOKMARK' && w.emptySince !== undefined) {
              if (inNamespace(object.metadata?.namespace ?? '')) listAgainSoon(w);
              return;
            }
            const rv = object.metadata?.resourceVersion;
            if (rv !== undefined) w.resourceVersion = rv;
            if (phase === 'BOOKMARK') return;
            if (!inNamespace(object.metadata?.namespace ?? '')) return;
            if (phase === 'DELETED') w.objects.delete(objectKey(object));
            else w.objects.set(objectKey(object), object);
            schedule();
          },
        }).catch((err: unknown): WatchHandle => {
          // No answer at all (refused, reset): the watch's end, as one that opened and failed.
          ended(err);
          return { abort: () => undefined };
        });
        // Past the deadline for the response headers the watch counts as failed, and is closed
        // should its answer come after all.
        const deadlineMs = options.requestDeadlineMs ?? REQUEST_DEADLINE_MS;
        let cancelDeadline: (() => void) | undefined;
        const late = new Promise<undefined>((resolve) => {
          cancelDeadline = clock.after(deadlineMs, () => resolve(undefined));
        });
        const abort = await Promise.race([opening, late]);
        cancelDeadline?.();
        if (abort === undefined) {
          void opening.then((a) => a.abort());
          if (stopped || generation !== w.generation) return;
          w.generation += 1;
          fail(
            new Error(`watch ${w.path ?? ''}: no answer within ${deadlineMs / 1000} s`),
            `watch ${w.kind.kind}`,
          );
          return;
        }
        // Unsubscribed, replaced or already ended while it was being opened: close it rather than
        // leave it running.
        if (stopped || generation !== w.generation) abort.abort();
        else w.abort = abort;
      };

      /**
       * The API server refuses one kind (in one namespace) while it serves the others, as when a
       * Role lacks it: that kind keeps what it served (nothing, if it was never listed, and then
       * its kind is left out of the state rather than served empty), the others are published and
       * watched, and the refused one is tried again on its own, with backoff.
       */
      const refuse = (w: KindWatch, error: MeshmuxError): void => {
        w.refused = error;
        log.warn(
          { kind: w.kind.kind, namespace: w.namespace, error: error.message },
          'kubernetes API refuses this kind: serving the others',
        );
        retryKind(w, backoff.nextDelayMs(), retryAlone);
        // Said now; the state of the others follows at the end of the pass (run) or already went.
        tracker.failed(error);
      };

      /** Tries a refused or unserved kind again, alone: discovered afresh, then listed and watched. */
      const retryAlone = async (w: KindWatch): Promise<void> => {
        try {
          reloadKubeconfig();
          groups.delete(w.kind.group);
          if (await discover(w)) await listChecked(w);
          w.refused = undefined;
          publish();
          if (w.served) await watch(w);
        } catch (err) {
          if (err instanceof MeshmuxError && err.code === 'PERMISSION_DENIED') refuse(w, err);
          else fail(err, `list ${w.kind.kind}`);
        }
      };

      const relist = async (w: KindWatch): Promise<void> => {
        try {
          if (!(await listChecked(w))) return;
          publish();
          if (w.served) await watch(w);
        } catch (err) {
          fail(err, `list ${w.kind.kind}`);
        }
      };

      /**
       * Lists again a kind its last list found empty. Still empty, with its watch open: nothing
       * changed, so neither a new state nor a new watch (that list's events only bring this one
       * forward). A list that fails is tried again later, whatever the source's own retry does.
       */
      const recheck = async (w: KindWatch): Promise<void> => {
        // A list of this scope not published yet (the source's first, say) stays a listing.
        const marked = relisted.get(w.kind.key)?.has(w) === true;
        try {
          if (!(await listChecked(w)) || stopped) return;
          // Before the source's first state, its run lists, publishes and opens the watches.
          if (!published) return;
          const failedBefore = w.recheckFailed;
          w.recheckFailed = false;
          if (w.emptySince !== undefined && w.abort !== undefined) {
            // Nothing changed, so nothing was listed: the kind's next state, an edit in another
            // namespace say, is not to be judged as a listing on this list's account.
            const scopes = relisted.get(w.kind.key);
            if (!marked) scopes?.delete(w);
            if (scopes?.size === 0) relisted.delete(w.kind.key);
            // The same state again, to say the source is well after the failed lists.
            if (failedBefore) publish();
            return;
          }
          publish();
          if (w.served) await watch(w);
        } catch (err) {
          if (stopped) return;
          // The kind's scope alone: the source's other watches stand. The list was asked for
          // (a timer, or a watch event this list stands in for), so it is tried again whatever
          // the time, at most a minute apart, and the source says stale meanwhile.
          const error = toMeshmuxError(err, 'UNAVAILABLE', { file: `${server}${w.path ?? ''}` });
          log.warn(
            { kind: w.kind.kind, namespace: w.namespace, error: error.message },
            'listing again a kind found empty failed: trying again',
          );
          w.recheckFailed = true;
          tracker.failed(error);
          emptyCheckAfter(w, nextEmptyCheckMs(w));
        }
      };

      /**
       * Lists a kind as a listing the merge judges (see {@link relisted}); one that had objects and
       * lists empty is listed again later (see {@link EMPTY_RELIST_CHECK_MS}). False when a later
       * list of the scope answered first: this one changed nothing, and whoever made the later
       * one publishes and watches.
       */
      const listChecked = async (w: KindWatch): Promise<boolean> => {
        const had = w.objects.size;
        // A restarted process knows nothing of what the merge restored: its first list of a kind
        // may be the one that takes it whole.
        const first = !w.listed;
        if (!(await list(w))) return false;
        // Not served (404): nothing was listed, and what the kind held stays.
        if (!w.served) return true;
        let scopes = relisted.get(w.kind.key);
        if (scopes === undefined) relisted.set(w.kind.key, (scopes = new Set()));
        scopes.add(w);
        if (w.objects.size > 0) {
          w.emptyRelists = 0;
          w.emptySince = undefined;
          w.cancelEmptyCheck?.();
          w.cancelEmptyCheck = undefined;
          w.emptyCheckDue = undefined;
          return true;
        }
        if (stopped || (had <= 1 && w.emptySince === undefined && !first)) return true;
        const now = clock.now();
        if (w.emptySince === undefined) {
          w.emptySince = now;
          w.emptyFor = first && had === 0 ? EMPTY_AT_START_FOR_MS : EMPTY_RELIST_FOR_MS;
        }
        if (now - w.emptySince > w.emptyFor) return true;
        const delayMs = nextEmptyCheckMs(w);
        if (had > 1) {
          log.warn(
            { kind: w.kind.kind, had, delayMs: Math.round(delayMs) },
            'a list found nothing of a kind that had objects: listing it again',
          );
        }
        emptyCheckAfter(w, delayMs);
        return true;
      };

      /** The wait before the kind's next list again: doubling, capped, drawn within ±25%. */
      const nextEmptyCheckMs = (w: KindWatch): number =>
        Math.min(EMPTY_RELIST_MAX_MS, EMPTY_RELIST_CHECK_MS * 2 ** w.emptyRelists++) *
        (0.75 + Math.random() / 2);

      /**
       * Lists the kind again after `delayMs`, unless a list again is due sooner: a watch event
       * that came while a list was under way asked for one that the list's answer may not show.
       */
      const emptyCheckAfter = (w: KindWatch, delayMs: number): void => {
        if (stopped) return;
        const due = w.emptyCheckDue;
        if (w.cancelEmptyCheck !== undefined && due !== undefined && due <= clock.now() + delayMs) return;
        w.cancelEmptyCheck?.();
        w.emptyCheckDue = clock.now() + delayMs;
        w.cancelEmptyCheck = clock.after(delayMs, () => {
          w.cancelEmptyCheck = undefined;
          w.emptyCheckDue = undefined;
          void recheck(w);
        });
      };

      /**
       * A watch event of a kind whose last list found nothing: the kind is listed again at once,
       * or {@link EMPTY_RELIST_CHECK_MS} after its last list started (sooner than its timer said,
       * or after its ten minutes of lists again), never more often than that however many events
       * come.
       */
      const listAgainSoon = (w: KindWatch): void => {
        const now = clock.now();
        const at =
          w.listStartedAt === undefined ? now : Math.max(now, w.listStartedAt + EMPTY_RELIST_CHECK_MS);
        const due = w.emptyCheckDue;
        if (due !== undefined && due <= at) return;
        // Never further off than that, should the clock have been set back since that list.
        emptyCheckAfter(w, Math.min(at - now, EMPTY_RELIST_CHECK_MS));
      };

      const schedule = (): void => {
        if (cancelDebounce !== undefined) return;
        cancelDebounce = clock.after(options.debounceMs ?? 20, publish);
      };

      /**
       * Kinds listed since the last state published (at a start, after a watch expired), with the
       * scopes (namespaces) listed: what a list lacks may be the API server's lag, not deletions,
       * so the merge judges it as a listing.
       */
      const relisted = new Map<string, Set<KindWatch>>();
      /**
       * The state being built, if any. Builds run one at a time: each reads every object not read
       * yet, so builds side by side would each read them all (a start with 14 kinds the cluster
       * does not serve, each looked for again a second later, built 1,200 objects 28 times over
       * and served its first state after 3 to 15 s instead of 0.1 s). A publish asked for while
       * one runs is done once it ends, of the objects as they are then.
       */
      let building: Promise<void> | undefined;
      /**
       * A kind the state cannot be published without: served and neither listed nor refused, or
       * not yet found either served or not (a kind looked for again while the source's first
       * pass was still to reach the others published them all as not served).
       */
      const unsettled = (w: KindWatch): boolean =>
        w.served ? !w.listed && w.refused === undefined : w.unservedSince === undefined;
      let publishAgain = false;
      const publish = (): void => {
        cancelDebounce?.();
        cancelDebounce = undefined;
        if (stopped || watches.some(unsettled)) return;
        if (building !== undefined) {
          publishAgain = true;
          return;
        }
        published = true;
        // A kind refused in some scope before it was ever listed there is left out: its objects
        // are not known, and a state naming the kind would delete them. A kind not served in some
        // scope is left out too, named as such: what it held, here or restored, stays.
        const unknown = new Set(watches.filter((w) => w.served && !w.listed).map((w) => w.kind.key));
        const unserved = new Set(watches.filter((w) => !w.served).map((w) => w.kind.key));
        const kinds =
          unknown.size === 0 && unserved.size === 0
            ? kindKeys
            : new Set([...kindKeys].filter((k) => !unknown.has(k) && !unserved.has(k)));
        const listedKinds = [...relisted.keys()].filter((k) => kinds.has(k));
        const listed = listedKinds.length === 0 ? undefined : new Set(listedKinds);
        for (const k of listedKinds) relisted.delete(k);
        building = build(kinds).then(
          (state) => {
            if (stopped) return;
            const revision = state.revision;
            const served = tracker.serve({
              type: 'snapshot',
              kinds,
              ...(listed === undefined ? {} : { listed }),
              ...(unserved.size === 0 ? {} : { unserved }),
              resources: state.resources,
              revision,
              errors: state.errors,
              warnings: state.warnings,
            });
            if (served)
              log.info(
                { objects: state.resources.length, errors: state.errors.length, revision },
                'cluster state read',
              );
            const refused = watches.find((w) => w.refused !== undefined)?.refused;
            // A kind listed in this run that the cluster no longer serves: its objects are kept,
            // and the source says so, stale, until it is served again.
            const gone = watches.find((w) => !w.served && w.listed);
            if (refused !== undefined) tracker.failed(refused);
            else if (gone !== undefined)
              tracker.failed(
                new MeshmuxError(
                  'UNAVAILABLE',
                  `${gone.kind.kind} no longer served (HTTP 404): its objects are kept until it is served and listed again`,
                  { file: server },
                ),
              );
          },
          (err: unknown) => {
            // Each object's failure is its own error (see readObject), so this is a bug: the state
            // served stays, the source says why, and the next change builds again.
            if (stopped) return;
            const error = toMeshmuxError(err, 'INTERNAL', { file: server });
            log.error({ error: error.message }, 'cluster state could not be built');
            tracker.failed(error);
          },
        );
        void building.finally(() => {
          building = undefined;
          if (!publishAgain) return;
          publishAgain = false;
          publish();
        });
      };

      /**
       * The objects' names and versions as the reads hold them, kept up to date one read at a
       * time: the revision, with no sort or hash of every object per change.
       */
      const digest = new ContentDigest(false);
      const setRead = (w: KindWatch, key: string, next: { rv: string; read: YamlFileRead }): void => {
        const before = w.reads.get(key);
        let read = next.read;
        if (read.errors.length > 0 && before !== undefined && before.read.resources.length > 0) {
          // An object updated to something meshmux refuses keeps serving what it served before,
          // with the new version's errors reported, as a broken file does (yaml-file-set.ts): in
          // state of the world, leaving it out would delete it from every istiod.
          const now = new Set(read.resources.map(resourceKey));
          const kept = before.read.resources.filter((r) => !now.has(resourceKey(r)));
          read = { ...read, resources: [...read.resources, ...kept] };
        }
        if (before !== undefined) for (const r of before.read.resources) digest.remove(r);
        for (const r of read.resources) digest.add(r);
        w.reads.set(key, { rv: next.rv, read });
      };

      /** One object read (see readKubernetesObject); never rejects. */
      const readObject = (w: KindWatch, key: string, object: KubernetesObject) =>
        readKubernetesObject(object, {
          file: `${server}/${w.kind.kind}/${key}`,
          defaultNamespace: options.defaultNamespace,
          createTimeFor: () => ({ seconds: Math.floor(clock.now() / 1000), nanos: 0 }),
        });

      /**
       * Every object read (see readObject), each once per resourceVersion; then the state
       * assembled in one synchronous step, so that it and its revision are of the same reads. An
       * object that came while others were read is left to the next state (its watch event
       * scheduled one).
       */
      const build = async (
        kinds: ReadonlySet<string>,
      ): Promise<{
        resources: ConfigResource[];
        errors: MeshmuxError[];
        warnings: MeshmuxError[];
        revision: string;
      }> => {
        let sliceStart = performance.now();
        for (const w of watches) {
          for (const [key, object] of w.objects) {
            const rv = object.metadata?.resourceVersion ?? '';
            if (w.reads.get(key)?.rv === rv) continue;
            setRead(w, key, { rv, read: await readObject(w, key, object) });
            // Objects are read on this thread: other work runs between slices of reading.
            if (performance.now() - sliceStart >= READ_SLICE_MS) {
              await new Promise<void>((resolve) => setImmediate(resolve));
              sliceStart = performance.now();
            }
          }
        }
        const resources: ConfigResource[] = [];
        const errors: MeshmuxError[] = [];
        const warnings: MeshmuxError[] = [];
        for (const w of watches) {
          if (!kinds.has(w.kind.key)) continue;
          let found = 0;
          for (const key of w.objects.keys()) {
            const cached = w.reads.get(key);
            if (cached === undefined) continue;
            found++;
            appendAll(resources, cached.read.resources);
            appendAll(errors, cached.read.errors);
            appendAll(warnings, cached.read.warnings);
          }
          // Reads of objects since deleted: looked for only when there are some.
          if (found < w.reads.size) {
            for (const [key, cached] of w.reads) {
              if (w.objects.has(key)) continue;
              for (const r of cached.read.resources) digest.remove(r);
              w.reads.delete(key);
            }
          }
        }
        return { resources, errors, warnings, revision: digest.version() };
      };

      const run = async (): Promise<void> => {
        groups = new Map();
        reloadKubeconfig();
        try {
          for (const w of watches) {
            if (stopped) return;
            stopWatch(w);
            // Each pass tries every kind again, a refused one too.
            w.refused = undefined;
            try {
              if (!(await discover(w))) continue;
              // A kind whose list found nothing is listed again too: its watch told nothing since;
              // and one not served before, whose list alone tells it is served again.
              if (!w.listed || !w.served || w.resourceVersion === '' || w.emptySince !== undefined)
                await listChecked(w);
            } catch (err) {
              if (!(err instanceof MeshmuxError && err.code === 'PERMISSION_DENIED')) throw err;
              refuse(w, err);
            }
          }
          if (stopped) return;
          publish();
          // The backoff starts over once a watch has stayed up a while (watchEnded), not here: a
          // watch the server fails at once would otherwise be retried at the shortest delay forever.
          // The watches open side by side, so one whose answer never comes holds up no other.
          await Promise.all(watches.filter((w) => w.served && w.refused === undefined).map((w) => watch(w)));
        } catch (err) {
          fail(err, 'list');
        }
      };

      tracker.connecting();
      void run();
      return () => {
        stopped = true;
        cancelDebounce?.();
        cancelRetry?.();
        for (const w of watches) {
          stopWatch(w);
          w.cancelEmptyCheck?.();
        }
      };
    });
  }
}

/** The text of a file, or undefined when it cannot be read (it is then read again later). */
function readTextOrUndefined(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** A list or discovery answer: the HTTP status and the body read as JSON (undefined when it is not JSON). */
interface ApiResponse {
  readonly status: number;
  readonly body: unknown;
}

/** TLS errors that mean the cluster's CA is not the one the kubeconfig trusts. */
const UNTRUSTED_CERTIFICATE: ReadonlySet<string> = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
]);

/** Objects per list request; the rest follows with the API server's continue token. */
const LIST_PAGE_SIZE = 500;

/**
 * How long one list or discovery request may take, from start to end, before it counts as a
 * failure. A deadline, not an idle timeout: an answer that trickles a byte now and then would
 * otherwise hold the source for ever.
 */
const REQUEST_DEADLINE_MS = 60_000;

/** The least `timeoutSeconds` a watch asks for; each asks for up to twice as long, drawn at random. */
const WATCH_TIMEOUT_S = 300;

/**
 * How long a watch may bring no byte before it is opened again from its last resourceVersion:
 * the API server sends a bookmark about once a minute, so three minutes of silence is a
 * connection frozen on the way (a load balancer's leg), which neither side sees close.
 */
const WATCH_IDLE_MS = 180_000;

/**
 * The longest watch event read, bytes: an event holds one object, at most
 * {@link MAX_OBJECT_BYTES}, in an envelope; twice that leaves room for escapes.
 */
const MAX_WATCH_LINE_BYTES = 2 * MAX_OBJECT_BYTES;

/**
 * The largest list page or discovery answer read, bytes. A page is {@link LIST_PAGE_SIZE} objects,
 * each at most the API server's 1.5 MiB, and Istio objects are mostly a few KiB: a larger answer
 * is refused before it is held whole.
 */
const MAX_RESPONSE_BYTES = 256 * 1024 * 1024;

/**
 * GET with the kubeconfig's credentials and trust: its CA (file or data), client certificate and
 * key, bearer token or exec/OIDC plugin, `insecure-skip-tls-verify` and `tls-server-name`, all
 * applied by the client library to node's own HTTPS request (the watch uses the same settings).
 */
async function getJson(config: KubeConfig, url: string, deadlineMs: number): Promise<ApiResponse> {
  const options: https.RequestOptions = { method: 'GET', headers: { accept: 'application/json' } };
  await config.applyToHTTPSOptions(options);
  const target = new URL(url);
  const plain = target.protocol === 'http:';
  if (plain) delete options.agent;
  return new Promise<ApiResponse>((resolve, reject) => {
    const req = (plain ? http : https).request(target, options, (res) => {
      const chunks: Buffer[] = [];
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > MAX_RESPONSE_BYTES) {
          req.destroy(new Error(`answer larger than ${MAX_RESPONSE_BYTES / 1024 / 1024} MiB; not read`));
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', (err) => {
        clearTimeout(deadline);
        reject(err);
      });
      res.on('end', () => {
        clearTimeout(deadline);
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    const deadline = setTimeout(
      () => req.destroy(new Error(`no complete answer within ${deadlineMs / 1000} s`)),
      deadlineMs,
    );
    req.on('error', (err: Error & { code?: string }) => {
      clearTimeout(deadline);
      const untrusted = err.code !== undefined && UNTRUSTED_CERTIFICATE.has(err.code);
      reject(
        new Error(
          `GET ${url}: ${err.message}${untrusted ? " (the API server's certificate is not signed by the kubeconfig's certificate-authority)" : ''}`,
        ),
      );
    });
    req.end();
  });
}

/**
 * An unexpected status, with the API server's own message when it sent a `Status`; a 403 (this
 * identity may not read it) is `PERMISSION_DENIED`, which fails that kind alone.
 */
function httpError(path: string, response: ApiResponse): MeshmuxError {
  const message = (response.body as { message?: unknown } | undefined)?.message;
  return new MeshmuxError(
    response.status === 403 ? 'PERMISSION_DENIED' : 'UNAVAILABLE',
    `GET ${path}: HTTP ${response.status}${typeof message === 'string' ? `: ${message.slice(0, 500)}` : ''}`,
  );
}

function objectKey(object: KubernetesObject): string {
  return `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;
}
