import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { CLI } from '../support/meshmux-cli.js';
import { IstiodClient } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { SE } from '../support/type-urls.js';

const run = promisify(execFile);
const CORPUS = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'corpus');

function serviceEntries(count: number): string {
  return Array.from(
    { length: count },
    (_, i) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-${i}, namespace: bulk, labels: {app: svc-${i}, tier: backend-tier-with-a-long-value}}
spec:
  hosts: [svc-${i}.a-rather-long-external-domain-name.example.com]
  ports: [{number: 443, name: https, protocol: TLS}]
  resolution: DNS
  endpoints: [{address: 10.${Math.floor(i / 250) % 250}.${i % 250}.1, labels: {zone: zone-${i % 7}}}, {address: 10.${Math.floor(i / 250) % 250}.${i % 250}.2}]
`,
  ).join('---\n');
}

describe('protocol edges', () => {
  it('sends a response larger than 4 MiB that istiod accepts', async () => {
    const { dir, dispose } = await tempDir();
    await writeFile(path.join(dir, 'bulk.yaml'), serviceEntries(16_000));
    const meshmux = await startFromYaml(`sources: [{name: bulk, type: file, path: ./bulk.yaml}]\n`, dir);
    const client = new IstiodClient({ address: meshmux.xds }).start();
    try {
      await client.waitForSync(60_000);
      assert.equal(client.configs(SE).size, 16_000);
      assert.ok(client.bytesReceived > 4 * 1024 * 1024, `${client.bytesReceived} bytes received`);
    } finally {
      client.close();
      await meshmux.stop();
      await dispose();
    }
  });

  it('accepts keepalive pings from an idle client without sending GOAWAY', async () => {
    const { dir, dispose } = await tempDir();
    await writeFile(path.join(dir, 'none.yaml'), '');
    const meshmux = await startFromYaml(`sources: [{name: none, type: file, path: ./none.yaml}]\n`, dir);
    // istiod pings every 30 s; a 1 s ping interval over 4 s is a stricter version of the same thing.
    const client = new IstiodClient({
      address: meshmux.xds,
      channelOptions: {
        'grpc.keepalive_time_ms': 1_000,
        'grpc.keepalive_timeout_ms': 1_000,
        'grpc.keepalive_permit_without_calls': 1,
      },
    }).start();
    try {
      await client.waitForSync(10_000);
      await new Promise((r) => setTimeout(r, 4_000));
      assert.equal(client.streams, 1, 'the stream survived the pings');
      assert.deepEqual(client.streamEnds, []);
    } finally {
      client.close();
      await meshmux.stop();
      await dispose();
    }
  });

  it('ends streams cleanly on shutdown, so istiods reconnect and resync', async () => {
    const { dir, dispose } = await tempDir();
    await writeFile(path.join(dir, 'se.yaml'), serviceEntries(3));
    const first = await startFromYaml(`sources: [{name: se, type: file, path: ./se.yaml}]\n`, dir);
    const client = new IstiodClient({ address: first.xds, backoff: { initialMs: 50, maxMs: 100 } }).start();
    try {
      await client.waitForSync(10_000);
      await first.stop();
      await client.waitFor((c) => c.streamEnds.length > 0, 10_000);
      const second = await startFromYaml(`sources: [{name: se, type: file, path: ./se.yaml}]\n`, dir, {
        xds: first.xds,
      });
      try {
        await client.waitFor(
          (c) => c.streams >= 2 && c.received.filter((r) => r.stream === c.streams).length >= 15,
          15_000,
        );
        assert.equal(client.configs(SE).size, 3, 'state intact after the resync');
      } finally {
        await second.stop();
      }
    } finally {
      client.close();
      await dispose();
    }
  });
});

describe('meshmux validate', () => {
  it('prints every error with file, document and field, and exits non-zero', async () => {
    const result = await run(process.execPath, [CLI, 'validate', path.join(CORPUS, 'invalid')]).catch(
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    assert.equal('code' in result ? result.code : 0, 1);
    assert.match(
      result.stderr,
      /bad-duration\.yaml doc 0 line \d+ field spec\.trafficPolicy\.connectionPool\.tcp\.connectTimeout/,
    );
    assert.match(result.stderr, /warning: .*unknown-kind\.yaml/);
    assert.match(result.stdout, /\d+ valid object\(s\), \d+ error\(s\)/);
  });

  it('exits zero on valid configuration', async () => {
    const { stdout } = await run(process.execPath, [
      CLI,
      'validate',
      path.join(PACKAGE_ROOT, 'config', 'examples'),
    ]);
    assert.match(stdout, /^7 valid object\(s\), 0 error\(s\)/m);
  });
});
