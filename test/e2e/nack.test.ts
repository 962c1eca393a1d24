/**
 * A client that rejects what meshmux sends, through a real ADS stream to a real meshmux process:
 * the NACK is counted and logged with the client, the rejected version is not sent again, later
 * changes still arrive, and the status page and `/debug/syncz` show it.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringStruct, type DiscoveryResponse, type NodeMessage } from '../support/ads-wire.js';
import { until } from '../support/deadline.js';
import { DEFAULT_NODE_METADATA } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { SE, VS } from '../support/type-urls.js';

const NODE_ID = 'sidecar~10.1.2.9~istiod-nacker.istio-system~istio-system.svc.cluster.local';
const NODE: NodeMessage = { id: NODE_ID, metadata: stringStruct(DEFAULT_NODE_METADATA) };
const REASON = 'rejected by the test: shop/reviews fails validation';
const WAIT_MS = 15_000;

function vsYaml(timeout: string): string {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews.shop.svc.cluster.local]
  http: [{timeout: ${timeout}, route: [{destination: {host: reviews.shop.svc.cluster.local}}]}]
`;
}

function seYaml(host: string): string {
  return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: cards, namespace: shop}
spec: {hosts: [${host}], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}
`;
}

interface SynczType {
  readonly typeUrl: string;
  readonly sentVersion?: string;
  readonly ackedVersion?: string;
  readonly awaitingAck: boolean;
  readonly nacks: number;
}

/** Sum of a counter's samples whose labels contain `labelText` (all samples when empty). */
function counter(exposition: string, name: string, labelText = ''): number {
  let sum = 0;
  for (const line of exposition.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!line.includes(labelText)) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

describe('a client that NACKs what meshmux sends', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;
  let stream: RawAdsStream;
  let rejected: DiscoveryResponse;
  let afterNack = 0;

  const metrics = async (): Promise<string> => (await fetch(`${meshmux.http}/metrics`)).text();
  const synczTypes = async (): Promise<SynczType[]> => {
    const reports = (await (await fetch(`${meshmux.admin}/debug/syncz`)).json()) as Array<{
      client: { nodeId: string };
      types: SynczType[];
    }>;
    const mine = reports.filter((r) => r.client.nodeId === NODE_ID);
    assert.equal(mine.length, 1, 'one stream of the NACKing client in /debug/syncz');
    return mine[0]?.types ?? [];
  };
  const ack = (r: DiscoveryResponse): void =>
    stream.send({ type_url: r.type_url, version_info: r.version_info, response_nonce: r.nonce, node: NODE });
  const responseOf = (typeUrl: string, from: number, what: string): Promise<DiscoveryResponse> =>
    stream.responseAfter(from, (r) => r.type_url === typeUrl, WAIT_MS, what);

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-nack-'));
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'reviews.yaml'), vsYaml('3s'));
    await writeFile(path.join(dir, 'mesh', 'cards.yaml'), seYaml('api.cards.example'));
    const config = path.join(dir, 'meshmux.yaml');
    await writeFile(config, 'sources: [{name: local, type: file, path: ./mesh, rescanInterval: 100ms}]\n');
    meshmux = await MeshmuxProcess.start(config, { cwd: dir });
    stream = new RawAdsStream(meshmux.xds);
    stream.send({ type_url: VS, version_info: '', response_nonce: '', resource_names: [], node: NODE });
    stream.send({ type_url: SE, version_info: '', response_nonce: '', resource_names: [], node: NODE });
    rejected = await responseOf(VS, 0, 'the first VirtualService response');
    ack(await responseOf(SE, 0, 'the first ServiceEntry response'));
    afterNack = stream.received.length;
    // A NACK as Envoy and istiod send it: the nonce of the response, the last version accepted
    // (none yet), and the reason.
    stream.send({
      type_url: VS,
      version_info: '',
      response_nonce: rejected.nonce,
      error_detail: { code: 3, message: REASON },
      node: NODE,
    });
  });
  after(async () => {
    stream.close();
    await meshmux.stop();
    await dispose();
  });

  it('logs the NACK with the client’s node id, the type URL and the client’s reason', async () => {
    const line = await meshmux.waitForLog(
      (l) => l.msg === 'client rejected a response',
      0,
      WAIT_MS,
      'the NACK to be logged',
    );
    assert.equal(line['node'], NODE_ID);
    assert.equal(line['typeUrl'], VS);
    assert.equal(line['reason'], REASON);
  });

  it('counts the NACK once, for VirtualServices, and not as an ACK', async () => {
    await meshmux.waitForLog((l) => l.msg === 'client rejected a response', 0, WAIT_MS, 'the NACK');
    const text = await metrics();
    assert.equal(counter(text, 'meshmux_nacks_total'), 1, 'one NACK counted');
    assert.equal(counter(text, 'meshmux_nacks_total', 'VirtualService'), 1, 'counted for its kind');
    assert.equal(counter(text, 'meshmux_acks_total', 'VirtualService'), 0, 'a NACK is not an ACK');
  });

  it('shows the NACK on /debug/syncz and on the status page, with the rejected version not ACKed', async () => {
    await meshmux.waitForLog((l) => l.msg === 'client rejected a response', 0, WAIT_MS, 'the NACK');
    const vs = (await synczTypes()).find((t) => t.typeUrl === VS);
    assert.equal(vs?.nacks, 1);
    assert.equal(vs?.sentVersion, rejected.version_info);
    assert.equal(vs?.ackedVersion, undefined, 'the rejected version does not count as acknowledged');
    assert.equal(vs?.awaitingAck, false, 'the NACK answered the response');
    const page = await (await fetch(meshmux.admin)).text();
    const at = page.indexOf(NODE_ID);
    assert.ok(at >= 0, 'the client has a row on the status page');
    const row = page.slice(page.lastIndexOf('<tr', at), page.indexOf('</tr>', at));
    assert.match(row, /data-state="NACKED"/, 'the istiod is NACKED overall');
    assert.match(row, /<span class="badge b-bad" title="1 NACK\(s\)">NACKED<\/span>/);
    assert.match(row, /VirtualService: sent <code>[^<]+<\/code>, ACKed <code>-<\/code>, 1 NACK\(s\)/);
  });

  it('does not send the rejected version again: a later change of another type arrives alone', async () => {
    await meshmux.waitForLog((l) => l.msg === 'client rejected a response', 0, WAIT_MS, 'the NACK');
    const pushesBefore = counter(await metrics(), 'meshmux_pushes_total', 'VirtualService');
    await writeFile(path.join(dir, 'mesh', 'cards.yaml'), seYaml('edge.cards.example'));
    const marker = await responseOf(SE, afterNack, 'the ServiceEntry change after the NACK');
    ack(marker);
    // Everything meshmux sent after the NACK up to the marker: only the marker.
    const since = stream.received.slice(afterNack);
    assert.deepEqual(
      since.map((r) => r.type_url),
      [SE],
      'no VirtualService response was sent after the NACK',
    );
    assert.equal(counter(await metrics(), 'meshmux_pushes_total', 'VirtualService'), pushesBefore);
  });

  it('still delivers the next change of the rejected type, and takes its ACK', async () => {
    await meshmux.waitForLog((l) => l.msg === 'client rejected a response', 0, WAIT_MS, 'the NACK');
    const from = stream.received.length;
    await writeFile(path.join(dir, 'mesh', 'reviews.yaml'), vsYaml('4s'));
    const next = await responseOf(VS, from, 'the VirtualService change after the NACK');
    assert.notEqual(next.version_info, rejected.version_info, 'a new version');
    assert.equal(next.resources.length, 1);
    ack(next);
    await until(
      async () => (await synczTypes()).find((t) => t.typeUrl === VS)?.ackedVersion === next.version_info,
      WAIT_MS,
      'the ACK of the new version to show on /debug/syncz',
    );
    // A later change of another type marks the point after which a repeat would have arrived too.
    const beforeMarker = stream.received.length;
    await writeFile(path.join(dir, 'mesh', 'cards.yaml'), seYaml('api2.cards.example'));
    ack(await responseOf(SE, beforeMarker, 'the ServiceEntry marker after the ACK'));
    assert.equal((await synczTypes()).find((t) => t.typeUrl === VS)?.nacks, 1, 'the count of NACKs stays');
    assert.deepEqual(
      stream.received.slice(from).map((r) => r.type_url),
      [VS, SE],
      'one response for the change, none repeated',
    );
  });
});
