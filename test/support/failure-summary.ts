/**
 * A test reporter that writes nothing while the tests run and, once they end, one short block
 * naming every test that failed: its file, its name and the first lines of its error.
 *
 * The TAP stream of a long run puts a failure hundreds of lines before the end; a log that keeps
 * only its tail (a CI page, a terminal's scrollback) then shows 1 failure and not which. This
 * block comes last, so the tail names it. Suites that failed only because a test in them failed
 * are left out: the test itself is listed.
 */

import { relative } from 'node:path';

/** How many lines of a failure's error the summary keeps. */
const ERROR_LINES = 12;
/** How many characters of one error line the summary keeps. */
const LINE_CHARS = 300;

/** A stack frame of Node's own code, which says nothing about the test. */
const INTERNAL_FRAME = /^\s*at .*\(?node:/;

interface FailEvent {
  readonly type: 'test:fail';
  readonly data: {
    readonly name: string;
    readonly nesting: number;
    readonly file?: string;
    readonly details: { readonly error?: unknown };
  };
}

interface OtherEvent {
  readonly type: Exclude<string, 'test:fail'>;
  readonly data?: unknown;
}

/** The failure's error, as lines fit to read in a log's tail. */
function errorLines(error: unknown): string[] {
  const failure = error as { failureType?: unknown; cause?: unknown } | undefined;
  const shown = failure?.cause instanceof Error ? failure.cause : error;
  const text = shown instanceof Error ? (shown.stack ?? `${shown.name}: ${shown.message}`) : String(shown);
  return text
    .split('\n')
    .filter((line) => !INTERNAL_FRAME.test(line))
    .slice(0, ERROR_LINES)
    .map((line) => (line.length > LINE_CHARS ? `${line.slice(0, LINE_CHARS)}…` : line));
}

function isOnlySubtestsFailed(error: unknown): boolean {
  return (error as { failureType?: unknown } | undefined)?.failureType === 'subtestsFailed';
}

/** The reporter: Node's test runner calls it with the run's events and writes what it yields. */
export default async function* failureSummary(
  events: AsyncIterable<FailEvent | OtherEvent>,
): AsyncGenerator<string> {
  const failures: string[] = [];
  for await (const event of events) {
    if (event.type !== 'test:fail') continue;
    const { name, file, details } = (event as FailEvent).data;
    if (isOnlySubtestsFailed(details.error)) continue;
    const where = file === undefined ? '' : `${relative(process.cwd(), file)}: `;
    failures.push(
      [`✖ ${where}${name}`, ...errorLines(details.error).map((line) => `    ${line}`)].join('\n'),
    );
  }
  if (failures.length === 0) return;
  yield `\n# ${failures.length} failed test${failures.length === 1 ? '' : 's'}:\n`;
  for (const failure of failures) yield `${failure}\n`;
}
