import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { MeshmuxError } from '../core/errors.js';
import { SourceConfig } from './source-config.js';
import { Duration, HostPort } from './sources/common.js';

const Selector = z.strictObject({
  namespaces: z.array(z.string().min(1)).optional(),
  kinds: z.array(z.string().min(1)).optional(),
  labels: z.record(z.string(), z.string()).optional(),
  names: z.array(z.string().min(1)).optional(),
});

const Policy = z.strictObject({
  name: z.string().min(1),
  match: z
    .strictObject({
      nodeId: z.string().optional(),
      metadata: z.record(z.string(), z.string()).optional(),
      peerCidrs: z
        .array(z.string().regex(/^[0-9a-fA-F:.]+(\/\d{1,3})?$/, 'an IPv4 or IPv6 CIDR such as 10.0.0.0/8'))
        .optional(),
      certSan: z.array(z.string().min(1)).optional(),
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

const ConfigFile = z.strictObject({
  server: z
    .strictObject({
      /** Plaintext ADS, as every istiod release can dial it. */
      xds: HostPort.default('127.0.0.1:15010'),
      /** Server-authenticated TLS ADS (istiod 1.26+), mTLS for clients that present certificates. */
      xdsTls: HostPort.optional(),
      tls: ServerTls.optional(),
      http: HostPort.default('127.0.0.1:15014'),
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
    })
    .prefault({})
    .refine((s) => (s.xdsTls === undefined) === (s.tls === undefined), {
      message: 'xdsTls and tls go together',
    }),
  /** Ordered; the first policy matching a client decides what it receives. None: everything to everyone. */
  policies: z.array(Policy).default([]),
  /** How long to wait for every source before serving what has synced. */
  syncTimeout: Duration.default(30_000),
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
export type PolicyConfig = z.infer<typeof Policy>;

/** meshmux's configuration after validation; paths are absolute. */
export type MeshmuxConfig = z.infer<typeof ConfigFile> & {
  /** Where it was read from, for messages. */
  readonly origin: string;
  /** What relative paths in it resolve against. */
  readonly baseDir: string;
};

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
 * Parses and validates a configuration document. Relative source paths resolve against `baseDir`.
 * Throws one MeshmuxError (code CONFIG) listing every problem with its field path.
 */
export function parseMeshmuxConfig(text: string, origin: string, baseDir: string): MeshmuxConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text, { prettyErrors: true });
  } catch (err) {
    throw new MeshmuxError(
      'CONFIG',
      `not valid YAML: ${(err as Error).message}`,
      { file: origin },
      { cause: err },
    );
  }
  const parsed = ConfigFile.safeParse(raw ?? {});
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${formatPath(i.path)}: ${i.message}`);
    throw new MeshmuxError('CONFIG', `invalid configuration:\n  ${problems.join('\n  ')}`, { file: origin });
  }
  const policyNames = new Set<string>();
  for (const [i, p] of parsed.data.policies.entries()) {
    if (policyNames.has(p.name)) {
      throw new MeshmuxError('CONFIG', `policy name "${p.name}" is used twice`, {
        file: origin,
        field: `policies[${i}].name`,
      });
    }
    policyNames.add(p.name);
  }
  const names = new Set<string>();
  for (const [i, s] of parsed.data.sources.entries()) {
    if (names.has(s.name)) {
      throw new MeshmuxError('CONFIG', `source name "${s.name}" is used twice`, {
        file: origin,
        field: `sources[${i}].name`,
      });
    }
    names.add(s.name);
  }
  return {
    ...parsed.data,
    server: resolvePaths(parsed.data.server, baseDir),
    sources: parsed.data.sources.map((s) => resolvePaths(s, baseDir)),
    origin,
    baseDir,
  };
}

/** Reads a configuration file; relative paths in it resolve against `baseDir` (default: the working directory). */
export function loadMeshmuxConfig(file: string, baseDir = process.cwd()): MeshmuxConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new MeshmuxError('CONFIG', `cannot read: ${(err as Error).message}`, { file }, { cause: err });
  }
  return parseMeshmuxConfig(text, file, baseDir);
}

function formatPath(p: readonly PropertyKey[]): string {
  if (p.length === 0) return '(top level)';
  return p.map((k, i) => (typeof k === 'number' ? `[${k}]` : `${i === 0 ? '' : '.'}${String(k)}`)).join('');
}
