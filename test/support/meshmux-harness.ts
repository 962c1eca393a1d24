import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startMeshmux, type RunningMeshmux } from '../../src/app.js';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';

// Tests never share persisted state through the default folder (a test that wants persistence
// names its own `state.dir`); `npm test` sets this too, this covers running one file by hand.
process.env['MESHMUX_STATE_DIR'] ??= 'none';

/** The example mesh shipped in config/examples. */
export const EXAMPLES_DIR = path.join(PACKAGE_ROOT, 'config', 'examples');

/** A temporary folder removed by `dispose`. */
export async function tempDir(
  prefix = 'meshmux-test-',
): Promise<{ dir: string; dispose: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  return { dir, dispose: () => rm(dir, { recursive: true, force: true }) };
}

/** A copy of the example mesh in a temporary folder, for tests that edit files. */
export async function copyOfExamples(): Promise<{ dir: string; dispose: () => Promise<void> }> {
  const t = await tempDir();
  await cp(EXAMPLES_DIR, t.dir, { recursive: true });
  return t;
}

/**
 * Starts meshmux on ephemeral loopback ports from a YAML configuration; relative paths resolve
 * against `baseDir`.
 */
export async function startFromYaml(
  yaml: string,
  baseDir: string,
  ports: { xds?: string } = {},
): Promise<RunningMeshmux & { xds: string; http: string; admin: string }> {
  const config = parseMeshmuxConfig(yaml, 'test config', baseDir);
  const running = await startMeshmux(config, {
    xds: ports.xds ?? '127.0.0.1:0',
    http: '127.0.0.1:0',
    admin: '127.0.0.1:0',
  });
  return {
    ...running,
    xds: `127.0.0.1:${running.xdsPort}`,
    http: `http://127.0.0.1:${running.httpPort}`,
    admin: `http://127.0.0.1:${running.adminPort}`,
  };
}
