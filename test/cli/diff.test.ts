/**
 * `meshmux diff`: the running configuration and a new one each read offline, and per policy what
 * its istiods would gain, lose and see change; exit 1 when they differ, 0 when not, 2 when a side
 * cannot be read.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runMeshmuxCli } from '../support/meshmux-cli.js';
import { tempDir } from '../support/meshmux-harness.js';

function virtualService(namespace: string, name: string, timeout = '1s'): string {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${namespace}}
spec: {hosts: [${name}.${namespace}.svc.cluster.local], http: [{timeout: ${timeout}, route: [{destination: {host: ${name}}}]}]}
`;
}

function configuration(folder: string, shopNamespaces: string): string {
  return `sources: [{name: platform, type: file, path: ./${folder}}]
policies:
  - name: shop
    match: {metadata: {TEAM: shop}}
    allow: {namespaces: [${shopNamespaces}]}
  - name: everyone
`;
}

interface Diff {
  policy: string;
  presence: string;
  gained: Array<{ name: string; source: string }>;
  lost: Array<{ name: string }>;
  changed: Array<{ after: { name: string } }>;
}

describe('meshmux diff', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-diff-'));
    await mkdir(path.join(dir, 'v1'));
    await mkdir(path.join(dir, 'v2'));
    await writeFile(
      path.join(dir, 'v1', 'mesh.yaml'),
      [virtualService('shop', 'cart'), virtualService('shop', 'old'), virtualService('other', 'x')].join(
        '---\n',
      ),
    );
    await writeFile(
      path.join(dir, 'v2', 'mesh.yaml'),
      [
        virtualService('shop', 'cart', '2s'),
        virtualService('shop', 'new'),
        virtualService('shop-dev', 'cart'),
        virtualService('other', 'x'),
      ].join('---\n'),
    );
    await writeFile(path.join(dir, 'running.yaml'), configuration('v1', 'shop'));
    await writeFile(path.join(dir, 'next.yaml'), configuration('v2', 'shop, shop-dev'));
    await writeFile(
      path.join(dir, 'fewer-policies.yaml'),
      'sources: [{name: platform, type: file, path: ./v1}]\npolicies: [{name: everyone}]\n',
    );
  });
  after(() => dispose());

  const run = (...args: string[]) => runMeshmuxCli(['diff', ...args], dir);

  it('lists per policy the objects gained, lost and changed, with their source, and exits 1', async () => {
    const { code, stdout, stderr } = await run(
      '--current',
      'running.yaml',
      '--config',
      'next.yaml',
      '-o',
      'json',
    );
    assert.equal(code, 1, stderr);
    const diffs = JSON.parse(stdout) as Diff[];
    const summary = diffs.map((d) => ({
      policy: d.policy,
      presence: d.presence,
      gained: d.gained.map((o) => o.name),
      lost: d.lost.map((o) => o.name),
      changed: d.changed.map((c) => c.after.name),
    }));
    assert.deepEqual(summary, [
      {
        policy: 'shop',
        presence: 'kept',
        gained: ['shop-dev/cart', 'shop/new'],
        lost: ['shop/old'],
        changed: ['shop/cart'],
      },
      {
        policy: 'everyone',
        presence: 'kept',
        gained: ['shop-dev/cart', 'shop/new'],
        lost: ['shop/old'],
        changed: ['shop/cart'],
      },
    ]);
    assert.equal(diffs[0]?.gained[0]?.source, 'platform');
  });

  it('prints one line per object in text, and says which policy only one side has', async () => {
    const { code, stdout } = await run('--current', 'running.yaml', '--config', 'fewer-policies.yaml');
    assert.equal(code, 1);
    assert.match(
      stdout,
      /^policy shop \(only in running\.yaml: its istiods would be matched by a later policy or refused\): 0 gained, 2 lost, 0 changed$/m,
    );
    assert.match(stdout, /^ {2}- VirtualService shop\/cart {2}was from platform$/m);
    assert.match(stdout, /^policy everyone: 0 gained, 0 lost, 0 changed$/m);
    assert.match(stdout, /istiods would receive different config\n$/);
  });

  it('exits 0 and says so when the new configuration serves the same', async () => {
    const { code, stdout } = await run('--current', 'running.yaml', '--config', 'running.yaml');
    assert.equal(code, 0);
    assert.match(stdout, /no difference for any policy/);
  });

  it('exits 2 naming the file when a side cannot be read', async () => {
    await writeFile(path.join(dir, 'broken.yaml'), 'sources: [{name: platform, type: fiel, path: ./v1}]\n');
    const { code, stderr } = await run('--current', 'running.yaml', '--config', 'broken.yaml');
    assert.equal(code, 2);
    assert.match(stderr, /broken\.yaml.*sources\[0\]\.type/);
  });
});
