import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import { parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';
import { gitAuthFor } from '../../src/upstream/git/git-credentials.js';
import { GitSource, type GitSourceOptions } from '../../src/upstream/git/git-source.js';
import { redactUrl } from '../../src/upstream/git/git-url.js';
import { RecentDeliveries } from '../../src/upstream/git/recent-deliveries.js';
import {
  handleGitWebhook,
  refMatches,
  verifySignature,
  type WebhookTarget,
} from '../../src/upstream/git/git-webhook.js';
import { GitDaemon, GitHttpServer, TestRepo, serviceEntry, virtualService } from '../support/git-fixtures.js';
import { freePort } from '../support/free-port.js';
import { tempDir } from '../support/meshmux-harness.js';
import { SourceEventRecorder } from '../support/source-event-recorder.js';

const VS = 'networking.istio.io/VirtualService';
const SE = 'networking.istio.io/ServiceEntry';
/** Long enough that only explicit fetches happen during a test. */
const NO_POLLING_MS = 3_600_000;

function object(snapshot: SourceSnapshotEvent, kind: string, id: string): ConfigResource | undefined {
  return [...snapshot.resources].find((r) => r.kind === kind && `${r.namespace}/${r.name}` === id);
}

function ids(snapshot: SourceSnapshotEvent): string[] {
  return [...snapshot.resources].map((r) => `${r.kind.split('/')[1] ?? ''} ${r.namespace}/${r.name}`).sort();
}

describe('the git source', () => {
  let root: string;
  let dispose: () => Promise<void>;
  let counter = 0;
  const running: SourceEventRecorder[] = [];

  before(async () => {
    ({ dir: root, dispose } = await tempDir('meshmux-git-source-'));
  });
  afterEach(() => {
    for (const r of running.splice(0)) r.close();
  });
  after(async () => {
    await dispose();
  });

  /** A fresh repository with a first commit pushed to `main`. */
  async function repoWith(files: Record<string, string>): Promise<{ repo: TestRepo; first: string }> {
    const repo = await TestRepo.create(root, `repo-${++counter}`);
    const first = await repo.commitAndPush(files, 'first');
    return { repo, first };
  }

  function start(options: Partial<GitSourceOptions> & { url: string }): {
    source: GitSource;
    events: SourceEventRecorder;
  } {
    const source = new GitSource({
      name: `git-${counter}`,
      ref: 'main',
      defaultNamespace: 'default',
      intervalMs: NO_POLLING_MS,
      cacheDir: path.join(root, 'cache'),
      ...options,
    });
    const events = new SourceEventRecorder(source.events$);
    running.push(events);
    return { source, events };
  }

  it('serves the files matching `paths` at the ref, one snapshot per commit, with the commit as revision and provenance', async () => {
    const { repo, first } = await repoWith({
      'istio/shop/routes.yaml': virtualService('reviews', 'shop', 'reviews.shop.svc.cluster.local'),
      'istio/egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com'),
      'docs/example.yaml': serviceEntry('not-served', 'payments', 'docs.example.com'),
      '.github/workflows/ci.yaml': 'name: ci\n',
    });
    const { events } = start({ url: repo.fileUrl, paths: ['istio/**/*.yaml'] });
    const snapshot = await events.snapshot();
    assert.equal(snapshot.revision, first);
    assert.deepEqual(ids(snapshot), ['ServiceEntry payments/cards', 'VirtualService shop/reviews']);
    const vs = object(snapshot, VS, 'shop/reviews');
    assert.equal(vs?.origin.file, 'istio/shop/routes.yaml');
    assert.equal(vs?.origin.upstreamVersion, first);
    assert.equal(vs?.origin.line, 1);
    assert.deepEqual(snapshot.errors, []);
    assert.equal(events.events.filter((e) => e.type === 'snapshot').length, 1, 'one snapshot for one commit');
  });

  it('serves a new commit whole and re-versions only the objects that commit changed', async () => {
    const ratings = virtualService('ratings', 'shop', 'ratings.shop.svc.cluster.local');
    const { repo, first } = await repoWith({
      'routes.yaml': `${ratings}---\n${virtualService('reviews', 'shop', 'reviews.shop.svc.cluster.local', '3s')}`,
      'egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com'),
    });
    const { source, events } = start({ url: repo.fileUrl });
    const before = await events.snapshot();
    const mark = events.count;
    const second = await repo.commitAndPush(
      {
        'routes.yaml': `${ratings}---\n${virtualService('reviews', 'shop', 'reviews.shop.svc.cluster.local', '4s')}`,
        'more.yaml': serviceEntry('ledger', 'payments', 'ledger.example.com'),
      },
      'second',
    );
    await source.fetchNow();
    const after = await events.snapshot(mark);
    assert.equal(after.revision, second);
    assert.deepEqual(ids(after), [
      'ServiceEntry payments/cards',
      'ServiceEntry payments/ledger',
      'VirtualService shop/ratings',
      'VirtualService shop/reviews',
    ]);
    assert.equal(object(after, VS, 'shop/reviews')?.origin.upstreamVersion, second);
    assert.equal(
      object(after, VS, 'shop/ratings')?.origin.upstreamVersion,
      first,
      'an unchanged document of a changed file keeps its commit',
    );
    assert.notEqual(object(after, VS, 'shop/reviews')?.version, object(before, VS, 'shop/reviews')?.version);
    const cards = object(after, SE, 'payments/cards');
    assert.equal(cards?.origin.upstreamVersion, first, 'the unchanged object keeps the commit it came with');
    assert.equal(cards, object(before, SE, 'payments/cards'), 'the very same object is served again');
    assert.equal(events.events.slice(mark).filter((e) => e.type === 'snapshot').length, 1);
  });

  it("serves the remote's default branch when no ref is configured", async () => {
    const { repo, first } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
    const { events } = start({ url: repo.fileUrl, ref: 'HEAD' });
    assert.equal((await events.snapshot()).revision, first);
  });

  it('refuses transports outside https, http, ssh, git and file in its configuration', () => {
    const config = (url: string): string =>
      `sources:\n  - name: g\n    type: git\n    url: ${JSON.stringify(url)}\n`;
    assert.equal(parseMeshmuxConfig(config('file:///srv/mesh.git'), 't', root).sources[0]?.type, 'git');
    assert.equal(parseMeshmuxConfig(config('git@example.com:mesh.git'), 't', root).sources[0]?.type, 'git');
    assert.throws(
      () => parseMeshmuxConfig(config('ext::sh -c touch% /tmp/pwned'), 't', root),
      /sources\[0\]\.url/,
    );
    assert.throws(() => parseMeshmuxConfig(config('/srv/mesh.git'), 't', root), /sources\[0\]\.url/);
  });

  it('fetches a new commit on its own every interval', async () => {
    const { repo } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
    const { events } = start({ url: repo.fileUrl, intervalMs: 50 });
    await events.snapshot();
    const mark = events.count;
    const second = await repo.commitAndPush({ 'b.yaml': serviceEntry('b', 'default', 'b.example.com') }, 'b');
    const snapshot = await events.next((e) => e.type === 'snapshot' && e.revision === second, mark);
    assert.equal((snapshot as SourceSnapshotEvent).resources.length, 2);
  });

  it('drops the objects of a file deleted in a new commit', async () => {
    const { repo } = await repoWith({
      'a.yaml': serviceEntry('a', 'default', 'a.example.com'),
      'b.yaml': serviceEntry('b', 'default', 'b.example.com'),
    });
    const { source, events } = start({ url: repo.fileUrl });
    assert.equal((await events.snapshot()).resources.length, 2);
    const mark = events.count;
    await repo.remove('b.yaml');
    const second = await repo.commit('delete b');
    await repo.push();
    await source.fetchNow();
    const snapshot = await events.snapshot(mark);
    assert.equal(snapshot.revision, second);
    assert.deepEqual(ids(snapshot), ['ServiceEntry default/a']);
  });

  it('serves a pinned tag, ignores the branch moving on, and follows the tag when it is moved', async () => {
    const { repo, first } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'v1.example.com') });
    await repo.git('tag', '--annotate', '--message=release 1', 'v1');
    await repo.push('v1');
    const { source, events } = start({ url: repo.fileUrl, ref: 'v1' });
    assert.equal((await events.snapshot()).revision, first);
    const mark = events.count;
    const second = await repo.commitAndPush(
      { 'a.yaml': serviceEntry('a', 'default', 'v2.example.com') },
      'v2',
    );
    await source.fetchNow();
    assert.equal(events.count, mark, 'nothing new while the tag stays');
    assert.equal(source.status().lastFetched?.commit, first);
    await repo.git('tag', '--force', '--annotate', '--message=release 1, again', 'v1');
    await repo.push('--force', 'v1');
    await source.fetchNow();
    assert.equal((await events.snapshot(mark)).revision, second);
  });

  it('serves a pinned commit whatever the branch does', async () => {
    const { repo, first } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'one.example.com') });
    await repo.commitAndPush({ 'a.yaml': serviceEntry('a', 'default', 'two.example.com') }, 'two');
    const { source, events } = start({ url: repo.fileUrl, ref: first });
    const snapshot = await events.snapshot();
    assert.equal(snapshot.revision, first);
    assert.equal(object(snapshot, SE, 'default/a')?.origin.upstreamVersion, first);
    const mark = events.count;
    await repo.commitAndPush({ 'a.yaml': serviceEntry('a', 'default', 'three.example.com') }, 'three');
    await source.fetchNow();
    assert.equal(events.count, mark);
    assert.equal(source.status().lastServed?.commit, first);
  });

  it('follows a force-push that rewrites the history of the branch', async () => {
    const { repo, first } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
    const { source, events } = start({ url: repo.fileUrl });
    await events.snapshot();
    await repo.commitAndPush({ 'b.yaml': serviceEntry('b', 'default', 'b.example.com') }, 'add b');
    let mark = events.count;
    await source.fetchNow();
    assert.equal((await events.snapshot(mark)).resources.length, 2);
    // Rewrite: drop "add b", commit something else instead, force-push.
    await repo.git('reset', '--hard', '--quiet', first);
    await repo.write({ 'c.yaml': serviceEntry('c', 'default', 'c.example.com') });
    const rewritten = await repo.commit('add c instead');
    await repo.push('--force', 'main');
    mark = events.count;
    await source.fetchNow();
    const snapshot = await events.snapshot(mark);
    assert.equal(snapshot.revision, rewritten);
    assert.deepEqual(ids(snapshot), ['ServiceEntry default/a', 'ServiceEntry default/c']);
    assert.equal(source.status().lastError, undefined);
  });

  it('rejects an invalid document with its file and line, keeps the previous version of its object, and applies the rest of the commit', async () => {
    const { repo, first } = await repoWith({
      'istio/egress.yaml':
        serviceEntry('cards', 'payments', 'api.cards.example.com') +
        '---\n' +
        serviceEntry('ledger', 'payments', 'ledger.example.com'),
      'istio/routes.yaml': virtualService('reviews', 'shop', 'reviews.shop.svc.cluster.local', '3s'),
    });
    const { source, events } = start({ url: repo.fileUrl });
    await events.snapshot();
    const mark = events.count;
    const second = await repo.commitAndPush(
      {
        'istio/egress.yaml':
          serviceEntry('cards', 'payments', 'api.cards.example.com') +
          '---\n' +
          serviceEntry('ledger', 'payments', 'ledger.example.com').replace(
            'resolution: DNS',
            'resolution: SOMETIMES',
          ),
        'istio/routes.yaml': virtualService('reviews', 'shop', 'reviews.shop.svc.cluster.local', '5s'),
      },
      'break the ledger, change the route',
    );
    await source.fetchNow();
    const snapshot = await events.snapshot(mark);
    assert.equal(snapshot.revision, second, 'the commit is served');
    assert.equal(snapshot.errors.length, 1);
    assert.match(
      snapshot.errors[0]?.describe() ?? '',
      /^istio\/egress\.yaml doc 1 line 13 field spec\.resolution: unknown value "SOMETIMES"/,
    );
    const ledger = object(snapshot, SE, 'payments/ledger');
    assert.equal(ledger?.origin.upstreamVersion, first, 'the last valid ledger stays');
    assert.equal(object(snapshot, VS, 'shop/reviews')?.origin.upstreamVersion, second, 'the route changed');
    assert.deepEqual(Object.keys(source.status().fileErrors), ['istio/egress.yaml']);

    // Later commits that leave the file broken keep the kept object too.
    const next = events.count;
    const third = await repo.commitAndPush(
      { 'istio/other.yaml': serviceEntry('other', 'payments', 'other.example.com') },
      'unrelated',
    );
    await source.fetchNow();
    const later = await events.snapshot(next);
    assert.equal(later.revision, third);
    assert.equal(object(later, SE, 'payments/ledger'), ledger);
    assert.equal(later.errors.length, 1);
  });

  it('holds a commit with an invalid document back in strict mode and keeps serving the last good commit', async () => {
    const { repo, first } = await repoWith({
      'egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com'),
      'routes.yaml': virtualService('reviews', 'shop', 'reviews.shop.svc.cluster.local', '3s'),
    });
    const { source, events } = start({ url: repo.fileUrl, strict: true });
    const good = await events.snapshot();
    let mark = events.count;
    const bad = await repo.commitAndPush(
      {
        'egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com').replace('DNS', 'SOMETIMES'),
        'routes.yaml': virtualService('reviews', 'shop', 'reviews.shop.svc.cluster.local', '5s'),
      },
      'bad',
    );
    await source.fetchNow();
    const held = await events.snapshot(mark);
    assert.equal(held.revision, first, 'the last good commit stays served');
    assert.deepEqual(held.resources, good.resources, 'not even the valid change of the bad commit is served');
    assert.match(held.errors[0]?.describe() ?? '', new RegExp(`commit ${bad} is held back \\(strict\\)`));
    assert.match(held.errors[1]?.describe() ?? '', /^egress\.yaml doc 0 line \d+/);
    assert.equal(source.status().held?.commit, bad);
    assert.equal(source.status().lastServed?.commit, first);
    mark = events.count;
    const fixed = await repo.commitAndPush(
      { 'egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com') },
      'fix',
    );
    await source.fetchNow();
    const snapshot = await events.snapshot(mark);
    assert.equal(snapshot.revision, fixed);
    assert.deepEqual(snapshot.errors, []);
    assert.equal(object(snapshot, VS, 'shop/reviews')?.origin.upstreamVersion, fixed);
    assert.equal(source.status().held, undefined);
  });

  it('reports failing in strict mode when the very first commit is invalid', async () => {
    const { repo, first } = await repoWith({
      'egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com').replace('DNS', 'SOMETIMES'),
    });
    const { events } = start({ url: repo.fileUrl, strict: true });
    const failing = await events.status('failing');
    assert.match(failing.error?.describe() ?? '', new RegExp(`${first} is held back .*no commit served yet`));
    assert.equal(events.lastSnapshot(), undefined);
  });

  it('turns stale with a clear error when its branch disappears, keeps its objects, and recovers when the branch is back', async () => {
    const { repo } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
    await repo.push('main:release');
    const { source, events } = start({ url: repo.fileUrl, ref: 'release' });
    await events.snapshot();
    let mark = events.count;
    await repo.push('--delete', 'release');
    await source.fetchNow();
    const stale = await events.status('stale', mark);
    assert.match(stale.error?.describe() ?? '', /ref "release" does not exist/);
    assert.equal(
      events.events.slice(mark).some((e) => e.type === 'snapshot'),
      false,
      'no snapshot: the objects stay',
    );
    assert.match(source.status().lastError ?? '', /release/);
    await source.fetchNow();
    assert.equal(events.events.slice(mark).filter((e) => e.type === 'status').length, 1, 'reported once');
    mark = events.count;
    const back = await repo.commitAndPush({ 'b.yaml': serviceEntry('b', 'default', 'b.example.com') }, 'b');
    await repo.push('main:release');
    await source.fetchNow();
    assert.equal((await events.snapshot(mark)).revision, back);
    assert.equal(source.status().state, 'synced');
  });

  it('turns stale when the git server goes away and synced again when it is back, over git://', async () => {
    const { repo, first } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
    const daemon = await GitDaemon.start(root);
    try {
      const { source, events } = start({ url: daemon.url(repo.remote), timeoutMs: 10_000 });
      assert.equal((await events.snapshot()).revision, first);
      let mark = events.count;
      await daemon.stop();
      await source.fetchNow();
      const stale = await events.status('stale', mark);
      assert.match(
        stale.error?.describe() ?? '',
        /git:\/\/127\.0\.0\.1:\d+\/repo-\d+\.git: git fetch failed/,
      );
      assert.equal(source.status().lastServed?.commit, first);
      mark = events.count;
      await daemon.restart();
      await source.fetchNow();
      await events.status('synced', mark);
      assert.equal(source.status().lastError, undefined);
    } finally {
      await daemon.stop();
    }
  });

  it('reports failing when the remote has never answered', async () => {
    const port = await freePort();
    const { events } = start({ url: `git://127.0.0.1:${port}/nothing.git`, timeoutMs: 10_000 });
    const failing = await events.status('failing');
    assert.match(failing.error?.describe() ?? '', /git fetch failed/);
  });

  it('serves the commit its mirror last fetched when the remote is gone at a restart, as stale, and recovers when it is back', async () => {
    const { repo, first } = await repoWith({
      'istio/egress.yaml': serviceEntry('cards', 'payments', 'api.cards.example.com'),
      'istio/routes.yaml': virtualService('reviews', 'shop', 'reviews.shop.svc.cluster.local'),
    });
    const before = start({ url: repo.remote });
    const served = await before.events.snapshot();
    assert.equal(served.revision, first);
    before.events.close();

    const away = `${repo.remote}.moved`;
    await rename(repo.remote, away);
    const after = start({ url: repo.remote, timeoutMs: 10_000 });
    const snapshot = await after.events.snapshot();
    assert.equal(snapshot.revision, first, 'the last fetched commit, from the mirror on disk');
    assert.deepEqual(ids(snapshot), ids(served));
    const stale = await after.events.status('stale');
    assert.equal(stale.error?.code, 'UNAVAILABLE');
    assert.match(stale.error?.describe() ?? '', /git fetch failed/);
    assert.equal(after.source.status().lastServed?.commit, first);

    await rename(away, repo.remote);
    const from = after.events.count;
    await after.source.fetchNow('test');
    await after.events.status('synced', from);
    assert.ok(
      !after.events.events.slice(from).some((e) => e.type === 'snapshot'),
      'the same commit is not served again',
    );
  });

  it('keeps its mirror, and the commit it last fetched, when git cannot open the repository a local remote links to', async () => {
    const { repo, first } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
    // A local checkout whose `.git` is a link to its repository (a worktree, a submodule).
    const linked = path.join(root, `linked-${counter}`);
    await mkdir(linked);
    await writeFile(path.join(linked, '.git'), `gitdir: ${repo.remote}\n`);
    const before = start({ url: linked });
    assert.equal((await before.events.snapshot()).revision, first);
    const away = `${repo.remote}.moved`;
    await rename(repo.remote, away);
    const from = before.events.count;
    await before.source.fetchNow('test');
    await before.events.status('stale', from);
    before.events.close();

    // A restart while the remote is still away serves what the mirror last fetched.
    const after = start({ url: linked, timeoutMs: 10_000 });
    const snapshot = await after.events.snapshot();
    assert.equal(snapshot.revision, first, 'the last fetched commit, from the mirror on disk');
    await rename(away, repo.remote);
  });

  it('reports failing, serving nothing, when the remote is gone at start and its mirror never fetched the ref', async () => {
    const { repo } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
    await rename(repo.remote, `${repo.remote}.moved`);
    const { events } = start({ url: repo.remote, timeoutMs: 10_000 });
    const failing = await events.status('failing');
    assert.match(failing.error?.describe() ?? '', /git fetch failed/);
    assert.ok(!events.events.some((e) => e.type === 'snapshot'));
  });

  for (const [what, damage] of [
    ['its whole folder was', (mirror: string) => rm(path.dirname(mirror), { recursive: true, force: true })],
    [
      'its objects were',
      (mirror: string) => rm(path.join(mirror, 'objects'), { recursive: true, force: true }),
    ],
  ] as const) {
    it(`fetches the next commit into a mirror built again after ${what} removed while running`, async () => {
      const { repo, first } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
      const cacheDir = path.join(root, `removed-cache-${counter}`);
      const { source, events } = start({ url: repo.remote, cacheDir });
      assert.equal((await events.snapshot()).revision, first);
      const [mirror] = await readdir(cacheDir);
      await damage(path.join(cacheDir, mirror ?? ''));
      const second = await repo.commitAndPush(
        { 'b.yaml': serviceEntry('b', 'default', 'b.example.com') },
        'b',
      );
      const from = events.count;
      await source.fetchNow('test');
      const next = await events.snapshot(from);
      assert.equal(next.revision, second);
      assert.deepEqual(ids(next), ['ServiceEntry default/a', 'ServiceEntry default/b']);
      assert.deepEqual(
        events.events.slice(from).filter((e) => e.type === 'status' && e.state !== 'synced'),
        [],
        'no fetch failed',
      );
    });
  }

  it('shares one bare repository between sources on the same URL and serializes their fetches', async () => {
    const { repo, first } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
    await repo.git('tag', 'v1');
    await repo.push('v1');
    const cacheDir = path.join(root, `shared-cache-${counter}`);
    const main = start({ url: repo.fileUrl, cacheDir });
    const pinned = start({ url: repo.fileUrl, ref: 'v1', cacheDir });
    await Promise.all([main.events.snapshot(), pinned.events.snapshot()]);
    const second = await repo.commitAndPush({ 'b.yaml': serviceEntry('b', 'default', 'b.example.com') }, 'b');
    await Promise.all(
      Array.from({ length: 5 }, () => [main.source.fetchNow(), pinned.source.fetchNow()]).flat(),
    );
    assert.equal(main.events.lastSnapshot()?.revision, second);
    assert.equal(pinned.events.lastSnapshot()?.revision, first);
    assert.deepEqual(
      [...main.events.events, ...pinned.events.events].filter(
        (e) => e.type === 'status' && e.state !== 'connecting',
      ),
      [],
      'no fetch failed',
    );
    const folders = await readdir(cacheDir);
    assert.equal(folders.length, 1);
    assert.match(folders[0] ?? '', /\.git$/);
  });

  it('recovers from a lock file left in its repository by a git that died mid-fetch', async () => {
    const { repo } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
    const cacheDir = path.join(root, `lock-cache-${counter}`);
    const { source, events } = start({ url: repo.fileUrl, cacheDir });
    await events.snapshot();
    const [mirror = ''] = await readdir(cacheDir);
    await writeFile(path.join(cacheDir, mirror, 'shallow.lock'), '');
    const mark = events.count;
    const second = await repo.commitAndPush({ 'b.yaml': serviceEntry('b', 'default', 'b.example.com') }, 'b');
    await source.fetchNow();
    assert.equal((await events.snapshot(mark)).revision, second);
    assert.equal(source.status().lastError, undefined);
  });

  it('authenticates over HTTP with a token from a file, and never shows the token', async () => {
    const { repo, first } = await repoWith({ 'a.yaml': serviceEntry('a', 'default', 'a.example.com') });
    const token = 'tok-3f9a1c77e2';
    const expected = `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;
    const server = await GitHttpServer.start(root, expected);
    try {
      const tokenFile = path.join(root, `token-${counter}`);
      await writeFile(tokenFile, `${token}\n`);
      const ok = start({ url: server.url(repo.remote), credentials: { tokenFile } });
      assert.equal((await ok.events.snapshot()).revision, first);
      assert.ok(server.authorizations.includes(expected), 'the token was sent');

      await writeFile(tokenFile, 'tok-wrong-0000\n');
      const wrong = start({ url: server.url(repo.remote), credentials: { tokenFile } });
      const failing = await wrong.events.status('failing');
      assert.equal(failing.error?.code, 'PERMISSION_DENIED');
      assert.ok(
        !wrong.events.events.some((e) => e.type === 'snapshot'),
        'what the mirror holds is not served to a source whose credentials were refused',
      );
      const shown = `${failing.error?.describe() ?? ''} ${JSON.stringify(wrong.source.status())}`;
      assert.doesNotMatch(shown, /tok-wrong|dG9r/);

      const inUrl = start({ url: server.url(repo.remote).replace('http://', 'http://alice:hunter22@') });
      const failed = await inUrl.events.status('failing');
      const text = `${failed.error?.describe() ?? ''} ${JSON.stringify(inUrl.source.status())}`;
      assert.doesNotMatch(text, /hunter22/);
      assert.match(text, /http:\/\/\*\*\*:\*\*\*@127\.0\.0\.1/);
    } finally {
      await server.stop();
    }
  });
});

describe('the git webhook', () => {
  const secret = 'hook-secret';
  const body = Buffer.from(JSON.stringify({ ref: 'refs/heads/main', after: 'f'.repeat(40) }));
  const hmac = createHmac('sha256', secret).update(body).digest('hex');

  it('accepts GitHub, Gitea and GitLab signatures and nothing else', () => {
    assert.ok(verifySignature(secret, { body, headers: { 'x-hub-signature-256': `sha256=${hmac}` } }));
    assert.ok(verifySignature(secret, { body, headers: { 'x-gitea-signature': hmac } }));
    assert.ok(verifySignature(secret, { body, headers: { 'x-gitlab-token': secret } }));
    assert.ok(!verifySignature(secret, { body, headers: {} }));
    assert.ok(
      !verifySignature(secret, { body, headers: { 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` } }),
    );
    assert.ok(!verifySignature(secret, { body: Buffer.from('{}'), headers: { 'x-gitea-signature': hmac } }));
    assert.ok(!verifySignature(secret, { body, headers: { 'x-gitlab-token': 'hook-secreT' } }));
  });

  it('matches a pushed ref to a configured branch, tag or full ref', () => {
    assert.ok(refMatches('main', 'refs/heads/main'));
    assert.ok(refMatches('v1', 'refs/tags/v1'));
    assert.ok(refMatches('refs/heads/main', 'refs/heads/main'));
    assert.ok(!refMatches('main', 'refs/heads/maintenance'));
    assert.ok(!refMatches('refs/heads/main', 'refs/tags/main'));
    assert.ok(refMatches('HEAD', 'refs/heads/trunk'), "HEAD is the remote's default branch, whichever it is");
  });

  it('answers 404 for an unknown source, 401 without a valid signature, and skips pushes to other refs and pings', async () => {
    let fetches = 0;
    const source = {
      ref: 'main',
      running: true,
      insecureWebhook: false,
      hasWebhookSecret: true,
      deliveries: new RecentDeliveries(),
      webhookSecret: () => Promise.resolve(secret),
      fetchNow: () => {
        fetches++;
        return Promise.resolve();
      },
    } satisfies WebhookTarget;
    const signed = (b: Buffer): Record<string, string> => ({
      'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(b).digest('hex')}`,
      'x-github-event': 'push',
    });
    assert.equal((await handleGitWebhook(source, { headers: {}, body })).status, 401);
    assert.equal(fetches, 0);
    const other = Buffer.from(JSON.stringify({ ref: 'refs/heads/feature' }));
    assert.equal((await handleGitWebhook(source, { headers: signed(other), body: other })).status, 200);
    const ping = { ...signed(body), 'x-github-event': 'ping' };
    assert.equal((await handleGitWebhook(source, { headers: ping, body })).status, 200);
    assert.equal(fetches, 0);
    assert.equal((await handleGitWebhook(source, { headers: signed(body), body })).status, 202);
    const form = Buffer.from(`payload=${encodeURIComponent(body.toString())}`);
    const formHeaders = { ...signed(form), 'content-type': 'application/x-www-form-urlencoded' };
    assert.equal((await handleGitWebhook(source, { headers: formHeaders, body: form })).status, 202);
    assert.equal(fetches, 2);
  });

  it('refuses unsigned webhooks to a source without a secret unless it says insecure, and fetches once per delivery id', async () => {
    let fetches = 0;
    const target = (insecureWebhook: boolean): WebhookTarget => ({
      ref: 'main',
      running: true,
      insecureWebhook,
      hasWebhookSecret: false,
      deliveries: new RecentDeliveries(),
      webhookSecret: () => Promise.resolve(undefined),
      fetchNow: () => {
        fetches++;
        return Promise.resolve();
      },
    });
    const refused = await handleGitWebhook(target(false), { headers: {}, body });
    assert.equal(refused.status, 401);
    assert.match(JSON.stringify(refused.body), /webhook\.insecure: true/);
    assert.equal(fetches, 0);
    const insecure = target(true);
    const delivery = { 'x-github-event': 'push', 'x-github-delivery': 'd-1' };
    assert.equal((await handleGitWebhook(insecure, { headers: delivery, body })).status, 202);
    const again = await handleGitWebhook(insecure, { headers: delivery, body });
    assert.equal(again.status, 200);
    assert.deepEqual((again.body as { duplicate?: boolean }).duplicate, true);
    const other = { ...delivery, 'x-github-delivery': 'd-2' };
    assert.equal((await handleGitWebhook(insecure, { headers: other, body })).status, 202);
    assert.equal(fetches, 2);
  });

  it('forgets delivery ids after their window and keeps at most its bound', () => {
    let now = 0;
    const recent = new RecentDeliveries(1_000, 3, () => now);
    assert.equal(recent.repeated('a'), false);
    assert.equal(recent.repeated('a'), true);
    now = 1_001;
    assert.equal(recent.repeated('a'), false, 'past the window: a new delivery');
    for (const id of ['b', 'c', 'd']) recent.repeated(id);
    assert.equal(recent.repeated('a'), false, 'the oldest went first once over the bound');
  });
});

describe('git credentials', () => {
  it('runs ssh in batch mode with the configured key and known_hosts, quoted for the shell', async () => {
    const auth = await gitAuthFor('git@git.example.com:mesh/config.git', {
      sshKey: "/keys/it's a key",
      knownHosts: '/keys/known_hosts',
    });
    assert.equal(
      auth.env['GIT_SSH_COMMAND'],
      "ssh '-o' 'BatchMode=yes' '-o' 'StrictHostKeyChecking=yes' '-o' 'IdentitiesOnly=yes' " +
        "'-i' '/keys/it'\\''s a key' '-o' 'UserKnownHostsFile=/keys/known_hosts'",
    );
    assert.equal(auth.env['GIT_CONFIG_COUNT'], undefined);
  });

  it('sends an HTTPS token from the environment as a header scoped to the URL, never in the URL', async () => {
    process.env['MESHMUX_TEST_GIT_TOKEN'] = 'env-token-123';
    try {
      const url = 'https://git.example.com/mesh/config.git';
      const auth = await gitAuthFor(url, { tokenEnv: 'MESHMUX_TEST_GIT_TOKEN', tokenUser: 'oauth2' });
      assert.equal(auth.env['GIT_CONFIG_KEY_0'], `http.${url}.extraHeader`);
      assert.equal(
        auth.env['GIT_CONFIG_VALUE_0'],
        `Authorization: Basic ${Buffer.from('oauth2:env-token-123').toString('base64')}`,
      );
      assert.ok(auth.secrets.includes('env-token-123'));
      await assert.rejects(gitAuthFor(url, { tokenEnv: 'MESHMUX_TEST_GIT_TOKEN_UNSET' }), /is not set/);
    } finally {
      delete process.env['MESHMUX_TEST_GIT_TOKEN'];
    }
  });

  it('masks credentials and query strings in URLs it shows', () => {
    assert.equal(
      redactUrl('https://user:pw@git.example.com/a.git?x=1'),
      'https://***:***@git.example.com/a.git',
    );
    assert.equal(redactUrl('https://ghp_abc@git.example.com/a.git'), 'https://***@git.example.com/a.git');
    assert.equal(redactUrl('ssh://git@git.example.com/a.git'), 'ssh://git@git.example.com/a.git');
    assert.equal(redactUrl('git@git.example.com:a.git'), 'git@git.example.com:a.git');
  });
});
