import type { ChildProcess } from 'node:child_process';

/**
 * Stops a peer's process and resolves once it has exited: SIGTERM, or SIGKILL with `hard` (as a
 * crash would), and SIGKILL anyway after `graceMs`. Nothing to do for one that already exited.
 */
export async function stopChild(child: ChildProcess, hard: boolean, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(hard ? 'SIGKILL' : 'SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}
