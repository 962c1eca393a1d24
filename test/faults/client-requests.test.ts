import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import {
  ADS_STREAM_PATH,
  decodeDiscoveryResponse,
  type DiscoveryResponse,
  encodeDiscoveryRequest,
  stringStruct,
} from '../support/ads-wire.js';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { RawAdsStream, RawBidiStream } from '../support/raw-ads-stream.js';
import { rawBytes, toBuffer } from '../support/raw-grpc-method.js';
import { SE, VS } from '../support/type-urls.js';

const FIRST_REQUEST_TIMEOUT_MS = 2_000;
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;

const MESH = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: payments, namespace: shop}
spec: {hosts: [payments.example.com], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: storefront, namespace: shop}
spec: {hosts: [storefront], http: [{route: [{destination: {host: storefront}}]}]}
`;

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  for (; rest >= 0x80; rest = Math.floor(rest / 0x80)) bytes.push((rest % 0x80) | 0x80);
  bytes.push(rest);
  return Buffer.from(bytes);
}

/** Field `field` of wire type 2: its tag, its length and `payload`. */
const lengthDelimited = (field: number, payload: Uint8Array): Buffer =>
  Buffer.concat([varint((field << 3) | 2), varint(payload.byteLength), payload]);

/**
 * The bytes of a Struct of as many fields as fit in `bytes`, each a short key and an empty Value
 * (null): what costs most to decode and convert per byte, some 420k fields in 4 MiB.
 */
function wideStruct(bytes: number): Buffer {
  const out = Buffer.alloc(bytes);
  let at = 0;
  for (let i = 0; ; i++) {
    const key = i.toString(36);
    // Field 1 of the Struct, a map entry: its key (field 1) and an empty Value (field 2).
    const field = [0x0a, key.length + 4, 0x0a, key.length, ...Buffer.from(key), 0x12, 0x00];
    if (at + field.length > bytes) return out.subarray(0, at);
    out.set(field, at);
    at += field.length;
  }
}

/** A DiscoveryRequest (`fields` besides its node) whose node carries `metadata` as encoded. */
function withMetadata(
  fields: Parameters<typeof encodeDiscoveryRequest>[0],
  nodeId: string,
  metadata: Buffer,
): Buffer {
  const node = Buffer.concat([lengthDelimited(1, Buffer.from(nodeId)), lengthDelimited(3, metadata)]);
  return Buffer.concat([encodeDiscoveryRequest(fields), lengthDelimited(2, node)]);
}

describe('requests a client sends cost only itself (meshmux in a child process)', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;
  let healthy: IstiodClient;

  const streams = async (): Promise<number> => (await meshmux.debug<{ streams: number }>('counters')).streams;
  const refusals = async (limit: string): Promise<number> => {
    const metrics = await fetch(`${meshmux.http}/metrics`).then((r) => r.text());
    const line = new RegExp(`^meshmux_client_limit_refusals_total\\{limit="${limit}"\\} (\\d+)$`, 'm');
    return Number(line.exec(metrics)?.[1] ?? 0);
  };

  before(async () => {
    ({ dir, dispose } = await tempDir());
    await writeFile(path.join(dir, 'mesh.yaml'), MESH);
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      [
        'state: {dir: none}',
        'server:',
        `  firstRequestTimeout: ${FIRST_REQUEST_TIMEOUT_MS}ms`,
        'policies: [{name: sidecars, match: {nodeId: "sidecar~*"}}]',
        'sources: [{name: mesh, type: file, path: ./mesh.yaml}]',
        '',
      ].join('\n'),
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    healthy = new IstiodClient({ address: meshmux.xds, release: [SE, VS] }).start();
    await healthy.waitForSync(30_000);
  });

  after(async () => {
    healthy.close();
    await meshmux.stop();
    await dispose();
  });

  it('keeps answering while a client sends requests whose node metadata is a Struct of 420k fields, and refuses its first one naming maxMetadataBytes', async () => {
    // Before, each such request was decoded whole, node included: the first of a stream froze the
    // process for some 4 s (refused only once converted), every later one for about 1 s.
    const metadata = wideStruct(MAX_REQUEST_BYTES - 4_096);
    let probing = true;
    let worstMs = 0;
    const probe = (async () => {
      while (probing) {
        const started = performance.now();
        // A probe that fails (the connection dropped while the process was frozen) counts as long as it took.
        await fetch(`${meshmux.http}/healthz`)
          .then((r) => r.text())
          .catch(() => undefined);
        worstMs = Math.max(worstMs, performance.now() - started);
        await delay(20);
      }
    })();
    await delay(500);
    const idleWorstMs = worstMs;
    const wide = new RawBidiStream<Buffer, DiscoveryResponse>(
      meshmux.xds,
      ADS_STREAM_PATH,
      (b) => b,
      decodeDiscoveryResponse,
    );
    const acker = new RawBidiStream<Buffer, DiscoveryResponse>(
      meshmux.xds,
      ADS_STREAM_PATH,
      (b) => b,
      decodeDiscoveryResponse,
    );
    try {
      const first = withMetadata({ type_url: SE }, 'sidecar~wide', metadata);
      assert.ok(first.byteLength < MAX_REQUEST_BYTES, `${first.byteLength} bytes, under maxRequestBytes`);
      wide.send(first);
      const status = await Promise.race([
        wide.status,
        delay(10_000).then(() => assert.fail('the wide first request was not refused within 10 s')),
      ]);
      assert.equal(status.code, grpc.status.INVALID_ARGUMENT);
      assert.match(status.details, /node metadata is \d+ bytes .*maxMetadataBytes of 65536/);
      acker.send(encodeDiscoveryRequest({ type_url: SE, node: { id: 'sidecar~acker' } }));
      const response = await acker.next(10_000);
      // istiod sends its node with every ACK: these carry the wide one.
      for (let i = 0; i < 2; i++)
        acker.send(
          withMetadata(
            { type_url: SE, version_info: response.version_info, response_nonce: response.nonce },
            'sidecar~acker',
            metadata,
          ),
        );
      acker.send(encodeDiscoveryRequest({ type_url: VS }));
      const after = await acker.next(10_000);
      assert.equal(after.type_url, VS, 'the stream sending wide ACKs is still served');
      await delay(500);
    } finally {
      probing = false;
      await probe;
      wide.close();
      acker.close();
    }
    console.log(
      `# 3 requests of ${(MAX_REQUEST_BYTES / 1024 / 1024).toFixed(0)} MiB with wide node metadata: worst /healthz round trip ${Math.round(worstMs)} ms (${Math.round(idleWorstMs)} ms before them)`,
    );
    // Before, probes went unanswered for seconds (or failed) while each request was decoded.
    assert.ok(worstMs < 2_000, `a /healthz round trip took ${Math.round(worstMs)} ms`);
    assert.equal(healthy.streamEnds.length, 0, 'the istiod kept its stream');
  });

  it('logs a refused client as refused, with the reason, not as a stream error', async () => {
    const from = meshmux.logs.length;
    const refuse = async (node: {
      id: string;
      metadata?: ReturnType<typeof stringStruct>;
    }): Promise<void> => {
      const raw = new RawAdsStream(meshmux.xds);
      try {
        raw.send({ type_url: SE, node });
        await Promise.race([raw.status, delay(10_000).then(() => assert.fail('no status within 10 s'))]);
      } finally {
        raw.close();
      }
    };
    await refuse({ id: 'router~unmatched' });
    await refuse({ id: 'sidecar~big', metadata: stringStruct({ BLOB: 'm'.repeat(100_000) }) });
    await meshmux.waitForLog(
      (l) => l.msg === 'client disconnected' && l['reason'] === 'refused: metadata-size',
      from,
      10_000,
      'the disconnection of the client over maxMetadataBytes',
    );
    // Before, each was logged (and reported to the hooks and traces) as `stream error: undefined`.
    const reasons = meshmux.logs
      .slice(from)
      .filter((l) => l.msg === 'client disconnected')
      .map((l) => String(l['reason']))
      .filter((reason) => !['client closed the stream', 'cancelled'].includes(reason));
    assert.equal(reasons.length, 2, reasons.join('\n'));
    assert.match(reasons[0] ?? '', /^refused: no policy matches the client \(node=router~unmatched /);
    assert.equal(reasons[1], 'refused: metadata-size');
  });

  it('closes streams that send no first request within firstRequestTimeout, at most 100 open on a connection', async () => {
    // Before, 20,000 such streams on one connection all stayed open: RSS 86 → 316 MB.
    const SILENT = 1_000;
    const baseline = await streams();
    const client = new grpc.Client(meshmux.xds, grpc.credentials.createInsecure());
    const statuses: grpc.StatusObject[] = [];
    const calls = Array.from({ length: SILENT }, () => {
      const call = client.makeBidiStreamRequest(ADS_STREAM_PATH, toBuffer, rawBytes);
      call.on('error', () => undefined);
      call.on('status', (s: grpc.StatusObject) => statuses.push(s));
      return call;
    });
    let peak = 0;
    try {
      const deadline = Date.now() + FIRST_REQUEST_TIMEOUT_MS + 8_000;
      while (statuses.length === 0) {
        assert.ok(Date.now() < deadline, `no silent stream was closed; ${peak - baseline} open at most`);
        peak = Math.max(peak, await streams());
        await delay(100);
      }
      const { rssBytes } = (await meshmux.debug<{ process: { rssBytes: number } }>('counters')).process;
      console.log(
        `# ${SILENT} silent streams on one connection: at most ${peak - baseline} open, the first closed after ${FIRST_REQUEST_TIMEOUT_MS} ms; RSS ${(rssBytes / 1e6).toFixed(0)} MB`,
      );
      assert.ok(peak - baseline <= 100, `${peak - baseline} silent streams open at once`);
      assert.equal(statuses[0]?.code, grpc.status.DEADLINE_EXCEEDED);
      assert.match(statuses[0]?.details ?? '', /firstRequestTimeout of 2000 ms/);
      assert.ok((await refusals('first-request-timeout')) >= 1);
      assert.equal(healthy.streamEnds.length, 0, 'the istiod kept its stream');
    } finally {
      for (const call of calls) call.cancel();
      client.close();
    }
    const deadline = Date.now() + 10_000;
    while ((await streams()) > baseline) {
      assert.ok(Date.now() < deadline, 'the silent streams were not all closed');
      await delay(100);
    }
  });
});
