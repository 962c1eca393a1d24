/**
 * Module customization hooks that append the URL of every module resolved to a file (given as
 * `data.log` by {@link ./module-load-log.ts}). They run on the loader's own thread.
 */
import { appendFileSync } from 'node:fs';

let log: string | undefined;

export function initialize(data: { readonly log: string }): void {
  log = data.log;
}

export async function resolve(
  specifier: string,
  context: unknown,
  nextResolve: (specifier: string, context: unknown) => Promise<{ readonly url: string }>,
): Promise<{ readonly url: string }> {
  const resolved = await nextResolve(specifier, context);
  if (log !== undefined) appendFileSync(log, `${resolved.url}\n`);
  return resolved;
}
