/**
 * The Kubernetes source against the in-process API server, reached through a kubeconfig file:
 * objects listed then watched, bookkeeping metadata dropped, a CRD not installed is no error, a
 * 410 relists and keeps what still exists, and an unreachable API server leaves the state stale.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { asyncScheduler, type SchedulerAction, type SchedulerLike } from 'rxjs';
import { ContentDigest } from '../../src/core/content-digest.js';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import { KubernetesSource, loadKubernetesClient } from '../../src/upstream/kubernetes/kubernetes-source.js';
import { FakeKubeApiServer, type KubeObject } from '../support/fake-kube-apiserver.js';
import { until, within } from '../support/deadline.js';
import { cartApiServer, cartSource, kubeconfigFor, names, VS, vs } from '../support/kubernetes-cart.js';
import { tempDir } from '../support/meshmux-harness.js';
import { createTestCa } from '../support/test-pki.js';
import { SourceEventRecorder } from '../support/source-event-recorder.js';

const VS_KEY = 'networking.istio.io/VirtualService';

describe('Kubernetes source', () => {
  let api: FakeKubeApiServer;
  let kubeconfig: string;
  let recorder: SourceEventRecorder | undefined;
  before(async () => {
    await loadKubernetesClient();
    api = await FakeKubeApiServer.start([VS]);
    kubeconfig = await kubeconfigFor(api.url);
  });
  after(() => api.stop());
  afterEach(async () => {
    recorder?.close();
    // A closed source leaves no watch behind, even one it was opening when it was closed.
    await until(() => api.openWatches === 0, 5_000, 'every watch of the closed source to end', {
      describe: () => `${api.openWatches} still open`,
    });
  });

  const start = (
    extra: Partial<ConstructorParameters<typeof KubernetesSource>[0]> = {},
  ): SourceEventRecorder => {
    recorder = new SourceEventRecorder(
      new KubernetesSource({
        name: 'east',
        defaultNamespace: 'default',
        kubeconfig,
        context: 'east',
        ...extra,
      }).events$,
    );
    return recorder;
  };

  it('serves the listed objects of the chosen context, with labels and without kubectl bookkeeping', async () => {
    api.put({
      kind: 'VirtualService',
      metadata: {
        name: 'cart',
        namespace: 'shop',
        labels: { app: 'cart' },
        annotations: { team: 'a', 'kubectl.kubernetes.io/last-applied-configuration': '{}' },
        managedFields: [{ manager: 'kubectl' }],
      },
      spec: { hosts: ['cart.example.com'] },
    });
    const events = start();
    const snapshot = (await events.next(
      (e) => e.type === 'snapshot' && names(e).includes('shop/cart'),
    )) as SourceSnapshotEvent;
    const cart = [...snapshot.resources].find((r) => r.name === 'cart')!;
    assert.equal(cart.kind, 'networking.istio.io/VirtualService');
    assert.deepEqual(cart.labels, { app: 'cart' });
    assert.deepEqual(cart.annotations, { team: 'a' });
    assert.equal(cart.createTime.seconds, 0);
    await within(
      (async () => {
        while (api.openWatches === 0) await new Promise((r) => setTimeout(r, 20));
      })(),
      10_000,
      'the watch to open',
    );
    assert.equal(api.openWatches, 1, 'one watch for the one served kind, not one per version');
  });

  it('delivers added, changed and deleted objects from the watch', async () => {
    const events = start();
    await events.snapshot();
    api.put(vs('shop', 'added'));
    await events.next((e) => e.type === 'snapshot' && names(e).includes('shop/added'));
    api.remove('VirtualService', 'shop', 'added');
    await events.next((e) => e.type === 'snapshot' && !names(e).includes('shop/added'), events.count);
  });

  it('names each state by its objects: the revision comes back when an object added is deleted again', async () => {
    const events = start();
    const first = await events.snapshot();
    const digestOf = (e: SourceSnapshotEvent): string => {
      const d = new ContentDigest(false);
      for (const r of e.resources) d.add(r);
      return d.version();
    };
    assert.equal(first.revision, digestOf(first));
    api.put(vs('shop', 'comes-and-goes'));
    const added = (await events.next(
      (e) => e.type === 'snapshot' && names(e).includes('shop/comes-and-goes'),
    )) as SourceSnapshotEvent;
    assert.notEqual(added.revision, first.revision);
    assert.equal(added.revision, digestOf(added));
    api.remove('VirtualService', 'shop', 'comes-and-goes');
    const gone = (await events.next(
      (e) => e.type === 'snapshot' && !names(e).includes('shop/comes-and-goes'),
      events.count,
    )) as SourceSnapshotEvent;
    assert.equal(gone.revision, first.revision);
  });

  it('relists after a 410 and keeps every object that still exists', async () => {
    const events = start();
    await events.snapshot();
    const marker = events.count;
    api.compact('event');
    api.put(vs('shop', 'after-gone'));
    const snapshot = await events.next(
      (e) => e.type === 'snapshot' && names(e).includes('shop/after-gone'),
      marker,
    );
    assert.ok(names(snapshot).includes('shop/cart'));
  });

  it('keeps serving an object updated to a spec it refuses, and reports the error of the new version', async () => {
    const timed = (timeout: string): KubeObject => ({
      kind: 'VirtualService',
      metadata: { name: 'timed', namespace: 'shop' },
      spec: { hosts: ['timed.example.com'], http: [{ timeout, route: [{ destination: { host: 'a' } }] }] },
    });
    api.put(timed('5s'));
    const events = start();
    const good = (await events.next(
      (e) => e.type === 'snapshot' && names(e).includes('shop/timed'),
    )) as SourceSnapshotEvent;
    const served = [...good.resources].find((r) => r.name === 'timed')!;
    const marker = events.count;
    // The CRD's schema (a string) lets it in; meshmux refuses the duration.
    api.put(timed('5 minutes'));
    const broken = (await events.next(
      (e) => e.type === 'snapshot' && e.errors.some((x) => x.describe().includes('shop/timed')),
      marker,
    )) as SourceSnapshotEvent;
    const kept = [...broken.resources].find((r) => r.name === 'timed');
    assert.ok(kept !== undefined, 'the object is still served: leaving it out deletes it from every istiod');
    assert.deepEqual(kept.body, served.body, 'as it was before the refused update');
    // Fixed again: the new version is served and the error is gone.
    api.put(timed('7s'));
    const fixed = (await events.next(
      (e) => e.type === 'snapshot' && e.errors.length === 0,
      events.count,
    )) as SourceSnapshotEvent;
    assert.notDeepEqual([...fixed.resources].find((r) => r.name === 'timed')?.body, served.body);
    api.remove('VirtualService', 'shop', 'timed');
  });

  /** An object carrying a label of one test's own, which that test's source selects. */
  const labelled = (test: string, name: string): KubeObject => ({
    ...vs('shop', name),
    metadata: { name, namespace: 'shop', labels: { test } },
  });
  /** Lists and watches of the objects labelled `test` since request `from` (in `namespace` alone, if given). */
  const asked = (test: string, from = 0, namespace?: string): { lists: number; watches: number } => {
    const mine = api.requests
      .slice(from)
      .filter(
        (r) =>
          r.includes('/virtualservices?') &&
          r.includes(`test%3D${test}`) &&
          (namespace === undefined || r.includes(`/namespaces/${namespace}/`)),
      );
    const watches = mine.filter((r) => r.includes('watch=true')).length;
    return { lists: mine.length - watches, watches };
  };

  it('serves an object created in a kind its first list found empty, though the list that brings forward fails once', async () => {
    const events = start({ labelSelector: 'test=recheck' });
    const first = await events.snapshot();
    assert.deepEqual(names(first), []);
    await until(() => asked('recheck').watches === 1 && api.openWatches >= 1, 10_000, 'the watch to open');
    const marker = events.count;
    // The API server has a bad moment: its lists fail while the object is created.
    api.fault('VirtualService', 'list', 500);
    try {
      api.put(labelled('recheck', 'created'));
      await new Promise((r) => setTimeout(r, 3_000));
    } finally {
      api.fault('VirtualService', 'list', undefined);
    }
    await events.next((e) => e.type === 'snapshot' && names(e).includes('shop/created'), marker, 30_000);
    api.remove('VirtualService', 'shop', 'created');
  });

  it('lists a namespace found empty at the start again, without opening its watch again', async () => {
    const from = api.requests.length;
    const events = start({ labelSelector: 'test=empty-start', namespaces: ['team-c'] });
    await events.snapshot();
    // Past its first two lists again (2 s and 4 s after, each within ±25%).
    await new Promise((r) => setTimeout(r, 8_000));
    const { lists, watches } = asked('empty-start', from, 'team-c');
    assert.ok(lists >= 3, `${lists} lists`);
    assert.equal(watches, 1, 'one watch, left open');
    events.close();
  });

  it('names no kind as listed on the account of a namespace listed again and still empty', async () => {
    for (let i = 0; i < 3; i++) api.put(labelled('scoped', `scoped-${i}`));
    const from = api.requests.length;
    const events = start({ labelSelector: 'test=scoped', namespaces: ['shop', 'team-d'] });
    await events.next((e) => e.type === 'snapshot' && names(e).length === 3);
    // team-d, found empty at the start, listed again (about 2 s later); nothing published.
    await until(() => asked('scoped', from, 'team-d').lists >= 2, 10_000, 'team-d listed again');
    const marker = events.count;
    // Then the three deleted on shop's watch (`kubectl delete --all`): an edit, not a listing.
    for (let i = 0; i < 3; i++) api.remove('VirtualService', 'shop', `scoped-${i}`);
    const emptied = (await events.next(
      (e) => e.type === 'snapshot' && names(e).length === 0,
      marker,
    )) as SourceSnapshotEvent;
    assert.ok(
      !(emptied.listed?.has('networking.istio.io/VirtualService') ?? false),
      'the deletions are not a listing',
    );
    events.close();
  });

  it('asks the API server nothing more once closed, even during its first lists', async () => {
    const from = api.requests.length;
    const events = start({ labelSelector: 'test=closed', namespaces: ['shop', 'team-a', 'team-b'] });
    await new Promise((r) => setTimeout(r, 30));
    events.close();
    await new Promise((r) => setTimeout(r, 1_000));
    const settled = api.requests.length;
    // Past the first lists again of the namespaces found empty (2 s, then 4 s).
    await new Promise((r) => setTimeout(r, 5_000));
    assert.deepEqual(api.requests.slice(settled), [], `asked after it was closed (${settled - from} before)`);
  });

  it('opens a cut watch again and leaves the others open, never tearing its own watches down in a loop', async () => {
    api.put(labelled('cut', 'cut-1'));
    // One watch per namespace: the one cut and one that stays up.
    const events = start({ labelSelector: 'test=cut', namespaces: ['shop', 'team-a'] });
    await events.snapshot();
    await until(() => asked('cut').watches === 2 && api.openWatches === 2, 10_000, 'the watches to open');
    const from = api.requests.length;
    const marker = events.count;
    assert.equal(api.cutWatches('VirtualService', 'shop'), 1);
    await until(() => asked('cut', from).watches >= 1 && api.openWatches === 2, 10_000, 'a new watch');
    // Nothing to await for a loop that does not happen: give it the time of several rounds
    // (before, each round aborted the watches of the last, after the shortest backoff, 0.25–0.75 s).
    await new Promise((r) => setTimeout(r, 3_000));
    // The namespace listed empty at the start is listed again on a timer of its own (a restarted
    // source cannot tell an empty kind from one its API server lags on): the cut one is counted.
    const { watches, lists } = asked('cut', from, 'shop');
    assert.equal(lists, 0, 'nothing listed again: every watch resumes from its resourceVersion');
    assert.ok(watches <= 2, `${watches} watches opened since the cut`);
    const troubles = events.events.slice(marker).filter((e) => e.type === 'status' && e.state !== 'synced');
    assert.ok(troubles.length <= 1, `one failure reported, not one per round: ${troubles.length}`);
    api.put(labelled('cut', 'cut-2'));
    await events.next((e) => e.type === 'snapshot' && names(e).includes('shop/cut-2'), marker);
    api.remove('VirtualService', 'shop', 'cut-1');
    api.remove('VirtualService', 'shop', 'cut-2');
  });

  it('backs off, then relists, when the API server ends every watch at once; later changes arrive', async () => {
    const events = start({ labelSelector: 'test=closing' });
    await events.snapshot();
    await until(() => asked('closing').watches === 1 && api.openWatches === 1, 10_000, 'the watch to open');
    const from = api.requests.length;
    const marker = events.count;
    api.fault('VirtualService', 'watch', 'close');
    try {
      api.cutWatches('VirtualService');
      await until(
        () => asked('closing', from).lists >= 1,
        20_000,
        'a relist after watches that end at once',
        {
          describe: () => JSON.stringify(asked('closing', from)),
        },
      );
      // Before: each ended watch was opened again at once, thousands per second.
      const { watches } = asked('closing', from);
      assert.ok(watches <= 6, `${watches} watches before the relist`);
    } finally {
      api.fault('VirtualService', 'watch', undefined);
    }
    api.put(labelled('closing', 'after-closes'));
    await events.next((e) => e.type === 'snapshot' && names(e).includes('shop/after-closes'), marker, 30_000);
    api.remove('VirtualService', 'shop', 'after-closes');
  });

  it('relists after a 410 with backoff when every watch is answered 410', async () => {
    // One object, so that no list of a kind found empty (on a timer of its own) is counted here.
    api.put(labelled('gone', 'held'));
    const events = start({ labelSelector: 'test=gone' });
    await events.snapshot();
    await until(() => asked('gone').watches === 1 && api.openWatches === 1, 10_000, 'the watch to open');
    const from = api.requests.length;
    api.fault('VirtualService', 'watch', 'gone');
    try {
      api.cutWatches('VirtualService');
      await until(() => asked('gone', from).lists >= 1, 20_000, 'the first relist', { intervalMs: 5 });
      const first = performance.now();
      await until(() => asked('gone', from).lists >= 3, 20_000, 'the third relist', { intervalMs: 5 });
      const took = performance.now() - first;
      // Backoff from the second relist on waits at least 0.56 s, then 0.84 s (jitter included);
      // before, each 410 relisted at once.
      assert.ok(took >= 1_000, `two more relists after ${Math.round(took)} ms`);
    } finally {
      api.fault('VirtualService', 'watch', undefined);
      api.remove('VirtualService', 'shop', 'held');
    }
  });

  it('gives up a list whose bytes trickle in at its deadline, then lists again', async () => {
    api.put(labelled('trickle', 'slow'));
    api.fault('VirtualService', 'list', 'trickle');
    let events: SourceEventRecorder;
    try {
      events = start({ labelSelector: 'test=trickle', requestDeadlineMs: 1_000 });
      // Before, each byte started the timeout over: the list held the source for ever.
      const failing = await events.status('failing', 0, 15_000);
      assert.match(failing.error?.message ?? '', /virtualservices.*no complete answer within 1 s/);
    } finally {
      api.fault('VirtualService', 'list', undefined);
    }
    const snapshot = await events.snapshot(0, 30_000);
    assert.deepEqual(names(snapshot), ['shop/slow']);
    api.remove('VirtualService', 'shop', 'slow');
  });

  it('reads only the namespaces asked for', async () => {
    api.put(vs('team-a', 'home'));
    const events = start({ namespaces: ['team-*'] });
    const snapshot = await events.snapshot();
    assert.deepEqual(names(snapshot), ['team-a/home']);
  });

  it('lists and watches plain namespace names one by one, never the whole cluster (a Role per namespace suffices)', async () => {
    // A label of this test's own tells its requests from those of sources closed before it.
    const labelled = (namespace: string, name: string): KubeObject => ({
      ...vs(namespace, name),
      metadata: { name, namespace, labels: { test: 'one-by-one' } },
    });
    api.put(labelled('team-a', 'home'));
    api.put(labelled('team-b', 'away'));
    api.put(labelled('shop', 'shop-home'));
    const events = start({ namespaces: ['team-a', 'shop'], labelSelector: 'test=one-by-one' });
    const snapshot = await events.snapshot();
    assert.deepEqual(names(snapshot), ['shop/shop-home', 'team-a/home']);
    const reads = api.requests.filter((r) => r.includes('one-by-one'));
    assert.ok(reads.some((r) => r.includes('/namespaces/team-a/virtualservices')));
    assert.ok(reads.some((r) => r.includes('/namespaces/shop/virtualservices')));
    assert.deepEqual(
      reads.filter((r) => !r.includes('/namespaces/')),
      [],
      'no cluster-wide list or watch',
    );
    api.put(labelled('team-a', 'later'));
    api.put(labelled('team-b', 'ignored'));
    const next = await events.next((e) => e.type === 'snapshot' && names(e).includes('team-a/later'));
    assert.ok(!names(next).includes('team-b/ignored'));
  });

  it('lists in pages, and starts over when the continue token expires between pages', async () => {
    const labels = { test: 'paged' };
    for (let i = 0; i < 1_200; i++) {
      api.put({ ...vs('paged', `p${i}`), metadata: { name: `p${i}`, namespace: 'paged', labels } });
    }
    api.expireNextContinue();
    const events = start({ labelSelector: 'test=paged' });
    const snapshot = await events.snapshot();
    assert.equal(names(snapshot).length, 1_200);
    const lists = api.requests.filter(
      (r) => r.includes('/virtualservices?') && r.includes('test%3Dpaged') && !r.includes('watch='),
    );
    assert.equal(lists.filter((r) => !r.includes('continue=')).length, 2, 'started over once');
    assert.ok(
      lists.every((r) => r.includes('limit=500')),
      lists.join('\n'),
    );
    for (let i = 0; i < 1_200; i++) api.remove('VirtualService', 'paged', `p${i}`);
  });

  it('publishes its first state once every kind was looked for, however soon the kinds it does not serve are looked for again', async () => {
    // The cluster serves 1 kind of 15. The first three looks again at the other 14 (1, 2 and 4 s,
    // ±25 %) are due at once: they come while the first pass still has kinds to reach.
    const objects = 600;
    for (let i = 0; i < objects; i++) api.put(vs('counted', `c${i}`));
    let looks = 0;
    // The source's clock schedules callbacks with a delay and no state.
    const scheduler = {
      now: () => asyncScheduler.now(),
      schedule: (work: (this: SchedulerAction<unknown>) => void, delay = 0) => {
        const lookAgain = delay >= 750 && delay <= 5_000;
        if (lookAgain) looks++;
        return asyncScheduler.schedule(work, lookAgain ? 0 : delay);
      },
    } as SchedulerLike;
    const events = start({ scheduler });
    const snapshot = await events.snapshot();
    assert.deepEqual([...(snapshot.kinds ?? [])], [VS_KEY]);
    assert.equal(names(snapshot).filter((n) => n.startsWith('counted/')).length, objects);
    assert.ok(looks >= 14, `${looks} looks again`);
    for (let i = 0; i < objects; i++) api.remove('VirtualService', 'counted', `c${i}`);
  });

  it('treats a kind whose CRD is not installed as not served, and is synced without it', async () => {
    const events = start({ kinds: ['VirtualService', 'Sidecar'] });
    const snapshot = await events.snapshot();
    assert.equal(snapshot.errors.length, 0);
  });

  it('is stale with its last state while the API server is down', async () => {
    const events = start();
    await events.snapshot();
    const marker = events.count;
    await api.stop();
    await events.next((e) => e.type === 'status' && e.state === 'stale', marker, 30_000);
    assert.equal(
      events.events.slice(marker).filter((e) => e.type === 'snapshot').length,
      0,
      'no state withdrawn while down',
    );
    await api.restart();
    await events.next((e) => e.type === 'status' && e.state === 'synced', marker, 60_000);
  });
});

describe('Kubernetes source, one kind whose watch is never answered', () => {
  let api: FakeKubeApiServer;
  let recorder: SourceEventRecorder | undefined;
  before(async () => {
    api = await cartApiServer();
    // No response headers, ever: the client library has no timeout of its own for them.
    api.fault('DestinationRule', 'watch', 'hang');
  });
  after(async () => {
    recorder?.close();
    await api.stop();
  });

  it('watches the other kinds all the same, and reports the silent watch at its deadline', async () => {
    const events = await cartSource(api, { requestDeadlineMs: 1_000 });
    recorder = events;
    const first = await events.snapshot();
    assert.deepEqual(names(first), ['shop/cart', 'shop/cart']);
    const stale = await events.status('stale', 0, 15_000);
    assert.match(stale.error?.message ?? '', /destinationrules.*no answer within 1 s/);
    // Before, the VirtualService watch waited behind the DestinationRule one, never opened, and
    // no later VirtualService change arrived.
    api.put(vs('shop', 'later'));
    await events.next((e) => e.type === 'snapshot' && names(e).includes('shop/later'), 0, 15_000);
  });
});

describe('Kubernetes source, one kind its identity may not read', () => {
  let api: FakeKubeApiServer;
  let recorder: SourceEventRecorder | undefined;
  before(async () => {
    api = await cartApiServer();
    // As when the Role lacks destinationrules.
    api.fault('DestinationRule', 'list', 403);
  });
  after(async () => {
    recorder?.close();
    await api.stop();
  });

  it('serves the other kinds, leaves the refused one out of its state, and reads it once allowed', async () => {
    const events = await cartSource(api);
    recorder = events;
    // Before, a 403 on one kind failed the whole pass, and nothing of the cluster was served.
    const partial = await events.snapshot(0, 15_000);
    assert.deepEqual(names(partial), ['shop/cart']);
    assert.deepEqual(
      [...partial.resources].map((r) => r.kind),
      ['networking.istio.io/VirtualService'],
    );
    const kinds = [...(partial.kinds ?? [])];
    assert.ok(kinds.some((k) => k.endsWith('VirtualService')));
    assert.ok(!kinds.some((k) => k.endsWith('DestinationRule')), 'a kind never read is not served empty');
    const failing = await events.status('failing');
    assert.match(failing.error?.message ?? '', /destinationrules: HTTP 403/);
    const marker = events.count;
    api.fault('DestinationRule', 'list', undefined);
    const whole = await events.next(
      (e) => e.type === 'snapshot' && [...(e.kinds ?? [])].some((k) => k.endsWith('DestinationRule')),
      marker,
      30_000,
    );
    // A complete state: the source is synced again.
    assert.deepEqual(names(whole), ['shop/cart', 'shop/cart']);
  });
});

describe('Kubernetes source over TLS', () => {
  let api: FakeKubeApiServer;
  let pki: { ca: string; server: { cert: string; key: string }; client: { cert: string; key: string } };
  let otherCa: string;
  let dir: string;
  let recorder: SourceEventRecorder | undefined;
  before(async () => {
    await loadKubernetesClient();
    ({ dir } = await tempDir('kube-tls'));
    const ca = await createTestCa(dir, 'cluster CA');
    pki = {
      ca: ca.caCert,
      server: await ca.issue('apiserver', 'DNS:localhost,IP:127.0.0.1'),
      client: await ca.issue('meshmux-reader', 'DNS:meshmux'),
    };
    otherCa = (await createTestCa(dir, 'unrelated CA')).caCert;
    api = await FakeKubeApiServer.start([VS], 0, {
      tls: pki.server,
      clientCa: pki.ca,
      token: 'reader-token',
    });
    api.put(vs('shop', 'tls-cart'));
  });
  after(() => api.stop());
  afterEach(() => recorder?.close());

  /** A kubeconfig trusting `ca`, presenting the client certificate and, when given, the token. */
  async function kubeconfig(name: string, ca: string, token?: string): Promise<string> {
    const file = path.join(dir, `${name}.kubeconfig`);
    await writeFile(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        `  - name: east`,
        `    cluster: { server: "${api.url}", certificate-authority: ${JSON.stringify(ca)} }`,
        'users:',
        '  - name: reader',
        '    user:',
        `      client-certificate: ${JSON.stringify(pki.client.cert)}`,
        `      client-key: ${JSON.stringify(pki.client.key)}`,
        ...(token === undefined ? [] : [`      token: ${token}`]),
        'contexts:',
        '  - name: east',
        '    context: { cluster: east, user: reader }',
        'current-context: east',
        '',
      ].join('\n'),
    );
    return file;
  }

  const start = (kubeconfigFile: string): SourceEventRecorder => {
    recorder = new SourceEventRecorder(
      new KubernetesSource({ name: 'east', defaultNamespace: 'default', kubeconfig: kubeconfigFile }).events$,
    );
    return recorder;
  };

  it('lists and watches with the private CA, the client certificate and the token of the kubeconfig', async () => {
    const events = start(await kubeconfig('good', pki.ca, 'reader-token'));
    const snapshot = await events.snapshot();
    assert.deepEqual(names(snapshot), ['shop/tls-cart']);
    api.put(vs('shop', 'tls-added'));
    await events.next((e) => e.type === 'snapshot' && names(e).includes('shop/tls-added'));
  });

  it('refuses an API server its CA did not sign, naming the server and the TLS failure', async () => {
    const events = start(await kubeconfig('wrong-ca', otherCa, 'reader-token'));
    const failed = await events.next((e) => e.type === 'status' && e.state === 'failing');
    const message = failed.type === 'status' ? (failed.error?.message ?? '') : '';
    assert.match(message, new RegExp(api.url.replace(/[.:/]/g, '\\$&')));
    assert.match(message, /certificate/i);
    assert.equal(events.events.filter((e) => e.type === 'snapshot').length, 0);
  });

  it('reports a refused token as the API server said it', async () => {
    const events = start(await kubeconfig('no-token', pki.ca));
    const failed = await events.next((e) => e.type === 'status' && e.state === 'failing');
    const message = failed.type === 'status' ? (failed.error?.message ?? '') : '';
    assert.match(message, /HTTP 401/);
  });
});
