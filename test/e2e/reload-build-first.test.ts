import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import { IstiodClient } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { SE } from '../support/type-urls.js';

describe('a reload is built before it is swapped in', () => {
  it('changes nothing when a part fails to build after the schema passed, and applies the next valid one', async () => {
    const { dir, dispose } = await tempDir('meshmux-reload-build-');
    for (const folder of ['base', 'extra']) await mkdir(path.join(dir, folder));
    await writeFile(path.join(dir, 'base', 'a.yaml'), plainServiceEntry('cart'));
    await writeFile(path.join(dir, 'extra', 'a.yaml'), plainServiceEntry('search'));
    const base = 'sources:\n  - {name: base, type: file, path: ./base}\n';
    const meshmux = await startFromYaml(base, dir);
    const client = new IstiodClient({ address: meshmux.xds }).start();
    try {
      await client.waitFor(
        (c) => c.configs(SE).has('shop/cart'),
        10_000,
        () => 'cart',
      );
      // Valid for the schema, but the ZooKeeper source refuses its host template when it is built:
      // the new file source listed before it must not start either.
      const broken = parseMeshmuxConfig(
        `${base}  - {name: extra, type: file, path: ./extra}\n` +
          "  - {name: dubbo, type: zookeeper, servers: 'zk:2181', host: '{version}'}\n",
        'meshmux.yaml',
        dir,
      );
      const outcome = await meshmux.reload(broken);
      assert.equal(outcome.applied, false);
      assert.match(outcome.applied ? '' : outcome.error.describe(), /host template "\{version\}"/);
      assert.deepEqual(
        meshmux.engine.current().sources.map((s) => s.name),
        ['base'],
        'the running sources are unchanged',
      );
      assert.equal(
        (await (await fetch(`${meshmux.http}/metrics`)).text()).match(
          /^meshmux_config_last_reload_successful (\d)/m,
        )?.[1],
        '0',
      );

      // A file that cannot be parsed counts as a failed reload too; the banner escapes what it shows.
      const unreadable = await meshmux.reload(() =>
        parseMeshmuxConfig('sources:\n  - {name: x, type: "<b>bold</b>"}\n', 'meshmux.yaml', dir),
      );
      assert.equal(unreadable.applied, false);
      const page = await (await fetch(`${meshmux.admin}/`)).text();
      assert.match(page, /configuration not reloaded/);
      assert.match(page, /unknown source type &quot;&lt;b&gt;bold&lt;\/b&gt;&quot;/);
      assert.doesNotMatch(page, /<b>bold<\/b>/);

      const fixed = await meshmux.reload(
        parseMeshmuxConfig(`${base}  - {name: extra, type: file, path: ./extra}\n`, 'meshmux.yaml', dir),
      );
      assert.deepEqual(fixed, { applied: true });
      await client.waitFor(
        (c) => c.configs(SE).has('shop/search'),
        10_000,
        () => 'search after the valid reload',
      );
      assert.doesNotMatch(await (await fetch(`${meshmux.admin}/`)).text(), /configuration not reloaded/);
      assert.equal(client.streamEnds.length, 0);
    } finally {
      client.close();
      await meshmux.stop();
      await dispose();
    }
  });
});
