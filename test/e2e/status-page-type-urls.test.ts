/**
 * The status page of a meshmux whose clients subscribe type URLs of no kind it serves (each is
 * answered empty): the istiods table keeps a column per served kind and counts the others in one,
 * so its size follows the istiods, not what they make up.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringStruct } from '../support/ads-wire.js';
import { until } from '../support/deadline.js';
import { DEFAULT_NODE_METADATA } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { VS } from '../support/type-urls.js';

const STREAMS = 40;
/** With the served kind, the most a stream may subscribe (maxTypesPerStream). */
const MADE_UP = 99;

describe('the status page of clients that subscribe made-up type URLs', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
  const streams: RawAdsStream[] = [];

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-page-types-'));
    await writeFile(
      path.join(dir, 'mesh.yaml'),
      'apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: reviews, namespace: shop}\nspec: {hosts: [reviews]}\n',
    );
    meshmux = await startFromYaml(`sources: [{name: mesh, type: file, path: ./mesh.yaml}]\n`, dir);
    for (let s = 0; s < STREAMS; s++) {
      const stream = new RawAdsStream(meshmux.xds);
      streams.push(stream);
      stream.send({ node: { id: `tool-${s}`, metadata: stringStruct(DEFAULT_NODE_METADATA) }, type_url: VS });
      for (let t = 0; t < MADE_UP; t++) stream.send({ type_url: `type.example.com/s${s}.t${t}` });
    }
    await until(
      () => Promise.resolve(streams.every((s) => s.received.length > MADE_UP)),
      60_000,
      'every stream answered on each of its type URLs',
    );
  });
  after(async () => {
    for (const s of streams) s.close();
    await meshmux?.stop();
    await dispose();
  });

  it('shows a column per served kind and counts the made-up type URLs of each istiod in one', async () => {
    const page = await (await fetch(`${meshmux.admin}/`)).text();
    const table = page.slice(page.indexOf('<table id="clients">'));
    const head = /<thead>([\s\S]*?)<\/thead>/.exec(table)?.[1] ?? '';
    assert.deepEqual(
      [...head.matchAll(/<th[^>]*>([^<]*)<\/th>/g)].map((m) => m[1]),
      ['istiod', 'policy', 'state', 'VirtualService', 'other types'],
    );
    assert.equal([...table.matchAll(/<tr data-stream=/g)].length, STREAMS, 'one row per istiod');
    assert.equal(
      [...table.matchAll(new RegExp(`<td class="t">${MADE_UP}</td></tr>`, 'g'))].length,
      STREAMS,
      'each row counts its made-up type URLs',
    );
    assert.ok(!page.includes('type.example.com'), 'no made-up type URL is a column or a line');
    assert.ok(page.length < 200_000, `a page of ${page.length} characters`);
  });
});
