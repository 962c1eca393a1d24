import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { stringStruct } from '../support/ads-wire.js';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { SE } from '../support/type-urls.js';

const SE_DOC = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: one, namespace: shop}
spec: {hosts: [one.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS}
`;

describe('what clients claim is bounded (meshmux in a child process)', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;

  before(async () => {
    ({ dir, dispose } = await tempDir());
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'se.yaml'), SE_DOC);
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      'server: {maxViews: 2, viewGrace: 60s}\nsources: [{name: mesh, type: file, path: ./mesh}]\n',
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
  });
  after(async () => {
    await meshmux.kill();
    await dispose();
  });

  it('logs a long node id and 1 MB NACK messages truncated, once per stream and period, and shows them truncated on the status and debug pages', async () => {
    const nodeId = `sidecar~10.0.0.1~${'p'.repeat(1_000)}.ns~ns.svc.cluster.local`.slice(0, 1_024);
    const raw = new RawAdsStream(meshmux.xds);
    const types = 30;
    try {
      raw.send({ type_url: SE, node: { id: nodeId, metadata: stringStruct({ NOTE: 'n'.repeat(20_000) }) } });
      for (let t = 1; t < types; t++) raw.send({ type_url: `type.example.com/made.up.K${t}` });
      const responses = await Promise.all(Array.from({ length: types }, () => raw.next(10_000)));
      const huge = 'e'.repeat(1024 * 1024);
      for (const r of responses) {
        raw.send({
          type_url: r.type_url,
          version_info: '',
          response_nonce: r.nonce,
          error_detail: { code: 3, message: huge },
        });
      }
      // A later request on the same stream that is answered: every NACK before it was read.
      raw.send({ type_url: 'type.example.com/made.up.last' });
      await raw.next(10_000);
      await delay(200);
      const nackLines = meshmux.lines('client rejected a response');
      assert.equal(nackLines.length, 1, `${types} NACKs on one stream, one warning`);
      for (const line of [...nackLines, ...meshmux.lines('unknown type URL: it will be answered empty')]) {
        assert.ok(
          JSON.stringify(line).length < 2_000,
          `a bounded log line: ${JSON.stringify(line).slice(0, 200)}`,
        );
      }
      assert.match(String(nackLines[0]?.['reason']), /… \(1048320 more characters\)$/);
      const syncz = await fetch(`${meshmux.admin}/debug/syncz`).then((r) => r.text());
      assert.ok(syncz.length < 64 * 1024, `/debug/syncz is ${syncz.length} characters`);
      assert.ok(!syncz.includes('p'.repeat(300)), 'the node id is truncated on /debug/syncz');
      const page = await fetch(`${meshmux.admin}/`).then((r) => r.text());
      assert.ok(
        page.includes('p'.repeat(200)) && !page.includes('p'.repeat(300)),
        'the node id is truncated on the status page',
      );
    } finally {
      raw.close();
    }
  });

  it('refuses a client that would need a view beyond maxViews with RESOURCE_EXHAUSTED, and admits it once a view is free', async () => {
    const clients = ['a', 'b'].map((rev) =>
      new IstiodClient({ address: meshmux.xds, revision: rev, release: [SE] }).start(),
    );
    try {
      await Promise.all(clients.map((c) => c.waitForSync(10_000)));
      const refused = new RawAdsStream(meshmux.xds);
      refused.send({ type_url: SE, node: { id: 'n', metadata: stringStruct({ ISTIO_REVISION: 'c' }) } });
      const status = await Promise.race([
        refused.status,
        delay(10_000).then(() => assert.fail('no status in 10 s')),
      ]);
      refused.close();
      assert.equal(status.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.match(status.details, /maximum of distinct views \(server limit maxViews\).*revision c/);
      clients[0]?.close();
      // The freed view is idle, in its grace period: a new view takes its place.
      const admitted = new IstiodClient({ address: meshmux.xds, revision: 'c', release: [SE] }).start();
      try {
        await admitted.waitForSync(10_000);
        assert.equal(admitted.configs(SE).size, 1);
      } finally {
        admitted.close();
      }
    } finally {
      for (const c of clients) c.close();
    }
  });
});
