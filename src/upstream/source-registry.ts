/**
 * Every source type meshmux knows, and how its settings become a running source: the one place
 * that names them all. The composition root asks it for a source; what a source can do besides
 * its events (take a webhook, show details) is on the source itself (see `UpstreamSource`).
 */
import type { ConfigResource } from '../core/resource.js';
import type { SourceConfig } from '../settings/source-config.js';
import type { ServerTlsReads } from '../tls/server-tls.js';
import { FileSource } from './file/file-source.js';
import { GitSource } from './git/git-source.js';
import { KubernetesSource, loadKubernetesClient } from './kubernetes/kubernetes-source.js';
import { McpSinkSource } from './mcp/mcp-sink-source.js';
import { McpSource } from './mcp/mcp-source.js';
import type { UpstreamSource } from './upstream-source.js';
import { XdsSource } from './xds/xds-source.js';
import { ZookeeperSource } from './zookeeper/zookeeper-source.js';

/** What the composition root hears from sources besides their events; every hook is optional. */
export interface SourceHooks {
  /**
   * What each read of a listening source's TLS files finds (`mcp-sink`), for the source of that
   * name. Asked for when the source is built, which reads nothing: its reads say `listening`.
   */
  readonly tlsReads?: (source: string) => ServerTlsReads;
}

/**
 * One factory per source type; the mapped type makes a missing or mistyped entry a compile error.
 * `restored` gives what the source served before a restart, asked for once it starts; sources
 * that keep a broken file's objects (file, git) start from it.
 */
const SOURCE_FACTORIES: {
  [T in SourceConfig['type']]: (
    config: Extract<SourceConfig, { type: T }>,
    restored: (() => Iterable<ConfigResource> | undefined) | undefined,
    hooks: SourceHooks,
  ) => UpstreamSource;
} = {
  file: (c, restored) =>
    new FileSource({
      name: c.name,
      path: c.path,
      defaultNamespace: c.namespace,
      ...(c.rescanInterval === undefined ? {} : { rescanMs: c.rescanInterval }),
      ...(c.vanishGrace === undefined ? {} : { vanishGraceMs: c.vanishGrace }),
      ...(c.maxFileSize === undefined ? {} : { maxFileBytes: c.maxFileSize }),
      restored,
    }),
  git: (c, restored) =>
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
      insecureWebhook: c.webhook?.insecure === true,
      cacheDir: c.cacheDir,
      maxFileBytes: c.maxFileSize,
      restored,
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
  kubernetes: (c) =>
    new KubernetesSource({
      name: c.name,
      defaultNamespace: c.namespace,
      ...(c.kubeconfig === undefined ? {} : { kubeconfig: c.kubeconfig }),
      ...(c.context === undefined ? {} : { context: c.context }),
      ...(c.namespaces === undefined ? {} : { namespaces: c.namespaces }),
      ...(c.labelSelector === undefined ? {} : { labelSelector: c.labelSelector }),
      ...(c.kinds === undefined ? {} : { kinds: c.kinds }),
    }),
  xds: (c) => new XdsSource(c),
  mcp: (c) => new McpSource(c),
  'mcp-sink': (c, _restored, hooks) => new McpSinkSource({ ...c, tlsReads: hooks.tlsReads?.(c.name) }),
};

/**
 * Builds the source `config` describes; it starts when the merge subscribes to it. `restored`
 * gives the objects it served before a restart (its persisted record's, when there is one), asked
 * for when it starts; `hooks` hear what it says besides its events. Throws when the settings
 * cannot make one.
 */
export function createSource(
  config: SourceConfig,
  restored?: () => Iterable<ConfigResource> | undefined,
  hooks: SourceHooks = {},
): UpstreamSource {
  // TypeScript cannot correlate `config.type` with the entry's parameter; the mapped type above does.
  const factory = SOURCE_FACTORIES[config.type] as (
    c: SourceConfig,
    restored: (() => Iterable<ConfigResource> | undefined) | undefined,
    hooks: SourceHooks,
  ) => UpstreamSource;
  return factory(config, restored, hooks);
}

/**
 * Loads the client libraries the sources of `configs` need and a process without them never
 * loads (the Kubernetes client); call before {@link createSource}. Rejects when one cannot be loaded.
 */
export async function loadSourceLibraries(configs: readonly SourceConfig[]): Promise<void> {
  if (configs.some((c) => c.type === 'kubernetes')) await loadKubernetesClient();
}
