/**
 * The pages under `/debug/` and the POST endpoints beside them, built from what the running parts
 * report. The composition root hands in functions, so this module sees the merge's snapshot and
 * nothing of the sources or the ADS server but what those functions return.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { ConfigSnapshot, SourceReport } from '../merge/config-snapshot.js';
import { decodeBody } from '../schema/yaml-reader.js';
import { globMatcher, globProblem } from '../core/glob.js';
import { truncateForLog } from '../core/truncate-for-log.js';
import { type ActionResult, type DebugPage, type PostAction, StreamedJson } from './http-server.js';

/** A client described by hand, for `/debug/preview`. */
export interface PreviewQuery {
  readonly nodeId: string;
  readonly metadata: Readonly<Record<string, string>>;
  /** Peer IP address; default 127.0.0.1. */
  readonly peer?: string;
  /** SANs of a client certificate (`URI:spiffe://...`). */
  readonly sans?: readonly string[];
}

/** A change announced over HTTP to a source (a forge's webhook), and the answer. */
export interface Notification {
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/** What the debug pages read and do, each a function of the running parts. */
export interface DebugPageSources {
  /** The merge's current snapshot. */
  snapshot(): ConfigSnapshot;
  /** One report per connected client. */
  clients(): unknown;
  /** Serving counters and process figures. */
  counters(): unknown;
  /** Starts a new window of the event-loop delay figures. */
  resetCounters(): void;
  /** The persisted state: folders, etcd, writes, problems. */
  state(): unknown;
  /** What a client with this identity would receive now. */
  preview(query: PreviewQuery): unknown;
  /** Per source type, the details of each source that has some (`/debug/<type>`). */
  details(type: string): unknown[];
  /**
   * Whether the named source takes notifications, decided before a body is read: undefined
   * when no source of `type` has that name (or it takes none over HTTP), the answer to every one
   * when it refuses them all (no webhook configured), `'ready'` when it takes them.
   */
  notifiable(type: string, name: string): 'ready' | { status: number; body: unknown } | undefined;
  /** Hands a notification to the named source; undefined when no source of `type` has that name. */
  notify(
    type: string,
    name: string,
    notification: Notification,
  ): Promise<{ status: number; body: unknown }> | undefined;
  /** Applies a source's held update: whether it had one, or undefined for an unknown source. */
  confirm(name: string): boolean | undefined;
  /** The policies in force and a change of them the guard holds. */
  policies(): unknown;
  /** Applies the held change of the policies: whether there was one. */
  confirmPolicies(): boolean;
}

/** The GET pages: `/debug/<name>`. */
export function debugPages(from: DebugPageSources): Readonly<Record<string, DebugPage>> {
  return {
    configz: (url) => configz(from.snapshot(), url),
    syncz: () => from.clients(),
    sources: () => from.snapshot().sources.map(describeSource),
    counters: () => from.counters(),
    rejections: () => from.snapshot().sources.flatMap((s) => s.rejections),
    conflicts: () => from.snapshot().conflicts,
    git: () => from.details('git'),
    state: () => from.state(),
    preview: (url) => from.preview(previewQuery(url)),
    policies: () => from.policies(),
  };
}

/** Source notifications, `/hooks/<type>/<name>` (a forge's webhook): served where forges can reach them. */
export function hookActions(from: Pick<DebugPageSources, 'notify' | 'notifiable'>): readonly PostAction[] {
  const unknown = (type: string, name: string): ActionResult => ({
    status: 404,
    body: { error: `no ${type} source named "${truncateForLog(name, 100)}"` },
  });
  return [
    {
      pattern: /^\/hooks\/([a-z-]+)\/([^/]+)$/,
      // The source is looked up before a body is read: a body costs memory, and the port is public.
      admit: (match) => {
        const type = match[1] ?? '';
        const name = decodeOrKeep(match[2] ?? '');
        const state = from.notifiable(type, name);
        if (state === undefined) return unknown(type, name);
        return state === 'ready' ? undefined : state;
      },
      handle: async (match, body, headers) => {
        const type = match[1] ?? '';
        const name = decodeOrKeep(match[2] ?? '');
        const answer = from.notify(type, name, { headers, body });
        return answer ?? unknown(type, name);
      },
    },
  ];
}

/** The admin POST endpoints: counters reset and confirmations of held updates. */
export function debugActions(from: DebugPageSources): readonly PostAction[] {
  return [
    {
      pattern: /^\/debug\/counters\/reset$/,
      handle: () => {
        from.resetCounters();
        return { status: 200, body: { reset: true } };
      },
    },
    {
      pattern: /^\/debug\/policies\/confirm$/,
      handle: () =>
        from.confirmPolicies()
          ? { status: 200, body: { confirmed: 'policies' } }
          : { status: 409, body: { error: 'no change of the policies is held' } },
    },
    {
      pattern: /^\/debug\/sources\/([^/]+)\/confirm$/,
      handle: (match) => {
        const name = decodeOrKeep(match[1] ?? '');
        const confirmed = from.confirm(name);
        if (confirmed === undefined) return { status: 404, body: { error: `no source named ${name}` } };
        return confirmed
          ? { status: 200, body: { confirmed: name } }
          : { status: 409, body: { error: `source ${name} has no held update` } };
      },
    },
  ];
}

function decodeOrKeep(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** `/debug/preview?node=ID&meta.K=V&peer=IP&san=URI:...` */
function previewQuery(url: URL): PreviewQuery {
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

/**
 * `/debug/configz[?kind=GLOB&namespace=GLOB]`: every served object (or those whose kind, by its
 * name or `<group>/<Kind>`, and namespace match), decoded, as a JSON array streamed one object at a
 * time: a large mesh never stalls the event loop for the whole answer.
 */
function configz(snapshot: ConfigSnapshot, url: URL): StreamedJson | { error: string } {
  const kinds = url.searchParams.getAll('kind');
  const namespaces = url.searchParams.getAll('namespace');
  const problem = [...kinds, ...namespaces].map((g) => globProblem(g)).find((p) => p !== undefined);
  if (problem !== undefined) return { error: `configz filter: ${problem}` };
  const kindMatches = globMatcher(kinds);
  const namespaceMatches = globMatcher(namespaces);
  function* parts(): Generator<string> {
    yield '[';
    let first = true;
    for (const kind of snapshot.kinds.values()) {
      const short = kind.kind.slice(kind.kind.indexOf('/') + 1);
      if (kinds.length > 0 && !kindMatches(short) && !kindMatches(kind.kind)) continue;
      for (const r of kind.resources) {
        if (namespaces.length > 0 && !namespaceMatches(r.namespace)) continue;
        const object = {
          kind: r.kind,
          namespace: r.namespace,
          name: r.name,
          version: r.version,
          labels: r.labels,
          annotations: r.annotations,
          spec: decodeBody(r.kind, r.body),
        };
        yield `${first ? '\n' : ',\n'}${JSON.stringify(object)}`;
        first = false;
      }
    }
    yield '\n]\n';
  }
  return new StreamedJson(parts());
}

function describeSource(s: SourceReport): unknown {
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
