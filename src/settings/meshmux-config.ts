import { readFileSync } from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { LineCounter, isMap, isNode, isScalar, parseDocument, type Document } from 'yaml';
import { z } from 'zod';
import { closestWord } from '../core/closest-word.js';
import { hostOfAddress, isLoopbackHost } from '../core/loopback.js';
import { MeshmuxError, type ErrorLocation } from '../core/errors.js';
import { fieldsAt, type SchemaNode } from './json-schema-fields.js';
import { SourceConfig, withRules } from './source-config.js';
import { Cidr, Duration, Glob, ListenAddress } from './sources/common.js';

const Selector = z.strictObject({
  namespaces: z.array(Glob.min(1)).optional(),
  kinds: z.array(Glob.min(1)).optional(),
  labels: z.record(z.string(), z.string()).optional(),
  names: z.array(Glob.min(1)).optional(),
});

const Policy = z.strictObject({
  name: z.string().min(1),
  match: z
    .strictObject({
      nodeId: Glob.optional(),
      metadata: z.record(z.string(), Glob).optional(),
      peerCidrs: z.array(Cidr).optional(),
      certSan: z.array(Glob.min(1)).optional(),
      revision: z.string().optional(),
    })
    .optional(),
  allow: Selector.optional(),
  deny: Selector.optional(),
  requireClientCert: z.boolean().default(false),
});

const ServerTls = z.strictObject({
  /** Server certificate chain and key (PEM files), watched and reloaded without dropping streams. */
  cert: z.string().min(1),
  key: z.string().min(1),
  /** CA bundle to verify client certificates with; clients may still connect without one. */
  clientCa: z.string().min(1).optional(),
  /** How often the files are checked for changes. */
  refreshInterval: Duration.default(10_000),
});

export const ConfigFile = z.strictObject({
  server: z
    .strictObject({
      /** Plaintext ADS, as every istiod release can dial it. */
      xds: ListenAddress.default('127.0.0.1:15010'),
      /** Server-authenticated TLS ADS (istiod 1.26+), mTLS for clients that present certificates. */
      xdsTls: ListenAddress.optional(),
      tls: ServerTls.optional(),
      /** Read-only, for Prometheus and the kubelet: `/metrics`, `/healthz`, `/ready`; and git webhooks. */
      http: ListenAddress.default('127.0.0.1:15014'),
      /** The status page, `/debug/*` and the POST endpoints; never exposed beyond loopback without a token. */
      admin: z
        .strictObject({
          address: ListenAddress.default('127.0.0.1:15015'),
          /** File holding the bearer token every request must carry; required when bound beyond loopback. */
          tokenFile: z.string().min(1).optional(),
          /** A dashboard of this deployment (Grafana), linked from the status page. */
          dashboardUrl: z.url({ protocol: /^https?$/, error: 'an http:// or https:// URL' }).optional(),
        })
        .prefault({})
        .refine((a) => a.tokenFile !== undefined || isLoopbackHost(hostOfAddress(a.address)), {
          message:
            'the admin listener is bound beyond loopback: set tokenFile (a bearer token every request must carry)',
          path: ['tokenFile'],
        }),
      /** A response not read by its istiod within this closes the stream with UNAVAILABLE (it reconnects). */
      sendTimeout: Duration.default(30_000),
      /** Distinct views (policy × revision) kept at once; a client needing one more is refused. */
      maxViews: z.number().int().min(1).default(1000),
      /** How long a view and its built responses outlive its last client. */
      viewGrace: Duration.default(30_000),
      /** Admission limits per stream: type URLs, node id length, node metadata bytes (as JSON). */
      maxTypesPerStream: z.number().int().min(1).default(100),
      maxNodeIdLength: z.number().int().min(1).default(1024),
      maxMetadataBytes: z
        .number()
        .int()
        .min(1)
        .default(64 * 1024),
      /**
       * Bytes of one request message a client may send (istiod's are a few kilobytes); a larger
       * one ends its stream with RESOURCE_EXHAUSTED before it is read.
       */
      maxRequestBytes: z
        .number()
        .int()
        .min(64 * 1024)
        .default(4 * 1024 * 1024),
      /** A stream whose client is not admitted by a first request within this is closed with DEADLINE_EXCEEDED. */
      firstRequestTimeout: Duration.default(10_000),
      /** Streams one connection may have open at once (istiod opens one); HTTP/2 refuses more. */
      maxStreamsPerConnection: z.number().int().min(1).default(100),
    })
    .prefault({})
    .refine((s) => (s.xdsTls === undefined) === (s.tls === undefined), {
      message: 'xdsTls and tls go together',
    }),
  /** Ordered; the first policy matching a client decides what it receives. None: everything to everyone. */
  policies: z.array(Policy).default([]),
  /**
   * How a reload or a restart that changes the policies is judged before connected istiods lose
   * what they hold: a change that would leave some istiod with nothing (`onEmpty: keep`), or take
   * more than `maxDeleteRatio` of its objects (and more than 10), is held, and the policies in force
   * keep serving until `meshmux confirm --policies` or `confirmAfter`.
   */
  policyGuard: z
    .strictObject({
      onEmpty: z.enum(['keep', 'accept']).default('keep'),
      maxDeleteRatio: z.number().min(0).max(1).default(0.5),
      confirmAfter: Duration.optional(),
    })
    .prefault({}),
  /**
   * After this long, sources marked `required: false` that have not synced are no longer waited for,
   * and required ones still missing are named in the log and on /ready (their kinds stay unanswered).
   */
  syncTimeout: Duration.default(30_000),
  /**
   * Where each source's last good state is kept across restarts. Absent: `$MESHMUX_STATE_DIR`, else
   * `$XDG_STATE_HOME/meshmux`, else `~/.local/state/meshmux` (a temporary folder if that cannot be
   * created); `none` turns persistence off. Relative paths resolve like every other path.
   */
  state: z
    .strictObject({
      dir: z.string().min(1).optional(),
      /**
       * How long a change waits for its record to be on disk before istiods are sent it anyway
       * (a slow disk; counted in meshmux_state_served_unkept_total). Written first, a change
       * sent survives a crash right after it.
       */
      keepWait: Duration.default(100).refine((ms) => ms <= 10_000, { message: 'at most 10s' }),
      /**
       * Shared state of a fleet of replicas (opt-in): each source's last good state also goes to
       * etcd, written by one replica chosen by lease election, so a replica on an empty disk starts
       * from it. Never on the serving path: etcd down is reported, not waited for.
       */
      etcd: z
        .strictObject({
          endpoints: z
            .array(
              z.string().regex(/^https?:\/\/[^/\s]+:\d{1,5}$/, 'an etcd client URL, http(s)://host:port'),
            )
            .min(1),
          prefix: z
            .string()
            .regex(/^\/(?:[^\s]*\/)?$/, 'a key prefix that starts and ends with /')
            .default('/meshmux/'),
          tls: z
            .strictObject({
              ca: z.string().min(1).optional(),
              cert: z.string().min(1).optional(),
              key: z.string().min(1).optional(),
            })
            .refine((t) => (t.cert === undefined) === (t.key === undefined), {
              message: 'give cert and key together',
            })
            .optional(),
          username: z.string().min(1).optional(),
          passwordFile: z.string().min(1).optional(),
          /** The writer's lease: a writer that dies is replaced within this. */
          leaseTtl: Duration.default(10_000).refine((ms) => ms >= 2_000 && ms <= 600_000, {
            message: 'between 2s and 10m',
          }),
          /**
           * How often the writer compacts etcd's history, keeping the last interval of it; `0s`
           * when etcd compacts itself (`--auto-compaction-retention`).
           */
          compaction: Duration.default(60_000).refine((ms) => ms === 0 || (ms >= 1_000 && ms <= 86_400_000), {
            message: '0s (etcd compacts itself) or between 1s and 24h',
          }),
        })
        .refine((e) => (e.username === undefined) === (e.passwordFile === undefined), {
          message: 'give username and passwordFile together',
        })
        .optional(),
    })
    .prefault({}),
  sources: z.array(SourceConfig).min(1, 'at least one source'),
  merge: z
    .strictObject({
      /** On a semantic clash (two ServiceEntries for one host, ...): serve every party, or only the highest-priority source's. */
      semanticConflicts: z.enum(['serve-all', 'highest-priority']).default('serve-all'),
    })
    .prefault({}),
  /** MeshConfig to answer istiod's MeshConfig request with; without it that request is never answered. */
  mesh: z.record(z.string(), z.unknown()).optional(),
});

export type { SourceConfig };

let jsonSchema: SchemaNode | undefined;

/**
 * The JSON Schema of a configuration file as users write it (durations as text, defaults
 * optional), generated from the schema meshmux validates with, so editors and meshmux agree.
 * Checks only code can make (a glob that compiles, a CIDR's prefix length) are left to meshmux:
 * `meshmux check-config` runs them.
 */
export function configJsonSchema(): SchemaNode {
  jsonSchema ??= {
    ...z.toJSONSchema(ConfigFile, { io: 'input', unrepresentable: 'any' }),
    title: 'meshmux configuration',
    description: 'The configuration file of meshmux (meshmux serve --config FILE).',
  };
  return jsonSchema;
}
export type PolicyConfig = z.infer<typeof Policy>;

/** Policies read back from where a process kept them, checked as a configuration's are; throws when they fail. */
export function parsePolicies(value: unknown): PolicyConfig[] {
  return z.array(Policy).parse(value);
}

/** meshmux's configuration after validation; paths are absolute. */
export type MeshmuxConfig = Omit<z.infer<typeof ConfigFile>, 'sources'> & {
  /** The sources in configuration order, each with its merge rules apart. */
  readonly sources: readonly SourceConfig[];
  /** Where it was read from, for messages. */
  readonly origin: string;
  /** What relative paths in it resolve against. */
  readonly baseDir: string;
};

/**
 * When a running meshmux applies each top-level setting: sources and policies on a reload, the
 * others only when it starts (they shape listeners, the state stores and the merge it is built
 * with). Typed over every setting, so a new one cannot be left out.
 */
const APPLIED_ON: Readonly<Record<Exclude<keyof MeshmuxConfig, 'origin' | 'baseDir'>, 'reload' | 'restart'>> =
  {
    server: 'restart',
    policies: 'reload',
    policyGuard: 'reload',
    syncTimeout: 'restart',
    state: 'restart',
    sources: 'reload',
    merge: 'restart',
    mesh: 'restart',
  };

/**
 * The top-level settings that apply only on restart and that `next` sets otherwise than
 * `running` (the configuration a process started with), in the order of the file's schema.
 */
export function restartOnlyChanges(running: MeshmuxConfig, next: MeshmuxConfig): string[] {
  const settings = Object.keys(APPLIED_ON) as Array<keyof typeof APPLIED_ON>;
  return settings.filter(
    (key) => APPLIED_ON[key] === 'restart' && !isDeepStrictEqual(running[key], next[key]),
  );
}

/** Fields holding local file paths, resolved against the configuration's base folder. */
const PATH_FIELDS = new Set([
  'path',
  'ca',
  'cert',
  'key',
  'sshKey',
  'knownHosts',
  'tokenFile',
  'passwordFile',
  'secretFile',
  'cacheDir',
  'kubeconfig',
]);

function resolvePaths<T>(value: T, baseDir: string): T {
  if (Array.isArray(value)) return value.map((v: unknown) => resolvePaths(v, baseDir)) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] =
      PATH_FIELDS.has(k) && typeof v === 'string' ? path.resolve(baseDir, v) : resolvePaths(v, baseDir);
  }
  return out as T;
}

/**
 * The separate problems of a configuration error from `parseMeshmuxConfig`, each with its file,
 * line (when known) and field; any other error is its own only problem.
 */
export function configProblems(err: MeshmuxError): readonly MeshmuxError[] {
  const cause: unknown = err.cause;
  if (Array.isArray(cause) && cause.length > 0 && cause.every((c) => c instanceof MeshmuxError)) {
    return cause;
  }
  return [err];
}

/** One CONFIG error for several problems: the message lists them all, `configProblems` returns them. */
export function configError(
  origin: string,
  summary: string,
  problems: readonly MeshmuxError[],
): MeshmuxError {
  const list = problems.map((p) =>
    p.location.field === undefined ? p.message : `${p.location.field}: ${p.message}`,
  );
  return new MeshmuxError(
    'CONFIG',
    `${summary}:\n  ${list.join('\n  ')}`,
    { file: origin },
    { cause: problems },
  );
}

/** The 1-based line and column of the deepest node that exists along `fieldPath` (a key's own position for a key). */
function positionOf(
  doc: Document,
  lines: LineCounter,
  fieldPath: readonly PropertyKey[],
): { line?: number; column?: number } {
  for (let n = fieldPath.length; n >= 0; n--) {
    const parent: unknown = n === 0 ? undefined : doc.getIn(fieldPath.slice(0, n - 1), true);
    // The key itself when the path ends at a key of a map: that is where a typo is.
    const key =
      n > 0 && isMap(parent)
        ? parent.items.find((p) => isScalar(p.key) && p.key.value === fieldPath[n - 1])?.key
        : undefined;
    const node: unknown = key ?? (n === 0 ? doc.contents : doc.getIn(fieldPath.slice(0, n), true));
    if (isNode(node) && node.range !== undefined && node.range !== null) {
      const pos = lines.linePos(node.range[0]);
      return { line: pos.line, column: pos.col };
    }
  }
  return {};
}

/** "unknown field" with the nearest allowed name at that place, when one is near. */
function unknownField(key: string, at: readonly PropertyKey[]): string {
  const suggestion = closestWord(key, fieldsAt(configJsonSchema(), at));
  return `unknown field "${key}"${suggestion === undefined ? '' : ` (did you mean "${suggestion}"?)`}`;
}

/**
 * Parses and validates a configuration document. Relative source paths resolve against `baseDir`.
 * Throws one MeshmuxError (code CONFIG) listing every problem with its field path; its
 * `configProblems` are the same problems one by one, each with the line it is on.
 */
export function parseMeshmuxConfig(text: string, origin: string, baseDir: string): MeshmuxConfig {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  if (doc.errors.length > 0) {
    const problems = doc.errors.map(
      (e) =>
        new MeshmuxError(
          'CONFIG',
          `not valid YAML: ${e.message.replace(/ at line \d+, column \d+:?[\s\S]*$/, '')}`,
          { file: origin, line: lines.linePos(e.pos[0]).line, column: lines.linePos(e.pos[0]).col },
          { cause: e },
        ),
    );
    throw configError(origin, 'not valid YAML', problems);
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    const problem = new MeshmuxError('CONFIG', `not valid YAML: ${(err as Error).message}`, { file: origin });
    throw configError(origin, 'not valid YAML', [problem]);
  }
  const at = (fieldPath: readonly PropertyKey[]): ErrorLocation => {
    const pos = positionOf(doc, lines, fieldPath);
    return { file: origin, ...pos, field: formatPath(fieldPath) };
  };
  const parsed = ConfigFile.safeParse(raw ?? {});
  if (!parsed.success) {
    const problems = parsed.error.issues.flatMap((i) =>
      i.code === 'unrecognized_keys'
        ? i.keys.map((key) => new MeshmuxError('CONFIG', unknownField(key, i.path), at([...i.path, key])))
        : [new MeshmuxError('CONFIG', i.message, at(i.path))],
    );
    throw configError(origin, 'invalid configuration', problems);
  }
  const duplicates: MeshmuxError[] = [];
  const policyNames = new Set<string>();
  for (const [i, p] of parsed.data.policies.entries()) {
    if (policyNames.has(p.name)) {
      duplicates.push(
        new MeshmuxError('CONFIG', `policy name "${p.name}" is used twice`, at(['policies', i, 'name'])),
      );
    }
    policyNames.add(p.name);
  }
  const names = new Set<string>();
  for (const [i, s] of parsed.data.sources.entries()) {
    if (names.has(s.name)) {
      duplicates.push(
        new MeshmuxError('CONFIG', `source name "${s.name}" is used twice`, at(['sources', i, 'name'])),
      );
    }
    names.add(s.name);
  }
  if (duplicates.length > 0) throw configError(origin, 'invalid configuration', duplicates);
  const stateDir = parsed.data.state.dir;
  return {
    ...parsed.data,
    state: {
      ...(stateDir === undefined || stateDir === 'none'
        ? parsed.data.state
        : { dir: path.resolve(baseDir, stateDir), keepWait: parsed.data.state.keepWait }),
      ...(parsed.data.state.etcd === undefined
        ? {}
        : { etcd: resolvePaths(parsed.data.state.etcd, baseDir) }),
    },
    server: resolvePaths(parsed.data.server, baseDir),
    sources: parsed.data.sources.map((s) => withRules(resolvePaths(s, baseDir))),
    origin,
    baseDir,
  };
}

/** Reads a configuration file; relative paths in it resolve against `baseDir` (default: the file's own folder). */
export function loadMeshmuxConfig(file: string, baseDir = path.dirname(path.resolve(file))): MeshmuxConfig {
  return readMeshmuxConfig(file, baseDir).config;
}

/** {@link loadMeshmuxConfig}, with the text the configuration was read from. */
export function readMeshmuxConfig(
  file: string,
  baseDir = path.dirname(path.resolve(file)),
): { config: MeshmuxConfig; text: string } {
  const text = readConfigText(file);
  return { config: parseMeshmuxConfig(text, file, baseDir), text };
}

/** The text of a configuration file; one that cannot be read is a CONFIG error naming it. */
export function readConfigText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new MeshmuxError('CONFIG', `cannot read: ${(err as Error).message}`, { file }, { cause: err });
  }
}

function formatPath(p: readonly PropertyKey[]): string {
  if (p.length === 0) return '(top level)';
  return p.map((k, i) => (typeof k === 'number' ? `[${k}]` : `${i === 0 ? '' : '.'}${String(k)}`)).join('');
}
