import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';
import { IstiodClient } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { VS } from '../support/type-urls.js';

function vs(name: string, timeout: string): string {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: shop}
spec: {hosts: [${name}], http: [{timeout: ${timeout}, route: [{destination: {host: ${name}}}]}]}
`;
}

describe('reloading the configuration file without a restart', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
  let client: IstiodClient;
  const one = `sources:\n  - {name: base, type: file, path: ./base}\n`;
  const two = (basePriority: number) =>
    `sources:\n  - {name: base, type: file, path: ./base, priority: ${basePriority}}\n  - {name: extra, type: file, path: ./extra, priority: 5}\n`;
  const timeoutOf = (name: string) =>
    (
      client.configs(VS).get(`shop/${name}`)?.body['http'] as
        Array<{ timeout?: { seconds?: number } }> | undefined
    )?.[0]?.timeout?.seconds;

  before(async () => {
    ({ dir, dispose } = await tempDir());
    await mkdir(path.join(dir, 'base'));
    await mkdir(path.join(dir, 'extra'));
    await writeFile(path.join(dir, 'base', 'vs.yaml'), vs('cart', '1s'));
    await writeFile(path.join(dir, 'extra', 'vs.yaml'), `${vs('cart', '2s')}---\n${vs('search', '3s')}`);
    meshmux = await startFromYaml(one, dir);
    client = new IstiodClient({ address: meshmux.xds }).start();
    await client.waitForSync(10_000);
  });
  after(async () => {
    client.close();
    await meshmux.stop();
    await dispose();
  });

  it('starts a source added to the file and serves its objects under its priority', async () => {
    await meshmux.reload(parseMeshmuxConfig(two(0), 'reload', dir));
    await client.waitFor((c) => c.configs(VS).has('shop/search'), 10_000);
    assert.equal(timeoutOf('cart'), 2, 'the higher-priority new source wins cart');
  });

  it('re-ranks a kept source whose priority changed, without restarting it', async () => {
    const streams = client.streams;
    await meshmux.reload(parseMeshmuxConfig(two(10), 'reload', dir));
    await client.waitFor(() => timeoutOf('cart') === 1, 10_000);
    assert.equal(client.streams, streams);
  });

  it('stops a removed source, holds its objects until the removal is confirmed, then withdraws exactly them', async () => {
    await meshmux.reload(parseMeshmuxConfig(one, 'reload', dir));
    const extra = meshmux.engine.current().sources.find((s) => s.name === 'extra');
    assert.deepEqual([extra?.held?.reason, extra?.held?.deletions], ['removed', 2]);
    assert.equal(client.configs(VS).has('shop/search'), true, 'held: still served');
    const updates = client.updates;
    assert.equal(meshmux.engine.confirm('extra'), true);
    await client.waitFor((c) => !c.configs(VS).has('shop/search'), 10_000);
    assert.equal(timeoutOf('cart'), 1);
    assert.equal(client.updates - updates, 1, 'only search went away');
    assert.deepEqual(
      meshmux.engine.current().sources.map((s) => s.name),
      ['base'],
    );
  });
});
