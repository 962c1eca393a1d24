/**
 * The ADS listener's TLS files while they are replaced or broken: a certificate written before its
 * key, a certificate cut short, a key gone. meshmux runs as its own process with its files re-read
 * every 100 ms; an istiod stand-in connects over TLS before, and a new one during each broken
 * state: it must be served under the last usable certificate, and meshmux must say why.
 */
import assert from 'node:assert/strict';
import { copyFile, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { report } from '../support/fault-kit.js';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { createTestCa, type TestCa } from '../support/test-pki.js';
import { VS } from '../support/type-urls.js';

const WAIT_MS = 10_000;
/** Several reads of the files (every 100 ms) after each change. */
const SETTLE_MS = 600;

const VIRTUAL_SERVICE = [
  'apiVersion: networking.istio.io/v1',
  'kind: VirtualService',
  'metadata: { name: cart, namespace: shop }',
  'spec: { hosts: [cart], http: [{ route: [{ destination: { host: cart } }] }] }',
  '',
].join('\n');

describe('faults: the server TLS files broken while meshmux runs', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;
  let pki: TestCa;
  let tlsAddress: string;
  const clients: IstiodClient[] = [];

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-fault-server-tls-'));
    pki = await createTestCa(dir);
    const server = await pki.issue('server', 'DNS:localhost,IP:127.0.0.1');
    await copyFile(server.cert, path.join(dir, 'live.pem'));
    await copyFile(server.key, path.join(dir, 'live.key'));
    await writeFile(path.join(dir, 'vs.yaml'), VIRTUAL_SERVICE);
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      [
        'server:',
        '  xdsTls: 127.0.0.1:0',
        '  tls: { cert: ./live.pem, key: ./live.key, refreshInterval: 100ms }',
        'sources: [{ name: local, type: file, path: ./vs.yaml }]',
        '',
      ].join('\n'),
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    const started = await meshmux.waitForLog((l) => l.msg === 'meshmux started', 0, WAIT_MS, 'the start');
    tlsAddress = `localhost:${String(started['xdsTlsPort'])}`;
  });
  after(async () => {
    for (const c of clients) c.close();
    await meshmux.stop();
    await dispose();
  });

  /** Connects a new istiod trusting `ca` and waits until it holds the VirtualService. */
  async function served(ca: TestCa, what: string): Promise<void> {
    const client = new IstiodClient({
      address: tlsAddress,
      credentials: grpc.credentials.createSsl(await ca.read(ca.caCert)),
      backoff: { maxMs: 200 },
    }).start();
    clients.push(client);
    await client.waitFor(
      (c) => c.configs(VS).has('shop/cart'),
      WAIT_MS,
      () => what,
    );
  }

  it('serves new istiods under the last usable certificate while the files are broken, says why, and takes the next usable ones', async () => {
    await served(pki, 'an istiod before any change');
    const good = {
      cert: await readFile(path.join(dir, 'live.pem')),
      key: await readFile(path.join(dir, 'live.key')),
    };
    const other = await createTestCa(dir, 'rotated CA');
    const rotated = await other.issue('server-2', 'DNS:localhost,IP:127.0.0.1');
    const broken: Array<[string, () => Promise<void>]> = [
      ['a certificate replaced before its key', () => copyFile(rotated.cert, path.join(dir, 'live.pem'))],
      ['a certificate cut short', () => writeFile(path.join(dir, 'live.pem'), good.cert.subarray(0, 200))],
      [
        'a key gone',
        async () => {
          await writeFile(path.join(dir, 'live.pem'), good.cert);
          await rm(path.join(dir, 'live.key'));
        },
      ],
    ];
    const said: string[] = [];
    for (const [what, breakFiles] of broken) {
      const from = meshmux.logs.length;
      await breakFiles();
      await delay(SETTLE_MS);
      await served(pki, `a new istiod while ${what}`);
      const line = await meshmux.waitForLog(
        (l) => String(l.msg).startsWith('server TLS files unusable'),
        from,
        WAIT_MS,
        `the line saying ${what}`,
      );
      said.push(String(line['err']));
      assert.equal(
        await meshmux.metric('meshmux_server_tls_files_usable{listener="server.xdsTls"}'),
        0,
        what,
      );
    }
    report('server TLS files broken while running', {
      'broken states': broken.length,
      'new istiods served in them': broken.length,
    });
    assert.match(said[0] ?? '', /live\.(pem|key)/, 'the mismatch names the files');
    assert.match(said[2] ?? '', /live\.key/, 'the missing key is named');
    // A rotation completed: new istiods get the new certificate.
    const from = meshmux.logs.length;
    await copyFile(rotated.key, path.join(dir, 'live.key'));
    await copyFile(rotated.cert, path.join(dir, 'live.pem'));
    await meshmux.waitForLog(
      (l) => String(l.msg).startsWith('server TLS files usable again'),
      from,
      WAIT_MS,
      'recovery',
    );
    await served(other, 'an istiod trusting the rotated CA');
    assert.equal(await meshmux.metric('meshmux_server_tls_files_usable{listener="server.xdsTls"}'), 1);
  });
});
