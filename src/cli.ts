#!/usr/bin/env node
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { Command } from 'commander';
import { startMeshmux } from './app.js';
import { MeshmuxError } from './core/errors.js';
import { componentLogger } from './core/logger.js';
import { PACKAGE_ROOT } from './core/paths.js';
import { readYamlDocuments } from './schema/yaml-reader.js';
import { loadMeshmuxConfig } from './settings/meshmux-config.js';

const DEFAULT_CONFIG = path.join(PACKAGE_ROOT, 'config', 'meshmux.yaml');

async function serve(options: { config?: string; xds?: string; http?: string }): Promise<void> {
  const log = componentLogger('cli');
  // The embedded default resolves its relative paths against the package; a user's file against the working directory.
  const config =
    options.config === undefined
      ? loadMeshmuxConfig(DEFAULT_CONFIG, PACKAGE_ROOT)
      : loadMeshmuxConfig(path.resolve(options.config));
  const running = await startMeshmux(config, {
    ...(options.xds === undefined ? {} : { xds: options.xds }),
    ...(options.http === undefined ? {} : { http: options.http }),
  });
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    running.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err: String(err) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

async function listYaml(target: string): Promise<string[]> {
  const info = await stat(target);
  if (info.isFile()) return [target];
  const entries = await readdir(target, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile() && /\.(ya?ml|json)$/i.test(e.name))
    .map((e) => path.join(e.parentPath, e.name))
    .sort();
}

/** Reads every path exactly as `serve` would and prints each problem; resolves to the error count. */
async function validate(paths: string[], options: { namespace: string }): Promise<number> {
  let errors = 0;
  let objects = 0;
  for (const target of paths) {
    let files: string[];
    try {
      files = await listYaml(target);
    } catch (err) {
      console.error(`${target}: ${(err as Error).message}`);
      errors++;
      continue;
    }
    for (const file of files) {
      const result = readYamlDocuments(await readFile(file, 'utf8'), {
        file,
        defaultNamespace: options.namespace,
      });
      objects += result.resources.length;
      for (const w of result.warnings) console.error(`warning: ${w.describe()}`);
      for (const e of result.errors) console.error(`error: ${e.describe()}`);
      errors += result.errors.length;
    }
  }
  console.log(`${objects} valid object(s), ${errors} error(s)`);
  return errors;
}

const program = new Command()
  .name('meshmux')
  .description('One MCP-over-xDS endpoint for a fleet of istiods.')
  .showHelpAfterError();

program
  .command('serve')
  .description('serve the merged config over ADS (default: the embedded config/meshmux.yaml)')
  .option('-c, --config <file>', 'configuration file')
  .option('--xds <host:port>', 'override server.xds')
  .option('--http <host:port>', 'override server.http')
  .action(serve);

program
  .command('validate')
  .description('read YAML files or folders as serve does; print every problem; exit 1 on any error')
  .argument('<paths...>', 'files or folders')
  .option('-n, --namespace <ns>', 'namespace of documents without one', 'default')
  .action(async (paths: string[], options: { namespace: string }) => {
    const errors = await validate(paths, options);
    process.exitCode = errors > 0 ? 1 : 0;
  });

program.parseAsync(process.argv).catch((err: unknown) => {
  console.error(err instanceof MeshmuxError ? `meshmux: ${err.describe()}` : err);
  process.exit(2);
});
