import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { MeshmuxError } from '../core/errors.js';

const DURATION = /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/;

/** A Go-style duration (`500ms`, `2s`, `1m30s`) in milliseconds. */
export function durationMs(text: string): number {
  let total = 0;
  const unitMs: Record<string, number> = {
    ns: 1e-6,
    us: 1e-3,
    µs: 1e-3,
    ms: 1,
    s: 1000,
    m: 60_000,
    h: 3_600_000,
  };
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) {
    total += Number(m[1]) * (unitMs[m[2] ?? ''] ?? 0);
  }
  return total;
}

const Duration = z.string().regex(DURATION, 'a duration such as 500ms, 2s or 1m30s').transform(durationMs);

const HostPort = z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):\d{1,5}$/, 'host:port');

const SourceName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'a DNS-1123 label (lower-case letters, digits and -)')
  .max(63);

const CommonSource = {
  name: SourceName,
  /** Namespace of documents that carry none. */
  namespace: z.string().min(1).default('default'),
};

const FileSourceConfig = z.strictObject({
  ...CommonSource,
  type: z.literal('file'),
  path: z.string().min(1),
  rescanInterval: Duration.optional(),
});

const SourceConfig = z.discriminatedUnion('type', [FileSourceConfig]);

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
  /** MeshConfig to answer istiod's MeshConfig request with; without it that request is never answered. */
  mesh: z.record(z.string(), z.unknown()).optional(),
});

export type SourceConfig = z.infer<typeof SourceConfig>;
export type FileSourceConfig = z.infer<typeof FileSourceConfig>;

/** meshmux's configuration after validation; paths are absolute. */
export type MeshmuxConfig = z.infer<typeof ConfigFile> & {
  /** Where it was read from, for messages. */
  readonly origin: string;
};

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
  const sources = parsed.data.sources.map((s) => ({ ...s, path: path.resolve(baseDir, s.path) }));
  return { ...parsed.data, sources, origin };
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
