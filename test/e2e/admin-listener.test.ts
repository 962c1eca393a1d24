/**
 * Two listeners, with meshmux as a child process: `server.http` answers only what Prometheus, the
 * kubelet and git forges need; everything else is on the admin listener, which refuses what a
 * browser page, a rebinding DNS name or an anonymous peer could send it.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TestRepo, serviceEntry } from '../support/git-fixtures.js';
import { tempDir } from '../support/meshmux-harness.js';
import { runMeshmuxCli } from '../support/meshmux-cli.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';

const TOKEN = 'admin-token-5f3a9c';

/** One raw HTTP request, with exactly the headers given (fetch would not send a foreign Host). */
function raw(
  base: string,
  method: string,
  pathname: string,
  headers: Record<string, string> = {},
  body = '',
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const url = new URL(pathname, base);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, method, path: `${url.pathname}${url.search}`, headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            headers: res.headers,
          }),
        );
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${method} ${pathname} within 10 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

const VS_YAML = (name: string, namespace: string): string => `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${namespace}}
spec: {hosts: [${name}.${namespace}.svc.cluster.local]}
`;

describe('the metrics listener and the admin listener', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;
  let guarded: MeshmuxProcess;

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-admin-'));
    await writeFile(
      path.join(dir, 'mesh.yaml'),
      [VS_YAML('reviews', 'shop'), VS_YAML('ratings', 'shop'), VS_YAML('ledger', 'bank')].join('---\n'),
    );
    const repo = await TestRepo.create(dir);
    await repo.commitAndPush({ 'se.yaml': serviceEntry('payments', 'shop', 'payments.example.com') }, 'one');
    await writeFile(
      path.join(dir, 'loopback.yaml'),
      `sources:\n  - {name: mesh, type: file, path: ./mesh.yaml}\n  - {name: config, type: git, url: '${repo.fileUrl}', interval: 1h, cacheDir: git-a}\n`,
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'loopback.yaml'), { cwd: dir });
    await writeFile(path.join(dir, 'token'), `${TOKEN}\n`);
    await writeFile(
      path.join(dir, 'guarded.yaml'),
      'server: {admin: {address: 0.0.0.0:0, tokenFile: ./token}}\nsources: [{name: mesh, type: file, path: ./mesh.yaml}]\n',
    );
    guarded = await MeshmuxProcess.start(path.join(dir, 'guarded.yaml'), { cwd: dir });
  });
  after(async () => {
    await meshmux?.kill();
    await guarded?.kill();
    await dispose();
  });

  it('answers only metrics, health and readiness on the http listener', async () => {
    for (const page of ['/metrics', '/healthz', '/ready']) {
      assert.equal((await raw(meshmux.http, 'GET', page)).status, 200, page);
    }
    for (const page of ['/', '/debug/sources', '/debug/configz', '/debug/preview?node=x']) {
      assert.equal((await raw(meshmux.http, 'GET', page)).status, 404, page);
    }
    const reset = await raw(
      meshmux.http,
      'POST',
      '/debug/counters/reset',
      { 'content-type': 'application/json' },
      '{}',
    );
    assert.equal(reset.status, 404);
    assert.equal(
      (await raw(meshmux.admin, 'GET', '/debug/sources')).status,
      200,
      'the admin listener has them',
    );
  });

  it('refuses a foreign Host, a POST that is not JSON and a cross-site Origin on the loopback admin listener', async () => {
    const port = new URL(meshmux.admin).port;
    const rebinding = await raw(meshmux.admin, 'GET', '/debug/sources', { host: `attacker.example:${port}` });
    assert.equal(rebinding.status, 403);
    assert.match(rebinding.body, /not a loopback name/);
    const plain = await raw(
      meshmux.admin,
      'POST',
      '/debug/counters/reset',
      { 'content-type': 'text/plain' },
      '{}',
    );
    assert.equal(plain.status, 415);
    const crossSite = await raw(
      meshmux.admin,
      'POST',
      '/debug/counters/reset',
      { 'content-type': 'application/json', origin: 'https://attacker.example' },
      '{}',
    );
    assert.equal(crossSite.status, 403);
    const sameSite = await raw(
      meshmux.admin,
      'POST',
      '/debug/counters/reset',
      { 'content-type': 'application/json', origin: `http://127.0.0.1:${port}` },
      '{}',
    );
    assert.equal(sameSite.status, 200);
    const refused = await raw(meshmux.http, 'GET', '/metrics');
    assert.match(refused.body, /meshmux_admin_requests_refused_total\{reason="origin"\} 1/);
    assert.match(refused.body, /meshmux_admin_requests_refused_total\{reason="host"\} 1/);
  });

  it('refuses to claim a certificate identity in a preview without an admin token', async () => {
    const claim = await raw(
      meshmux.admin,
      'GET',
      '/debug/preview?node=sidecar~1.2.3.4~a.b~b.svc.cluster.local&san=URI:spiffe://cluster.local/ns/istio-system/sa/istiod',
    );
    assert.equal(claim.status, 403);
    assert.match(claim.body, /server\.admin\.tokenFile/);
    const plain = await raw(
      meshmux.admin,
      'GET',
      '/debug/preview?node=sidecar~1.2.3.4~a.b~b.svc.cluster.local',
    );
    assert.equal(plain.status, 200);
  });

  it('streams /debug/configz and filters it by kind and namespace', async () => {
    const all = await raw(meshmux.admin, 'GET', '/debug/configz');
    assert.equal(all.headers['transfer-encoding'], 'chunked', 'written part by part');
    const names = (body: string): string[] =>
      (JSON.parse(body) as Array<{ namespace: string; name: string }>)
        .map((o) => `${o.namespace}/${o.name}`)
        .sort();
    assert.deepEqual(names(all.body), ['bank/ledger', 'shop/payments', 'shop/ratings', 'shop/reviews']);
    assert.deepEqual(
      names((await raw(meshmux.admin, 'GET', '/debug/configz?namespace=shop&kind=VirtualService')).body),
      ['shop/ratings', 'shop/reviews'],
    );
    assert.deepEqual(names((await raw(meshmux.admin, 'GET', '/debug/configz?kind=*Entry')).body), [
      'shop/payments',
    ]);
  });

  it('refuses an unsigned webhook to a git source without a secret', async () => {
    const hook = await raw(
      meshmux.http,
      'POST',
      '/hooks/git/config',
      { 'content-type': 'application/json' },
      '{}',
    );
    assert.equal(hook.status, 401);
    assert.match(hook.body, /webhook\.insecure: true/);
  });

  it('requires the bearer token on an admin listener bound beyond loopback', async () => {
    const page = '/debug/sources';
    assert.equal((await raw(guarded.admin, 'GET', page)).status, 401);
    assert.equal((await raw(guarded.admin, 'GET', page, { authorization: 'Bearer wrong' })).status, 401);
    assert.equal((await raw(guarded.admin, 'GET', page, { authorization: `Bearer ${TOKEN}` })).status, 200);
    const claim = await raw(
      guarded.admin,
      'GET',
      '/debug/preview?node=sidecar~1.2.3.4~a.b~b.svc.cluster.local&san=URI:spiffe://x',
      {
        authorization: `Bearer ${TOKEN}`,
      },
    );
    assert.equal(claim.status, 200, 'with the token, an identity may be claimed');
    const metrics = await raw(guarded.http, 'GET', '/metrics');
    assert.match(metrics.body, /meshmux_admin_requests_refused_total\{reason="token"\} 2/);
  });

  it('refuses a configuration that binds the admin listener beyond loopback without a token file', async () => {
    const file = path.join(dir, 'open.yaml');
    await writeFile(file, 'server: {admin: {address: 0.0.0.0:15015}}\nsources: []\n');
    const result = await runMeshmuxCli(['check-config', file]);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /server\.admin\.tokenFile/);
  });
});
