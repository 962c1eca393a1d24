import { pino, type Logger } from 'pino';
import { redactSecrets } from './secrets.js';

export type { Logger };

/**
 * The root logger. Level from `MESHMUX_LOG_LEVEL` (or `LOG_LEVEL`), default `info`; tests set
 * `silent`. Components take a child with `{ component }` so lines can be filtered. Every line
 * goes through `redactSecrets` on its way out.
 */
/** Where log lines go: standard output for `serve`, standard error for the commands that print data. */
let destination: { write(line: string): unknown } = pino.destination({ dest: 1, sync: true });

/** Sends every later log line to standard error, keeping standard output for a command's data. */
export function sendLogsToStderr(): void {
  destination = pino.destination({ dest: 2, sync: true });
}

export const rootLogger: Logger = pino(
  {
    level: process.env['MESHMUX_LOG_LEVEL'] ?? process.env['LOG_LEVEL'] ?? 'info',
    base: { app: 'meshmux' },
    // Messages and fields carry text from outside (provider URLs, repository URLs, upstream
    // errors): the userinfo of URLs and credential parameters never reach the log.
    hooks: { streamWrite: redactSecrets },
  },
  { write: (line: string) => destination.write(line) },
);

/** A child logger for one component. */
export function componentLogger(component: string, bindings: Record<string, unknown> = {}): Logger {
  return rootLogger.child({ component, ...bindings });
}

/** The levels `--log-level` and `MESHMUX_LOG_LEVEL` accept. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Sets the root logger's level (a command-line flag wins over the environment). Child loggers take
 * the level they are created with, so call this before any component starts.
 */
export function setLogLevel(level: LogLevel): void {
  rootLogger.level = level;
}
