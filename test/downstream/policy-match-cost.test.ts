/**
 * Policies whose globs over the node id and a metadata value hold several `*`, against clients
 * that choose values those globs would backtrack on, through a real meshmux process: the clients
 * are refused at once and an istiod that matches is served meanwhile.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringStruct } from '../support/ads-wire.js';
import { within } from '../support/deadline.js';
import { DEFAULT_NODE_METADATA } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { SE } from '../support/type-urls.js';

const HOSTILE_STREAMS = 10;
/** Far more than a refusal and an answer take; the backtracking took some 8 s for these clients. */
const BOUND_MS = 3_000;

describe('policy globs against values a client chose', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;
  const streams: RawAdsStream[] = [];

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-policy-cost-'));
    await writeFile(
      path.join(dir, 'se.yaml'),
      'apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a, namespace: shop}\nspec: {hosts: [a.example.com], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}\n',
    );
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      `state: {dir: none}
sources: [{name: shop, type: file, path: ./se.yaml}]
policies:
  - name: istio-system-istiods
    match: {nodeId: '*~*~*.istio-system~istio-system.svc.cluster.local'}
  - name: by-cluster
    match: {metadata: {CLUSTER_ID: '*-*-east'}}
`,
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
  });
  after(async () => {
    for (const s of streams) s.close();
    await meshmux?.stop();
    await dispose();
  });

  for (const [label, node] of [
    ['a node id of 1,020 "~"', { id: '~'.repeat(1_020), metadata: stringStruct({}) }],
    ['a CLUSTER_ID of 60,000 "-"', { id: 'x', metadata: stringStruct({ CLUSTER_ID: '-'.repeat(60_000) }) }],
  ] as const) {
    it(`refuses ${HOSTILE_STREAMS} streams of ${label} at once and serves a matching istiod meanwhile`, async () => {
      const open = (): RawAdsStream => {
        const stream = new RawAdsStream(meshmux.xds);
        streams.push(stream);
        return stream;
      };
      const hostile = Array.from({ length: HOSTILE_STREAMS }, () => {
        const stream = open();
        stream.send({ type_url: SE, node });
        return stream.status;
      });
      const istiod = open();
      istiod.send({
        type_url: SE,
        node: {
          id: 'sidecar~10.0.0.1~istiod-1.istio-system~istio-system.svc.cluster.local',
          metadata: stringStruct({ ...DEFAULT_NODE_METADATA, CLUSTER_ID: 'eu-west-east' }),
        },
      });
      const [statuses, response] = await within(
        Promise.all([Promise.all(hostile), istiod.next(BOUND_MS)]),
        BOUND_MS,
        'the refusals and the answer to the istiod',
      );
      for (const status of statuses) assert.notEqual(status.code, 0, `refused: ${status.details}`);
      assert.equal(response.resources.length, 1, 'the istiod got the ServiceEntry');
    });
  }
});
