import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import type { RunningMeshmux } from '../../src/app.js';
import { CLI } from '../support/meshmux-cli.js';
import { mirrorFolderName } from '../../src/upstream/git/git-url.js';
import { GitDaemon, TestRepo, serviceEntry, virtualService } from '../support/git-fixtures.js';
import { IstiodClient } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { firstMatch } from '../support/deadline.js';
import { SE, VS } from '../support/type-urls.js';

const HOST = 'reviews.shop.svc.cluster.local';

interface GitStatusPage {
  name: string;
  state: string;
  lastFetched?: { commit: string };
  lastServed?: { commit: string };
  held?: { commit: string; invalidDocuments: number };
  fileErrors: Record<string, string[]>;
}

async function gitPage(meshmux: { admin: string }): Promise<GitStatusPage[]> {
  return (await (await fetch(`${meshmux.admin}/debug/git`)).json()) as GitStatusPage[];
}

function waitForSourceErrors(meshmux: RunningMeshmux, count: number): Promise<unknown> {
  return firstMatch(
    meshmux.engine.snapshots$,
    (s) => s.sources[0]?.errors.length === count,
    15_000,
    `the git source to report ${count} errors`,
  );
}

/** POSTs a push payload to the webhook; `sign` adds the forge's signature header. */
async function postPush(
  meshmux: { http: string },
  source: string,
  headers: Record<string, string>,
  body: string,
): Promise<Response> {
  return fetch(`${meshmux.http}/hooks/git/${source}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
}

function hmac(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

describe('an istiod syncing from a git repository through meshmux', () => {
  let root: string;
  let dispose: () => Promise<void>;
  const clients: IstiodClient[] = [];
  const connect = (xds: string): IstiodClient => {
    const c = new IstiodClient({ address: xds, backoff: { maxMs: 200 } }).start();
    clients.push(c);
    return c;
  };

  before(async () => {
    ({ dir: root, dispose } = await tempDir('meshmux-git-e2e-'));
  });
  after(async () => {
    for (const c of clients) c.close();
    await dispose();
  });

  it('serves the configuration shape of the issue as written, with the commit as provenance, and polls new commits', async () => {
    const repo = await TestRepo.create(root, 'shape');
    const first = await repo.commitAndPush(
      {
        'istio/shop/routes.yaml': virtualService('reviews', 'shop', HOST, '3s'),
        'README.yaml': serviceEntry('outside-paths', 'shop', 'nope.example.com'),
      },
      'first',
    );
    const meshmux = await startFromYaml(
      `sources:
  - name: gitops
    type: git
    url: ${repo.fileUrl}
    ref: main
    paths: ["istio/**/*.yaml"]
    interval: 2s
`,
      root,
    );
    try {
      const client = connect(meshmux.xds);
      await client.waitFor((c) => c.configs(VS).has('shop/reviews'), 15_000);
      const vs = client.configs(VS).get('shop/reviews');
      assert.equal(vs?.annotations['meshmux.io/source'], 'gitops');
      assert.equal(vs?.annotations['meshmux.io/source-version'], first);
      assert.equal(client.configs(SE).size, 0, 'files outside `paths` are not read');

      const second = await repo.commitAndPush(
        { 'istio/shop/routes.yaml': virtualService('reviews', 'shop', HOST, '4s') },
        'second',
      );
      const pushedAt = performance.now();
      await client.waitFor(
        (c) => c.configs(VS).get('shop/reviews')?.annotations['meshmux.io/source-version'] === second,
        15_000,
      );
      console.log(
        `git push -> served by polling (interval 2s, file://): ${(performance.now() - pushedAt).toFixed(0)} ms`,
      );
      const page = await gitPage(meshmux);
      assert.equal(page[0]?.lastServed?.commit, second);
      assert.equal(page[0]?.lastFetched?.commit, second);
    } finally {
      await meshmux.stop();
      // The shape names no cacheDir: remove the shared cache entry it made in the OS temp folder.
      await rm(path.join(tmpdir(), 'meshmux-git', mirrorFolderName(repo.fileUrl)), {
        recursive: true,
        force: true,
      });
    }
  });

  describe('over git:// with a webhook', () => {
    const secret = 'webhook-secret-7d1e';
    let repo: TestRepo;
    let daemon: GitDaemon;
    let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
    let client: IstiodClient;

    before(async () => {
      repo = await TestRepo.create(root, 'hooked');
      await repo.commitAndPush(
        {
          'routes.yaml': virtualService('reviews', 'shop', HOST, '3s'),
          'egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com'),
        },
        'first',
      );
      daemon = await GitDaemon.start(root);
      await writeFile(path.join(root, 'hook-secret'), `${secret}\n`);
      meshmux = await startFromYaml(
        `sources:
  - name: gitops
    type: git
    url: ${daemon.url(repo.remote)}
    ref: main
    interval: 1h
    cacheDir: cache
    webhook:
      secretFile: hook-secret
`,
        root,
      );
      client = connect(meshmux.xds);
      await client.waitFor((c) => c.configs(VS).has('shop/reviews'), 15_000);
    });
    after(async () => {
      await meshmux.stop();
      await daemon.stop();
    });

    it('ignores a push notification without a valid signature', async () => {
      const served = (await gitPage(meshmux))[0]?.lastFetched?.commit;
      await repo.commitAndPush({ 'routes.yaml': virtualService('reviews', 'shop', HOST, '7s') }, 'unsigned');
      const body = JSON.stringify({ ref: 'refs/heads/main' });
      const unsigned = await postPush(meshmux, 'gitops', { 'x-github-event': 'push' }, body);
      assert.equal(unsigned.status, 401);
      const forged = await postPush(
        meshmux,
        'gitops',
        { 'x-github-event': 'push', 'x-hub-signature-256': `sha256=${hmac('not-the-secret', body)}` },
        body,
      );
      assert.equal(forged.status, 401);
      assert.equal((await gitPage(meshmux))[0]?.lastFetched?.commit, served, 'no fetch happened');
    });

    for (const [forge, timeout, headers] of [
      [
        'GitHub',
        '11s',
        (body: string) => ({
          'x-github-event': 'push',
          'x-hub-signature-256': `sha256=${hmac(secret, body)}`,
        }),
      ],
      [
        'Gitea',
        '12s',
        (body: string) => ({ 'x-gitea-event': 'push', 'x-gitea-signature': hmac(secret, body) }),
      ],
      ['GitLab', '13s', () => ({ 'x-gitlab-event': 'Push Hook', 'x-gitlab-token': secret })],
    ] as const) {
      it(`fetches at once on a signed ${forge} push and the istiod gets the commit`, async () => {
        const sha = await repo.commitAndPush(
          { 'routes.yaml': virtualService('reviews', 'shop', HOST, timeout) },
          `${forge} push`,
        );
        const pushedAt = performance.now();
        const body = JSON.stringify({ ref: 'refs/heads/main', after: sha });
        const response = await postPush(meshmux, 'gitops', headers(body), body);
        assert.equal(response.status, 202);
        await client.waitFor(
          (c) => c.configs(VS).get('shop/reviews')?.annotations['meshmux.io/source-version'] === sha,
          10_000,
        );
        console.log(
          `git push -> served via ${forge} webhook (git://): ${(performance.now() - pushedAt).toFixed(0)} ms`,
        );
        const route = client.configs(VS).get('shop/reviews')?.body['http'] as Array<Record<string, unknown>>;
        assert.equal((route[0]?.['timeout'] as { seconds: number }).seconds, Number.parseInt(timeout, 10));
      });
    }

    it('keeps the last valid object of a broken file, reports file and line on /debug/git, and serves the rest', async () => {
      const before = client.configs(SE).get('payments/cards')?.version;
      const sha = await repo.commitAndPush(
        {
          'egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com').replace(
            'DNS',
            'SOMETIMES',
          ),
          'more.yaml': serviceEntry('ledger', 'payments', 'ledger.example.com'),
        },
        'break cards, add ledger',
      );
      const body = JSON.stringify({ ref: 'refs/heads/main' });
      await postPush(meshmux, 'gitops', { 'x-gitlab-token': secret }, body);
      await client.waitFor((c) => c.configs(SE).has('payments/ledger'), 10_000);
      assert.equal(client.configs(SE).get('payments/cards')?.version, before, 'the valid cards stays');
      const page = (await gitPage(meshmux))[0];
      assert.equal(page?.lastServed?.commit, sha);
      assert.match(
        page?.fileErrors['egress.yaml']?.[0] ?? '',
        /^egress\.yaml doc 0 line 1 field spec\.resolution/,
      );
      const sources = (await (await fetch(`${meshmux.admin}/debug/sources`)).json()) as Array<{
        errors: string[];
      }>;
      assert.match(sources[0]?.errors[0] ?? '', /egress\.yaml doc 0 line 1/);
    });

    it('answers 404 for a source it does not have', async () => {
      const response = await postPush(meshmux, 'elsewhere', {}, '{}');
      assert.equal(response.status, 404);
    });
  });

  it('holds back a commit with an invalid document in strict mode; the istiod keeps the last good commit', async () => {
    const repo = await TestRepo.create(root, 'strict');
    const good = await repo.commitAndPush(
      {
        'routes.yaml': virtualService('reviews', 'shop', HOST, '3s'),
        'egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com'),
      },
      'good',
    );
    const meshmux = await startFromYaml(
      `sources:\n  - name: strict\n    type: git\n    url: ${repo.fileUrl}\n    strict: true\n    interval: 1h\n    cacheDir: cache\n    webhook: {insecure: true}\n`,
      root,
    );
    try {
      const client = connect(meshmux.xds);
      await client.waitFor((c) => c.configs(VS).has('shop/reviews'), 15_000);
      const bad = await repo.commitAndPush(
        {
          'routes.yaml': virtualService('reviews', 'shop', HOST, '9s'),
          'egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com').replace(
            'DNS',
            'SOMETIMES',
          ),
        },
        'bad',
      );
      const errors = waitForSourceErrors(meshmux, 2);
      assert.equal((await postPush(meshmux, 'strict', {}, '')).status, 202);
      await errors;
      const page = (await gitPage(meshmux))[0];
      assert.equal(page?.held?.commit, bad);
      assert.equal(page?.lastServed?.commit, good);
      assert.equal(client.configs(VS).get('shop/reviews')?.annotations['meshmux.io/source-version'], good);
      const fixed = await repo.commitAndPush(
        { 'egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com') },
        'fix',
      );
      await postPush(meshmux, 'strict', {}, '');
      await client.waitFor(
        (c) => c.configs(VS).get('shop/reviews')?.annotations['meshmux.io/source-version'] === fixed,
        10_000,
      );
      const route = client.configs(VS).get('shop/reviews')?.body['http'] as Array<Record<string, unknown>>;
      assert.equal((route[0]?.['timeout'] as { seconds: number }).seconds, 9);
    } finally {
      await meshmux.stop();
    }
  });

  it('serves a 5,000-file repository and a one-file push to it, re-sending only the changed object', async () => {
    const repo = await TestRepo.create(root, 'large');
    const files: Record<string, string> = {};
    for (let i = 0; i < 5_000; i++) {
      const n = String(i).padStart(4, '0');
      files[`istio/team-${n.slice(0, 2)}/se-${n}.yaml`] = serviceEntry(
        `se-${n}`,
        'payments',
        `h${n}.example.com`,
      );
    }
    await repo.commitAndPush(files, '5,000 files');
    const startedAt = performance.now();
    const meshmux = await startFromYaml(
      `sources:\n  - name: large\n    type: git\n    url: ${repo.fileUrl}\n    interval: 1h\n    cacheDir: cache\n    webhook: {insecure: true}\n`,
      root,
    );
    try {
      const client = connect(meshmux.xds);
      await client.waitFor((c) => c.configs(SE).size === 5_000, 120_000);
      console.log(
        `5,000-file repository: first fetch and read to istiod: ${(performance.now() - startedAt).toFixed(0)} ms`,
      );
      const before = new Map([...client.configs(SE)].map(([k, v]) => [k, v.version]));
      const sha = await repo.commitAndPush(
        { 'istio/team-42/se-4242.yaml': serviceEntry('se-4242', 'payments', 'changed.example.com') },
        'one file',
      );
      const pushedAt = performance.now();
      assert.equal((await postPush(meshmux, 'large', {}, '')).status, 202);
      await client.waitFor(
        (c) => c.configs(SE).get('payments/se-4242')?.annotations['meshmux.io/source-version'] === sha,
        60_000,
      );
      console.log(
        `5,000-file repository: git push -> served via webhook: ${(performance.now() - pushedAt).toFixed(0)} ms`,
      );
      const changed = [...client.configs(SE)].filter(([k, v]) => before.get(k) !== v.version).map(([k]) => k);
      assert.deepEqual(changed, ['payments/se-4242']);
    } finally {
      await meshmux.stop();
    }
  });
});

describe('meshmux validate on a git repository', () => {
  function validate(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        [CLI, 'validate', ...args],
        { env: { ...process.env, MESHMUX_LOG_LEVEL: 'silent' } },
        (err, stdout, stderr) => resolve({ code: err === null ? 0 : Number(err.code), stdout, stderr }),
      );
    });
  }

  it('reads the files at HEAD of a bare repository and names the file and line of each problem', async () => {
    const { dir, dispose } = await tempDir('meshmux-git-validate-');
    try {
      const repo = await TestRepo.create(dir, 'mesh');
      const sha = await repo.commitAndPush(
        {
          'istio/good.yaml': serviceEntry('good', 'payments', 'good.example.com'),
          'istio/bad.yaml': serviceEntry('bad', 'payments', 'bad.example.com').replace('DNS', 'SOMETIMES'),
        },
        'one bad',
      );
      const bare = await validate(repo.remote);
      assert.equal(bare.code, 1);
      assert.match(bare.stderr, new RegExp(`reading 2 file\\(s\\) of commit ${sha}`));
      assert.match(bare.stderr, /mesh\.git:istio\/bad\.yaml doc 0 line 1 field spec\.resolution/);
      assert.match(bare.stdout, /1 valid object\(s\), 1 error\(s\)/);

      await repo.remove('istio/bad.yaml');
      await repo.commit('drop the bad one');
      // Uncommitted work in the work tree is not what a git source would serve: not read.
      await mkdir(path.join(repo.work, 'istio'), { recursive: true });
      await writeFile(path.join(repo.work, 'istio', 'draft.yaml'), 'kind: [\n');
      const work = await validate(repo.work);
      assert.equal(work.code, 0, work.stderr);
      assert.match(work.stdout, /1 valid object\(s\), 0 error\(s\)/);
    } finally {
      await dispose();
    }
  });
});
