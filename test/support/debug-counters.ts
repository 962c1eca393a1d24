import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';

/** Counters as `/debug/counters` reports them: at least pushes, and the numbers a caller watches. */
export interface Counters {
  readonly pushes: number;
}

/** The counters meshmux's admin server at `adminPort` reports now. */
export async function debugCounters<T extends Counters>(adminPort: number): Promise<T> {
  const response = await fetch(`http://127.0.0.1:${adminPort}/debug/counters`);
  assert.equal(response.status, 200);
  return (await response.json()) as T;
}

/**
 * The counters once `watched` of them (and the pushes) have not moved over three reads 100 ms
 * apart: the server has nothing left to do. Fails after 15 s.
 */
export async function quietCounters<T extends Counters>(
  adminPort: number,
  watched: readonly (keyof T & string)[],
): Promise<T> {
  const deadline = Date.now() + 15_000;
  let last = await debugCounters<T>(adminPort);
  for (let calm = 0; calm < 3;) {
    assert.ok(Date.now() < deadline, `the server kept pushing: ${last.pushes} pushes so far`);
    await delay(100);
    const now = await debugCounters<T>(adminPort);
    const still = now.pushes === last.pushes && watched.every((k) => now[k] === last[k]);
    calm = still ? calm + 1 : 0;
    last = now;
  }
  return last;
}
