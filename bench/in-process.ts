/**
 * What the benchmark scripts that run meshmux in their own process share: starting it on
 * ephemeral loopback ports, waiting for a condition it has no hook for, and reading `--name value`
 * options.
 */
import { startMeshmux, type RunningMeshmux } from '../src/app.js';
import { setLogLevel, type LogLevel } from '../src/core/logger.js';
import { parseMeshmuxConfig } from '../src/settings/meshmux-config.js';

/** meshmux on `127.0.0.1:0` listeners, its configuration's paths read from `dir`; logs silent unless `BENCH_SERVER_LOG` says otherwise. */
export async function startInProcess(yaml: string, dir = process.cwd()): Promise<RunningMeshmux> {
  // In the benchmark's own process its logs would bury the figures.
  setLogLevel((process.env['BENCH_SERVER_LOG'] as LogLevel | undefined) ?? 'silent');
  return startMeshmux(parseMeshmuxConfig(yaml, 'bench config', dir), {
    xds: '127.0.0.1:0',
    http: '127.0.0.1:0',
    admin: '127.0.0.1:0',
  });
}

/** Resolves once `done()` holds, polled every 5 ms; throws after `timeoutMs`, adding `state()` to the message. */
export async function until(
  done: () => boolean,
  timeoutMs: number,
  what: string,
  state: () => string = () => '',
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    if (performance.now() > deadline)
      throw new Error(`no ${what} within ${timeoutMs} ms ${state()}`.trimEnd());
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The value after `--<name>` on the command line, or `fallback`. */
export function option(name: string, fallback: string): string {
  const args = process.argv.slice(2);
  const at = args.indexOf(`--${name}`);
  return at < 0 ? fallback : (args[at + 1] ?? fallback);
}
