/**
 * The status page of a meshmux serving 101 istiods, one of which NACKs and one of which names
 * itself with markup, as a real browser shows it: the fleet summary and the NACKing istiod are
 * checked in the DOM Chromium built and in a 1280-pixel-wide screenshot of it.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringStruct } from '../support/ads-wire.js';
import { dumpDom, findChromium, screenshot } from '../support/chromium.js';
import { until } from '../support/deadline.js';
import { DEFAULT_NODE_METADATA } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { bands, decodePng, rowsWithColour } from '../support/png-image.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { failOrSkipWithout, missingPeerLine } from '../support/required-peer.js';
import { VS } from '../support/type-urls.js';

const ISTIODS = 101;
const NACKER = 'sidecar~10.9.9.9~istiod-nacker.istio-system~istio-system.svc.cluster.local';
const HOSTILE = 'sidecar~10.9.9.8~<script>alert(1)</script>.x~x.svc.cluster.local';
/** The badge colours of the page (`.b-bad`, `.b-ok`). */
const RED: [number, number, number] = [0xc6, 0x28, 0x28];
const DASHBOARD = 'https://grafana.example.com/d/meshmux/fleet';
const GREEN: [number, number, number] = [0x1e, 0x7e, 0x34];

describe('the status page of a fleet of istiods, in a real browser', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
  const streams: RawAdsStream[] = [];

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-fleet-page-'));
    await writeFile(
      path.join(dir, 'mesh.yaml'),
      'apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: reviews, namespace: shop}\nspec: {hosts: [reviews]}\n',
    );
    // The fleet's streams share one connection here, where istiods open one each.
    meshmux = await startFromYaml(
      `sources: [{name: mesh, type: file, path: ./mesh.yaml}]\nserver: {maxStreamsPerConnection: 1000, admin: {dashboardUrl: '${DASHBOARD}'}}\n`,
      dir,
    );
    for (let i = 0; i < ISTIODS; i++) {
      const id =
        i === 0
          ? NACKER
          : i === 1
            ? HOSTILE
            : `sidecar~10.0.${i >> 8}.${i & 255}~istiod-${i}.istio-system~istio-system.svc.cluster.local`;
      const stream = new RawAdsStream(meshmux.xds);
      streams.push(stream);
      stream.send({ node: { id, metadata: stringStruct(DEFAULT_NODE_METADATA) }, type_url: VS });
      const response = await stream.next(15_000);
      stream.send(
        i === 0
          ? {
              type_url: VS,
              response_nonce: response.nonce,
              error_detail: { code: 3, message: 'rejected by the test' },
            }
          : { type_url: VS, version_info: response.version_info, response_nonce: response.nonce },
      );
    }
    await until(
      async () => /100 in sync[\s\S]*1 NACKing/.test(await (await fetch(`${meshmux.admin}/`)).text()),
      15_000,
      'the page to count 100 istiods in sync and 1 NACKing',
    );
  });
  after(async () => {
    for (const s of streams) s.close();
    await meshmux?.stop();
    await dispose();
  });

  it('summarises the fleet and puts the NACKing istiod first, escaped and filterable', async (t) => {
    const chromium = await findChromium();
    if (chromium === undefined) {
      failOrSkipWithout(t, missingPeerLine('chromium', 'chromium'));
      return;
    }
    const dom = await dumpDom(chromium, `${meshmux.admin}/`);
    assert.match(dom, /101 istiod\(s\): <span class="badge b-ok" id="fleet-synced">100 in sync<\/span>/);
    assert.match(dom, /id="fleet-nacking">1 NACKing</);
    const firstRow = /<tbody>\s*<tr data-stream="\d+" data-state="([A-Z ]+)" data-node="([^"]*)"/.exec(
      dom.slice(dom.indexOf('<table id="clients">')),
    );
    assert.equal(firstRow?.[1], 'NACKED', 'the worst state comes first');
    assert.equal(firstRow?.[2], NACKER);
    assert.ok(dom.includes('&lt;script&gt;alert(1)&lt;/script&gt;'), 'a node id is text, never markup');
    assert.equal(dom.split('<script>').length, 2, "the page's own script is the only one");
    assert.match(dom, /<input id="filter"/);
    const nav = /<nav id="links">([\s\S]*?)<\/nav>/.exec(dom)?.[1] ?? '';
    for (const page of ['/metrics', '/debug/sources', '/debug/syncz'])
      assert.ok(nav.includes(`href="${page}"`), `a link to ${page}`);
    assert.ok(nav.includes(`<a href="${DASHBOARD}">dashboard</a>`), 'the configured dashboard is linked');
  });

  it('shows the summary and the NACKing istiod in red and the synced ones in green in a 1280-pixel screenshot', async (t) => {
    const chromium = await findChromium();
    if (chromium === undefined) {
      failOrSkipWithout(t, missingPeerLine('chromium', 'chromium'));
      return;
    }
    const image = decodePng(await screenshot(chromium, `${meshmux.admin}/`, 1280, 1400));
    assert.equal(image.width, 1280);
    const red = bands(rowsWithColour(image, RED));
    const green = bands(rowsWithColour(image, GREEN));
    assert.ok(red.length >= 2, `red in the summary and in the NACKing row: bands ${JSON.stringify(red)}`);
    const [summary, row] = red as [{ from: number; to: number }, { from: number; to: number }];
    assert.ok(
      green.some((g) => g.from <= summary.to && g.to >= summary.from),
      'the summary line holds the green "in sync" badge beside the red one',
    );
    assert.ok(row.from > summary.to, 'the NACKing istiod is drawn below the summary');
    assert.ok(
      green.some((g) => g.from > row.to),
      'synced istiods (green) follow the NACKing one',
    );
  });
});
