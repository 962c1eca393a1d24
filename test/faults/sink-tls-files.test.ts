/**
 * An `mcp-sink` source's TLS files rotated in place while meshmux runs (cert-manager renewing a
 * certificate, a Secret remounted). meshmux runs as its own process with the files re-read every
 * 100 ms; Galley stand-ins dial its sink over TLS, each trusting one CA, and an istiod stand-in
 * reads what they pushed over plaintext ADS. A new pusher must be taken with the rotated
 * certificate, without a restart; a rotation caught half-way must keep the last usable one, for
 * the pusher already connected and for new ones, and meshmux must say so.
 */
import assert from 'node:assert/strict';
import { copyFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { until } from '../support/deadline.js';
import { connectIstiod, report } from '../support/fault-kit.js';
import { fakeVirtualService } from '../support/fake-objects.js';
import { GalleySinkPusher } from '../support/galley-sink-pusher.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { createTestCa, type TestCa } from '../support/test-pki.js';
import { VS } from '../support/type-urls.js';

const WAIT_MS = 10_000;
const VS_COLLECTION = 'istio/networking/v1alpha3/virtualservices';
const USABLE = 'meshmux_server_tls_files_usable{listener="galley"}';

/** `count` VirtualServices `shop/vs-0`…, as a Galley holds them. */
const virtualServices = (count: number): ReturnType<typeof fakeVirtualService>[] =>
  Array.from({ length: count }, (_, i) => fakeVirtualService(`vs-${i}`));

describe('faults: an mcp-sink source’s TLS files rotated while meshmux runs', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;
  let istiod: IstiodClient;
  let sink: string;
  const pushers: GalleySinkPusher[] = [];
  /** The CA of the certificate meshmux starts with. */
  let first: TestCa;
  /** The CA of the certificate in use: the first, until a test rotates it. */
  let current: TestCa;

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-fault-sink-tls-'));
    first = await createTestCa(dir, 'first CA');
    current = first;
    await install(first, 'server-1');
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      [
        'sources:',
        '  - name: galley',
        '    type: mcp-sink',
        '    listen: 127.0.0.1:0',
        '    kinds: [VirtualService]',
        '    tls: { cert: ./live.pem, key: ./live.key, refreshInterval: 100ms }',
        '',
      ].join('\n'),
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    const listening = await meshmux.waitForLog(
      (l) => l.msg === 'listening for an MCP source',
      0,
      WAIT_MS,
      'the sink listening',
    );
    sink = `localhost:${String(listening['port'])}`;
    istiod = connectIstiod(meshmux.xds);
    const pusher = await dial(first, 3);
    assert.ok(pusher, 'a pusher trusting the first CA is taken before any rotation');
    await holds(3, 'the first push');
  });
  after(async () => {
    for (const p of pushers) p.close();
    istiod.close();
    await meshmux.stop();
    await dispose();
  });

  /** Issues a server certificate of `ca` and copies it over the live files: the key first. */
  async function install(ca: TestCa, name: string): Promise<void> {
    const issued = await ca.issue(name, 'DNS:localhost,IP:127.0.0.1');
    await copyFile(issued.key, path.join(dir, 'live.key'));
    await copyFile(issued.cert, path.join(dir, 'live.pem'));
  }

  /**
   * A new Galley trusting only `ca` dials the sink holding `count` VirtualServices: the pusher
   * once the sink took its stream, undefined when the handshake (or anything else) failed.
   */
  async function dial(ca: TestCa, count: number): Promise<GalleySinkPusher | undefined> {
    const pusher = new GalleySinkPusher(sink, {
      collections: [VS_COLLECTION],
      credentials: grpc.credentials.createSsl(await ca.read(ca.caCert)),
    });
    pushers.push(pusher);
    pusher.set('VirtualService', virtualServices(count)).connect();
    await pusher.waitFor(
      () => pusher.answeredStream === 1 || pusher.failures.length > 0,
      WAIT_MS,
      'the sink to take or refuse a new pusher',
    );
    if (pusher.answeredStream === 1) return pusher;
    pusher.close();
    return undefined;
  }

  /** Waits until the istiod holds exactly `count` VirtualServices. */
  async function holds(count: number, what: string): Promise<void> {
    await istiod.waitFor(
      (c) => c.configs(VS).size === count,
      WAIT_MS,
      () => `${what}: ${count} VirtualServices`,
    );
  }

  it('takes a new pusher with a certificate rotated in place, without a restart', async () => {
    const second = await createTestCa(dir, 'second CA');
    await install(second, 'server-2');
    let attempts = 0;
    let pusher: GalleySinkPusher | undefined;
    await until(
      async () => {
        attempts++;
        pusher = await dial(second, 4);
        return pusher !== undefined;
      },
      WAIT_MS,
      'a pusher trusting the rotated CA to be taken',
    );
    await holds(4, 'the push of a pusher trusting the rotated CA');
    assert.equal(await dial(first, 4), undefined, 'the replaced certificate is no longer served');
    assert.equal(await meshmux.metric(USABLE), 1);
    report('mcp-sink TLS files rotated in place', {
      'attempts until a pusher trusting the new CA was taken': attempts,
      restarts: 0,
    });
    current = second;
  });

  it('keeps the last usable certificate while a rotation is caught half-way, says so, and takes the rotation once complete', async () => {
    const connected = await dial(current, 5);
    assert.ok(connected, 'a pusher trusting the certificate in use is taken');
    await holds(5, 'the push before the rotation');
    // A certificate written without its key: the files no longer make an identity.
    const third = await createTestCa(dir, 'third CA');
    const issued = await third.issue('server-3', 'DNS:localhost,IP:127.0.0.1');
    const from = meshmux.logs.length;
    await copyFile(issued.cert, path.join(dir, 'live.pem'));
    const said = await meshmux.waitForLog(
      (l) => String(l.msg).startsWith('server TLS files unusable') && l['source'] === 'galley',
      from,
      WAIT_MS,
      'the line saying the sink’s files are unusable',
    );
    assert.match(String(said['err']), /live\.(pem|key)/, 'the line names the files');
    assert.equal(await meshmux.metric(USABLE), 0, 'the metric says the files are unusable');
    // The pusher already connected keeps pushing.
    connected.set('VirtualService', virtualServices(6)).push();
    await holds(6, 'a push of the connected pusher while the files are broken');
    // A new pusher is taken under the last usable certificate, not the broken one.
    assert.equal(await dial(third, 7), undefined, 'the certificate without its key is not served');
    const next = await dial(current, 7);
    assert.ok(next, 'a new pusher trusting the last usable certificate is taken while the files are broken');
    await holds(7, 'the push of a new pusher while the files are broken');
    report('mcp-sink TLS rotation caught half-way', {
      'pushes served while the files were broken': 2,
      'new pushers taken while the files were broken': 1,
      [USABLE]: 0,
    });
    // The key follows: the rotation is taken.
    const fixed = meshmux.logs.length;
    await copyFile(issued.key, path.join(dir, 'live.key'));
    await meshmux.waitForLog(
      (l) => String(l.msg).startsWith('server TLS files usable again') && l['source'] === 'galley',
      fixed,
      WAIT_MS,
      'the line saying the sink’s files are usable again',
    );
    assert.ok(await dial(third, 8), 'a pusher trusting the completed rotation is taken');
    await holds(8, 'the push after the rotation completed');
    assert.equal(await meshmux.metric(USABLE), 1);
  });
});
