import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { stringStruct } from '../support/ads-wire.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import { meshmuxOnFolder } from '../support/fault-kit.js';
import { IstiodClient } from '../support/istiod-client.js';
import { OtlpReceiver } from '../support/otlp-receiver.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { SE } from '../support/type-urls.js';

const NACKERS = 5;
const EDITS = 30;

/** A client that NACKs every ServiceEntry response it gets, until closed. */
function nacker(address: string, nodeId: string): RawAdsStream {
  const stream = new RawAdsStream(address);
  const node = { id: nodeId, metadata: stringStruct({ GENERATOR: 'api', ISTIO_VERSION: '1.30.0' }) };
  stream.send({ node, type_url: SE });
  void (async () => {
    for (;;) {
      let response;
      try {
        response = await stream.next(30_000);
      } catch {
        return;
      }
      stream.send({
        node,
        type_url: SE,
        response_nonce: response.nonce,
        version_info: '',
        error_detail: { code: 3, message: 'refused field' },
      });
    }
  })();
  return stream;
}

describe('tracing with istiods that NACK', () => {
  it('traces each change once per istiod that NACKs it, not once per response carrying it again', async () => {
    // Before: every response to a NACKing istiod opened a push span for each change since it
    // connected, so spans grew with the square of the edits: 50 such istiods and 150 edits sent
    // 577 MB to the collector and made the p90 edit latency 582 ms instead of 106 ms.
    const receiver = await OtlpReceiver.start();
    const { meshmux, dir, dispose } = await meshmuxOnFolder({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_BSP_MAX_QUEUE_SIZE: '100000',
    });
    const healthy = new IstiodClient({ address: meshmux.xds }).start();
    const nodeIds = Array.from(
      { length: NACKERS },
      (_, k) => `sidecar~10.0.1.${k}~istiod-${k}.istio-system~istio-system.svc.cluster.local`,
    );
    const nackers = nodeIds.map((id) => nacker(meshmux.xds, id));
    try {
      await healthy.waitForSync(30_000);
      for (let i = 1; i <= EDITS; i++) {
        await writeFile(path.join(dir, 'mesh', `se-${i}.yaml`), plainServiceEntry(`se-${i}`));
        await healthy.waitFor(
          (c) => c.configs(SE).has(`shop/se-${i}`),
          10_000,
          () => `edit ${i}`,
        );
      }
      // The stop ends the spans still open and exports what is buffered. Each NACKing istiod
      // is sent the first state and each edit: a span each at most.
      const stopped = await meshmux.stop('SIGTERM', 15_000);
      assert.equal(stopped.code, 0);
      const pushes = receiver.spans.filter((s) => s.name === 'meshmux.ads.push');
      const perNacker = nodeIds.map(
        (id) => pushes.filter((s) => s.attributes['meshmux.client.node_id'] === id).length,
      );
      console.log(`# push spans per NACKing istiod after ${EDITS} edits: ${perNacker.join(', ')}`);
      for (const count of perNacker) {
        assert.ok(
          count >= 1 && count <= EDITS + 1,
          `push spans of one NACKing istiod: ${perNacker.join(', ')}`,
        );
      }
      const inconsistent = meshmux.logs.filter((l) => /Inconsistent start and end time/.test(l.msg ?? ''));
      assert.equal(inconsistent.length, 0, JSON.stringify(inconsistent[0]));
    } finally {
      healthy.close();
      for (const n of nackers) n.close();
      await meshmux.kill();
      await receiver.close();
      await dispose();
    }
  });
});
