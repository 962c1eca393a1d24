import { IstiodClient } from './istiod-client.js';

/**
 * An istiod stand-in subscribed to `xds` that redials fast (20 ms, backing off to 200 ms), so a
 * fault test measures meshmux and not the client's backoff. The caller closes it.
 */
export function connectIstiod(xds: string): IstiodClient {
  return new IstiodClient({ address: xds, backoff: { initialMs: 20, maxMs: 200 } }).start();
}

/** Every object an istiod holds, as `<type URL> <namespace>/<name>`. */
export function inventory(client: IstiodClient): Set<string> {
  const out = new Set<string>();
  for (const [typeUrl, configs] of client.store)
    for (const name of configs.keys()) out.add(`${typeUrl} ${name}`);
  return out;
}

/** What `before` held that `now` does not. */
export function lost(before: ReadonlySet<string>, now: ReadonlySet<string>): string[] {
  return [...before].filter((x) => !now.has(x));
}

/** `/ready` of a running meshmux, with its status code. */
export async function readiness(http: string): Promise<{
  status: number;
  body: {
    ready: boolean;
    waitingFor: string[];
    sources: Array<{ name: string; state: string; restoredFrom?: string }>;
  };
}> {
  const res = await fetch(`${http}/ready`, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, body: (await res.json()) as never };
}

/** Prints a fault's figures as one `#` line of the test output, for RELIABILITY.md. */
export function report(fault: string, figures: Record<string, number | string>): void {
  const shown = Object.entries(figures)
    .map(([k, v]) => `${k}: ${typeof v === 'number' ? Math.round(v) : v}`)
    .join(', ');
  console.log(`# fault "${fault}": ${shown}`);
}
