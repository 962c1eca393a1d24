/**
 * Two tiers over delta ADS: a central meshmux reads the files, a regional meshmux subscribes to it
 * with `delta: true` and serves its istiods. Both are real processes; the istiod stand-in sits on
 * the regional one. A one-object change crosses the tier as that object alone.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { SE } from '../support/type-urls.js';

const COUNT = 2_000;
const WAIT_MS = 30_000;

function serviceEntries(changedHost?: string): string {
  return Array.from(
    { length: COUNT },
    (_, i) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-${i}, namespace: fleet, labels: {app: svc-${i}}}
spec:
  hosts: [${i === 7 && changedHost !== undefined ? changedHost : `svc-${i}.fleet.example.com`}]
  ports: [{number: 443, name: https, protocol: TLS}]
  resolution: DNS
`,
  ).join('---\n');
}

interface Counters {
  readonly bytesSent: number;
  readonly pushes: number;
}

describe('a central meshmux feeding a regional one over delta ADS', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let central: MeshmuxProcess;
  let regional: MeshmuxProcess;
  let istiod: IstiodClient;

  before(async () => {
    ({ dir, dispose } = await tempDir());
    await writeFile(path.join(dir, 'fleet.yaml'), serviceEntries());
    await writeFile(
      path.join(dir, 'central.yaml'),
      'sources: [{name: fleet, type: file, path: ./fleet.yaml}]\n',
    );
    central = await MeshmuxProcess.start(path.join(dir, 'central.yaml'), { cwd: dir });
    await writeFile(
      path.join(dir, 'regional.yaml'),
      // One spelling per kind: between meshmuxes both serve every version, so `auto` would double the traffic.
      `sources: [{name: central, type: xds, address: '${central.xds}', delta: true, apiVersions: current}]\n`,
    );
    regional = await MeshmuxProcess.start(path.join(dir, 'regional.yaml'), { cwd: dir });
    istiod = new IstiodClient({ address: regional.xds, release: [SE] }).start();
  });
  after(async () => {
    istiod.close();
    await regional.kill();
    await central.kill();
    await dispose();
  });

  it('carries a one-object change across the tier in about a kilobyte', async () => {
    await istiod.waitFor(
      (c) => c.configs(SE).size === COUNT,
      WAIT_MS,
      () => `${COUNT} ServiceEntries`,
    );
    const synced = await central.debug<Counters>('counters');
    assert.ok(synced.bytesSent > 100_000, `the first state is the whole kind (${synced.bytesSent} bytes)`);

    await writeFile(path.join(dir, 'fleet.yaml'), serviceEntries('svc-7.moved.example.com'));
    await istiod.waitFor(
      (c) =>
        (c.configs(SE).get('fleet/svc-7')?.body['hosts'] as string[] | undefined)?.[0] ===
        'svc-7.moved.example.com',
      WAIT_MS,
      () => 'the changed ServiceEntry at the istiod behind the regional tier',
    );
    const changed = await central.debug<Counters>('counters');
    const bytes = changed.bytesSent - synced.bytesSent;
    assert.equal(changed.pushes - synced.pushes, 1, 'one response crossed the tier');
    assert.ok(bytes > 0 && bytes < 2_048, `the change crossed the tier in ${bytes} bytes`);
    assert.equal(istiod.configs(SE).size, COUNT, 'nothing else was lost on the way');
  });
});
