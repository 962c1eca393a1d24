import { pino, type Logger } from 'pino';
import { LogDestination } from './log-destination.js';
import { redactSecrets } from './secrets.js';

export type { Logger };

/** How long the exit waits for an output that does not take the last lines. */
const EXIT_FLUSH_MS = 1_000;

function logDestination(fd: number): LogDestination {
  // Reported through the root logger, once the output took the backlog again.
  return new LogDestination(fd, {
    onDrained: (dropped) =>
      rootLogger
        .child({ component: 'logger' })
        .warn({ dropped }, 'log lines dropped: the log output did not take them in time'),
  });
}

/**
 * Where log lines go: standard output for `serve`, standard error for the commands that print
 * data. Written asynchronously with a bounded backlog: a reader that stops reading (a blocked log
 * driver) costs dropped lines, counted, never a stalled process.
 */
let destination = logDestination(1);
let dropped = 0;

/** Sends every later log line to standard error, keeping standard output for a command's data. */
export function sendLogsToStderr(): void {
  dropped += destination.dropped;
  destination = logDestination(2);
}

/** Log lines dropped since the start because the output did not take them. */
export function droppedLogLines(): number {
  return dropped + destination.dropped;
}

/**
 * Waits until the log output took every line held, at most `deadlineMs`; then writes what is
 * left synchronously within what remains of it. For a clean exit: call before `process.exit`.
 */
export async function flushLogs(deadlineMs = EXIT_FLUSH_MS): Promise<void> {
  const deadline = performance.now() + deadlineMs;
  while (!destination.idle && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  destination.flushSync(Math.max(0, deadline - performance.now()));
}

// Any other exit (an exception, a failed command): what is held is written, within the deadline.
process.on('exit', () => destination.flushSync(EXIT_FLUSH_MS));

/**
 * The root logger. Level from `MESHMUX_LOG_LEVEL` (or `LOG_LEVEL`), default `info`; tests set
 * `silent`. Components take a child with `{ component }` so lines can be filtered. Every line
 * goes through `redactSecrets` on its way out.
 */
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
