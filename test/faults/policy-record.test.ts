/**
 * What clients claim against the policy record (policies.json), with meshmux running as its own
 * process and a state folder, no policies: streams that each claim another node id with about
 * 60 KB of node metadata (under maxMetadataBytes), then come and go. The record must still name
 * every istiod connected, so that a restart judges a change of the policies for it, without
 * keeping what no policy can test.
 */
import assert from 'node:assert/strict';
import { readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { parsePolicyRecord } from '../../src/state/policy-record.js';
import { stringStruct } from '../support/ads-wire.js';
import { report } from '../support/fault-kit.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { SE } from '../support/type-urls.js';

const STREAMS = 200;
const PAD = 'm'.repeat(60_000);
const WAIT_MS = 20_000;

describe('policy record', () => {
  it('names every istiod connected without keeping the bulk of what each claims, while identities churn', async () => {
    const { dir, dispose } = await tempDir('meshmux-fault-policy-record-');
    await writeFile(
      path.join(dir, 'se.yaml'),
      [
        'apiVersion: networking.istio.io/v1',
        'kind: ServiceEntry',
        'metadata: { name: a, namespace: shop }',
        'spec: { hosts: [a.example.com], ports: [{ number: 443, name: https, protocol: TLS }] }',
        '',
      ].join('\n'),
    );
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      // One connection carries the test's streams, where istiods open one each.
      'state: { dir: ./state }\nserver: { maxStreamsPerConnection: 1000 }\nsources: [{ name: shop, type: file, path: ./se.yaml }]\n',
    );
    const file = path.join(dir, 'state', 'policies.json');
    const meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    const open: Array<{ node: string; stream: RawAdsStream }> = [];
    let next = 0;
    const connect = (): RawAdsStream => {
      const node = `claimed-${next++}`;
      const stream = new RawAdsStream(meshmux.xds);
      stream.send({ type_url: SE, node: { id: node, metadata: stringStruct({ PAD, CLUSTER_ID: node }) } });
      open.push({ node, stream });
      return stream;
    };
    try {
      for (let i = 0; i < STREAMS; i += 50) {
        await Promise.all(Array.from({ length: 50 }, () => connect().next(WAIT_MS)));
      }
      // Churn for 4 s: every 200 ms 20 streams leave and 20 others come.
      let largest = 0;
      const versions = new Set<number>();
      const churnEnds = performance.now() + 4_000;
      while (performance.now() < churnEnds) {
        for (const { stream } of open.splice(0, 20)) stream.close();
        for (let k = 0; k < 20; k++) connect();
        await delay(200);
        const st = await stat(file).catch(() => undefined);
        largest = Math.max(largest, st?.size ?? 0);
        if (st !== undefined) versions.add(st.mtimeMs);
      }
      await Promise.all(open.map(({ stream }) => stream.next(WAIT_MS)));
      const connected = open.map(({ node }) => node);
      const deadline = performance.now() + WAIT_MS;
      let named: Set<string>;
      for (;;) {
        const text = await readFile(file, 'utf8');
        named = new Set(parsePolicyRecord(text).clients.map((c) => c.nodeId));
        largest = Math.max(largest, Buffer.byteLength(text));
        if (connected.every((n) => named.has(n)) || performance.now() > deadline) break;
        await delay(100);
      }
      const record = parsePolicyRecord(await readFile(file, 'utf8'));
      report('streams claiming 60 KB of metadata each, then churning', {
        'identities claimed': next,
        'largest policies.json (bytes)': largest,
        'versions of it seen in 4 s of churn': versions.size,
      });
      assert.deepEqual(
        connected.filter((n) => !named.has(n)),
        [],
        'istiods connected that the record does not name',
      );
      const shop = record.clients.find((c) => c.nodeId === connected[0]);
      assert.deepEqual(shop?.metadata, { CLUSTER_ID: connected[0] }, 'what the record keeps of one istiod');
      assert.ok(largest < STREAMS * 1024 * 2, `policies.json of ${largest} bytes for ${next} identities`);
      // Written at most once a second: an istiod that came is on record for the other replicas.
      assert.ok(versions.size <= 6, `${versions.size} versions of policies.json in 4 s of churn`);
    } finally {
      for (const { stream } of open) stream.close();
      await meshmux.stop();
      await dispose();
    }
  });
});
