import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { ServerTlsReadMetrics } from '../../src/telemetry/server-tls-reads.js';

/** The sample of `listener`, or undefined when it has none. */
async function usable(registry: Registry, listener: string): Promise<number | undefined> {
  const metric = (await registry.getMetricsAsJSON()).find(
    (m) => m.name === 'meshmux_server_tls_files_usable',
  );
  return metric?.values.find((v) => v.labels['listener'] === listener)?.value;
}

describe('ServerTlsReadMetrics', () => {
  it('keeps a listener’s sample while any reader of its files runs, and drops it with the last', async () => {
    const registry = new Registry();
    const metrics = new ServerTlsReadMetrics(registry);
    assert.equal(await usable(registry, 'galley'), undefined, 'no sample before a listener reads its files');
    // A reload replaces the source: the new one starts reading before the old one stops.
    metrics.listening('galley');
    metrics.failed('galley');
    metrics.listening('galley');
    metrics.listening('server.xdsTls');
    assert.equal(await usable(registry, 'galley'), 1);
    metrics.closed('galley');
    assert.equal(await usable(registry, 'galley'), 1, 'the replacing source still reads them');
    metrics.failed('galley');
    assert.equal(await usable(registry, 'galley'), 0);
    metrics.closed('galley');
    assert.equal(await usable(registry, 'galley'), undefined, 'a removed source leaves no sample');
    assert.equal(await usable(registry, 'server.xdsTls'), 1, 'other listeners keep theirs');
  });
});
