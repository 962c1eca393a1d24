/**
 * What stands between meshmux and the Kubernetes API server failing it, against meshmux running as
 * its own process with an istiod stand-in connected: a credential rotated in its kubeconfig, and
 * a watch answer of one endless line.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { describe, it } from 'node:test';
import { connectIstiod, report } from '../support/fault-kit.js';
import { FakeKubeApiServer, type ServedKind } from '../support/fake-kube-apiserver.js';
import { until } from '../support/deadline.js';
import { routedVs } from '../support/kubernetes-cart.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { DR, VS } from '../support/type-urls.js';

const VIRTUAL_SERVICES: ServedKind = {
  group: 'networking.istio.io',
  versions: ['v1', 'v1beta1', 'v1alpha3'],
  kind: 'VirtualService',
  plural: 'virtualservices',
};

function kubeconfig(server: string, token: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    `clusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]`,
    `users: [{name: c, user: {token: "${token}"}}]`,
    'contexts: [{name: c, context: {cluster: c, user: c}}]',
    'current-context: c',
    '',
  ].join('\n');
}

/** `meshmux.yaml` in `dir`: the VirtualServices of the cluster `./kubeconfig` names, and `extra` sources. */
async function configure(dir: string, extra: readonly string[] = []): Promise<string> {
  const file = path.join(dir, 'meshmux.yaml');
  await writeFile(
    file,
    [
      'state: { dir: none }',
      'sources:',
      '  - name: cluster',
      '    type: kubernetes',
      '    kubeconfig: ./kubeconfig',
      '    kinds: [VirtualService]',
      ...extra,
      '',
    ].join('\n'),
  );
  return file;
}

describe('faults: a Kubernetes token rotated in its kubeconfig', () => {
  it('takes the new token from the file at the next retry, with no reload', async () => {
    const api = await FakeKubeApiServer.start([VIRTUAL_SERVICES], 0, { token: 'token-a' });
    for (let i = 0; i < 5; i++) api.put(routedVs(`vs-${i}`));
    const dir = await tempDir('meshmux-kube-rotated-');
    await writeFile(path.join(dir.dir, 'kubeconfig'), kubeconfig(api.url, 'token-a'));
    const meshmux = await MeshmuxProcess.start(await configure(dir.dir, ['    maxStale: 15s']), {
      cwd: dir.dir,
    });
    const istiod = connectIstiod(meshmux.xds);
    try {
      await until(() => istiod.configs(VS).size === 5, 30_000, 'the first state', {
        describe: () => meshmux.tail(10),
      });
      // The rotation: the new token written over the same file, the old one revoked, and the
      // watch cut (as the API server does when it stops taking a token).
      await writeFile(path.join(dir.dir, 'kubeconfig'), kubeconfig(api.url, 'token-b'));
      api.rotateToken('token-b');
      api.cutWatches('VirtualService');
      const rotatedAt = performance.now();
      api.put(routedVs('vs-new'));
      await until(
        () => istiod.configs(VS).has('shop/vs-new'),
        20_000,
        'a VirtualService created after the rotation',
        {
          describe: () => `the istiod holds ${istiod.configs(VS).size}; ${meshmux.tail(10)}`,
        },
      );
      const arrivedMs = performance.now() - rotatedAt;
      assert.equal(istiod.configs(VS).size, 6);
      report('a Kubernetes token rotated in its kubeconfig', {
        'ms from the rotation to a change served': arrivedMs,
        'objects lost of 5': 5 - (istiod.configs(VS).size - 1),
      });
    } finally {
      istiod.close();
      await meshmux.stop();
      await api.stop();
      await dir.dispose();
    }
  });
});

describe('faults: a Kubernetes watch answered with one endless line', () => {
  it('fails that watch at its bound, stays up, and lists again once the answers are sane', async () => {
    const api = await FakeKubeApiServer.start([VIRTUAL_SERVICES]);
    for (let i = 0; i < 5; i++) api.put(routedVs(`vs-${i}`));
    const upstream = new URL(api.url);
    let hostile = false;
    let sent = 0;
    // A proxy in front of the API server that, once hostile, answers every watch with 'a's and
    // never a newline, for as long as meshmux reads.
    const front: Server = createServer((req, res) => {
      if (hostile && (req.url ?? '').includes('watch=true')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = Buffer.alloc(1 << 20, 0x61);
        res.write('{"type":"ADDED","object":{"metadata":{"name":"');
        const pump = (): void => {
          while (!res.destroyed && sent < 2 * 1024 ** 3) {
            sent += chunk.length;
            if (!res.write(chunk)) {
              res.once('drain', pump);
              return;
            }
          }
          res.end();
        };
        pump();
        req.on('close', () => res.destroy());
        return;
      }
      const forward = request(
        {
          host: upstream.hostname,
          port: upstream.port,
          path: req.url,
          method: req.method,
          headers: req.headers,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          // A watch the API server cut is cut here too.
          answer.on('close', () => {
            if (!answer.complete) res.destroy();
          });
        },
      );
      forward.on('error', () => res.destroy());
      res.on('close', () => forward.destroy());
      req.pipe(forward);
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    const dir = await tempDir('meshmux-kube-endless-');
    await writeFile(
      path.join(dir.dir, 'kubeconfig'),
      kubeconfig(`http://127.0.0.1:${(front.address() as AddressInfo).port}`, 'unused'),
    );
    await writeFile(
      path.join(dir.dir, 'f.yaml'),
      'apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: f, namespace: shop}\nspec: {host: f.example.com}\n',
    );
    const meshmux = await MeshmuxProcess.start(
      await configure(dir.dir, ['  - name: files', '    type: file', '    path: ./f.yaml']),
      { cwd: dir.dir },
    );
    const istiod = connectIstiod(meshmux.xds);
    try {
      await until(
        () => istiod.configs(VS).size === 5 && istiod.configs(DR).size === 1,
        30_000,
        'the first state',
        {
          describe: () => meshmux.tail(10),
        },
      );
      hostile = true;
      const hostileAt = performance.now();
      const from = meshmux.logs.length;
      api.cutWatches('VirtualService');
      // Before, the process died here (RangeError: Invalid string length) after some 500 MiB.
      const failed = await meshmux.waitForLog(
        (l) => l.msg === 'watch failed: relisting',
        from,
        60_000,
        'the endless watch failed',
      );
      assert.match(String(failed['error']), /an event longer than 6 MiB; not read/);
      assert.equal(failed['kind'], 'VirtualService');
      assert.equal(failed['source'], 'cluster');
      const failedMs = performance.now() - hostileAt;
      const sentMiB = sent / 1024 / 1024;
      hostile = false;
      api.put(routedVs('vs-new'));
      await until(() => istiod.configs(VS).has('shop/vs-new') || !meshmux.alive, 60_000, 'a later change', {
        describe: () => meshmux.tail(10),
      });
      assert.ok(meshmux.alive, `meshmux exited:\n${meshmux.errorOutput.slice(-1_000)}`);
      assert.equal(istiod.configs(VS).size, 6);
      assert.equal(istiod.configs(DR).size, 1);
      report('a Kubernetes watch answered with one endless line', {
        'MiB sent before the watch failed (about)': sentMiB,
        'ms to the failure': failedMs,
        'ms to a later change': performance.now() - hostileAt,
        'objects lost of 6': 0,
      });
    } finally {
      istiod.close();
      await meshmux.stop();
      front.closeAllConnections();
      await new Promise((resolve) => front.close(resolve));
      await api.stop();
      await dir.dispose();
    }
  });
});
