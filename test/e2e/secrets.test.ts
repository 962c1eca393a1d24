import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DubboRegistry, encodeLikeJava, providerUrl } from '../support/dubbo-registry.js';
import { closingPort } from '../support/free-port.js';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { suiteSkip } from '../support/required-peer.js';
import { SE } from '../support/type-urls.js';
import { ZookeeperServer, zookeeperMissing } from '../support/zookeeper-server.js';

const WAIT_MS = 30_000;

/** Each planted secret, by where it was planted; none may appear in anything meshmux shows. */
const PLANTED = {
  dubboToken: 'planted-dubbo-token-7f3a',
  dubboPassword: 'planted-dubbo-password-91c2',
  dubboAccessKey: 'planted-access-key-55d0',
  dubboSignature: 'planted-signature-0b8e',
  dubboUserinfo: 'planted-provider-userinfo-c4e1',
  brokenProviderUserinfo: 'planted-broken-userinfo-a6f9',
  brokenProviderToken: 'planted-broken-token-3d27',
  gitUserinfo: 'planted-git-userinfo-e8b4',
} as const;

/** The planted secrets found in `text`, by name. */
function leaks(text: string): string[] {
  return Object.entries(PLANTED)
    .filter(([, secret]) => text.includes(secret))
    .map(([where]) => where);
}

describe('no secrets in served config or output', { skip: suiteSkip(zookeeperMissing()) }, () => {
  let zk: ZookeeperServer;
  let registry: DubboRegistry;
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;
  let client: IstiodClient;
  let gitRemote: { port: number; close: () => Promise<void> };

  before(async () => {
    // A git remote that hangs up at once: the fetch fails and its error names the URL.
    gitRemote = await closingPort();
    zk = await ZookeeperServer.start();
    registry = await DubboRegistry.connect(zk.connectString);
    const cart = { iface: 'com.acme.Cart', version: '1.0.0', application: 'cart' };
    await registry.register({
      ...cart,
      ip: '10.0.0.1',
      params: {
        token: PLANTED.dubboToken,
        password: PLANTED.dubboPassword,
        access_key: PLANTED.dubboAccessKey,
        'Request-Signature': PLANTED.dubboSignature,
        zone: 'east',
      },
    });
    // A provider URL with credentials before its host, as some registries write them.
    const withUserinfo = providerUrl({ ...cart, ip: '10.0.0.2', params: { zone: 'west' } }).replace(
      'dubbo://',
      `dubbo://admin:${PLANTED.dubboUserinfo}@`,
    );
    await registry.register({ iface: cart.iface, rawUrl: encodeLikeJava(withUserinfo) });
    // A registration that cannot be read: its error names the node, credentials and all.
    await registry.register({
      iface: cart.iface,
      rawUrl: encodeLikeJava(
        `dubbo://ops:${PLANTED.brokenProviderUserinfo}@10.0.0.3/com.acme.Cart?token=${PLANTED.brokenProviderToken}`,
      ),
    });

    ({ dir, dispose } = await tempDir('meshmux-secrets-'));
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      [
        // The git source never syncs: wait for it only briefly before serving the registry's kinds.
        'syncTimeout: 2s',
        'sources:',
        '  - name: dubbo',
        '    type: zookeeper',
        `    servers: ${zk.connectString}`,
        '    namespace: dubbo',
        '  - name: gitops',
        '    type: git',
        `    url: http://deploy:${PLANTED.gitUserinfo}@127.0.0.1:${gitRemote.port}/mesh.git`,
        '    required: false',
        '    interval: 1s',
        '',
      ].join('\n'),
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), {
      cwd: dir,
      env: { MESHMUX_LOG_LEVEL: 'debug' },
    });
    client = new IstiodClient({ address: meshmux.xds }).start();
    await client.waitFor(
      (c) =>
        (c.configs(SE).get('dubbo/1-0-0.com.acme.cart')?.body['endpoints'] as unknown[] | undefined)
          ?.length === 2,
      WAIT_MS,
      () => 'the Cart ServiceEntry with both readable providers',
    );
    await meshmux.waitForLog(
      (l) => JSON.stringify(l).includes(`127.0.0.1:${gitRemote.port}/mesh.git`),
      0,
      WAIT_MS,
      'a log line naming the git URL',
    );
  });
  after(async () => {
    client.close();
    await meshmux.stop();
    await registry.close();
    await zk.dispose();
    await gitRemote.close();
    await dispose();
  });

  it('serves provider parameters as endpoint labels, except those that carry credentials', () => {
    const se = client.configs(SE).get('dubbo/1-0-0.com.acme.cart');
    const endpoints = (se?.body['endpoints'] ?? []) as Array<{
      address: string;
      labels?: Record<string, string>;
    }>;
    const east = endpoints.find((e) => e.address === '10.0.0.1');
    assert.equal(east?.labels?.['zone'], 'east', 'ordinary parameters still become labels');
    assert.equal(east?.labels?.['application'], 'cart');
    for (const key of Object.keys(east?.labels ?? {}))
      assert.doesNotMatch(key, /token|password|access|signature/i, `label ${key}`);
    assert.deepEqual(
      leaks(JSON.stringify([...client.configs(SE).values()].map((c) => [c.labels, c.body]))),
      [],
    );
    const bytes = Buffer.concat([...client.configs(SE).values()].map((c) => c.bodyBytes)).toString('latin1');
    assert.deepEqual(leaks(bytes), [], 'not in the served bytes either');
  });

  it('shows neither URL credentials nor credential parameters on any page', async () => {
    const pages = [
      '/',
      '/debug/sources',
      '/debug/configz',
      '/debug/syncz',
      '/debug/state',
      '/debug/counters',
    ];
    const sources = await (await fetch(`${meshmux.admin}/debug/sources`)).text();
    // The page still names what went wrong, with the credentials hidden.
    assert.match(sources, /bad provider registration/);
    assert.ok(sources.includes(`127.0.0.1:${gitRemote.port}/mesh.git`), 'the page names the git URL');
    for (const page of pages) {
      const res = await fetch(`${meshmux.admin}${page}`);
      assert.equal(res.status, 200, page);
      assert.deepEqual(leaks(await res.text()), [], page);
    }
  });

  it('writes no secret to the log, though the log names the failing URL and node', () => {
    const text = meshmux.logs.map((l) => JSON.stringify(l)).join('\n');
    assert.ok(text.includes('mesh.git'), 'the git failure is logged');
    assert.deepEqual(leaks(text), []);
  });
});
