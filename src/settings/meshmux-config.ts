import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { MeshmuxError } from '../core/errors.js';
import { SourceConfig } from './source-config.js';
import { Duration, HostPort } from './sources/common.js';

const ConfigFile = z.strictObject({
  server: z
    .strictObject({
      xds: HostPort.default('127.0.0.1:15010'),
      http: HostPort.default('127.0.0.1:15014'),
    })
    .prefault({}),
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
