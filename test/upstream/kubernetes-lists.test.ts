/**
 * The Kubernetes source's lists of a kind found empty, against the in-process API server: listed
 * again on a timer and on its watch events, answers that come out of order or late, refusals and
 * failures meanwhile, on the wall clock and on source clocks that run faster, slower or set back.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { SchedulerLike } from 'rxjs';
import type { SourceEvent } from '../../src/core/source-event.js';
import type { FakeKubeApiServer } from '../support/fake-kube-apiserver.js';
import { until } from '../support/deadline.js';
import {
  cartApiServer,
  cartSource,
  listsOf,
  names,
  putDestinationRule,
  vs,
} from '../support/kubernetes-cart.js';
import type { SourceEventRecorder } from '../support/source-event-recorder.js';

/** Waits for the first state after event `from` that serves `key` (`namespace/name`); its index. */
async function firstServing(events: SourceEventRecorder, key: string, from: number): Promise<number> {
  const found = await events.next((e) => e.type === 'snapshot' && names(e).includes(key), from, 10_000);
  return events.events.indexOf(found);
}

/** The states after event `at` that do not serve `key`. */
function statesWithout(events: SourceEventRecorder, key: string, at: number): SourceEvent[] {
  return events.events.slice(at + 1).filter((e) => e.type === 'snapshot' && !names(e).includes(key));
}

/**
 * Has the next DestinationRule list answer `ms` late, from what the server held when asked, and
 * waits for it to be asked: the list again of team-x, where the kind was found empty.
 */
async function lagListAgainOfTeamX(api: FakeKubeApiServer, ms: number): Promise<void> {
  api.lagNextList('DestinationRule', ms);
  const from = api.requests.length;
  await until(() => listsOf(api, 'team-x', from) === 1, 10_000, 'the list again of team-x');
}

describe('Kubernetes source, a kind found empty while the first pass is slow or refused later', () => {
  let api: FakeKubeApiServer;
  let recorder: SourceEventRecorder | undefined;
  const start = async (namespaces: string[], scheduler?: SchedulerLike): Promise<SourceEventRecorder> =>
    (recorder = await cartSource(api, { namespaces, scheduler }));
  beforeEach(async () => {
    api = await cartApiServer();
  });
  afterEach(async () => {
    recorder?.close();
    await api.stop();
  });

  it('names a kind its first list found empty as listed, however long the other kinds take', async () => {
    // team-x has no DestinationRule; its VirtualService list answers 7 s late, past the lists again
    // of the empty kind (about 2 s and 6 s after).
    api.put(vs('team-x', 'slow'));
    api.slowLists('VirtualService', 7_000);
    const events = await start(['team-x']);
    const first = await events.snapshot(0, 20_000);
    assert.deepEqual(names(first), ['team-x/slow']);
    assert.ok(
      first.listed?.has('networking.istio.io/DestinationRule'),
      `listed: ${[...(first.listed ?? [])].join()}`,
    );
  });

  it('drops a list again that answers after a later one, never serving the object it lacks as deleted', async () => {
    // team-x has no DestinationRule: the kind is listed again about 2 s after the first list.
    const events = await start(['shop', 'team-x']);
    await events.snapshot();
    await until(() => api.openWatches === 4, 10_000, 'the watches to open');
    // That list again reads the server as it is when asked (nothing in team-x) and answers 5 s
    // late, as from an API server under load.
    await lagListAgainOfTeamX(api, 5_000);
    // Created after that list was asked: its watch event brings a second list 2 s later, which
    // answers at once and finds it.
    const marker = events.count;
    putDestinationRule(api, 'team-x', 'late');
    const servedAt = await firstServing(events, 'team-x/late', marker);
    // Past the first list's answer, and a watch opened from its resourceVersion.
    await new Promise((r) => setTimeout(r, 6_000));
    const lost = statesWithout(events, 'team-x/late', servedAt).length;
    assert.equal(lost, 0, `${lost} later states served the DestinationRule as deleted`);
  });

  it('takes no failure of a list overtaken by a later one as the source’s', async () => {
    const events = await cartSource(api, { namespaces: ['shop', 'team-x'], requestDeadlineMs: 4_000 });
    recorder = events;
    await events.snapshot();
    await until(() => api.openWatches === 4, 10_000, 'the watches to open');
    // The list again of team-x answers 8 s late, past its 4 s deadline.
    await lagListAgainOfTeamX(api, 8_000);
    putDestinationRule(api, 'team-x', 'late');
    const servedAt = await firstServing(events, 'team-x/late', 0);
    // Past the first list's deadline.
    await new Promise((r) => setTimeout(r, 4_000));
    const said = events.events.slice(servedAt + 1).filter((e) => e.type === 'status' && e.state === 'stale');
    assert.equal(said.length, 0, `the source said stale for a list overtaken: ${JSON.stringify(said)}`);
  });

  it('drops a list answered after a watch opened without one, never serving what the watch told as deleted', async () => {
    const events = await start(['shop']);
    await events.snapshot();
    await until(() => api.openWatches === 2, 10_000, 'the watches to open');
    // The DestinationRule watch ends at once three times in a row: the kind is listed again, and
    // that list answers 10 s late.
    api.fault('DestinationRule', 'watch', 'close');
    api.lagNextList('DestinationRule', 10_000);
    const from = api.requests.length;
    api.endWatches('DestinationRule', 'shop');
    await until(() => listsOf(api, 'shop', from) === 1, 15_000, 'the list after the watch’s quick ends');
    const askedAt = performance.now();
    api.fault('DestinationRule', 'watch', undefined);
    // The VirtualService watch is cut: the source's next pass opens the DestinationRule watch
    // again from where it was, with no list (the kind was listed and has objects).
    const cutAt = api.requests.length;
    api.cutWatches('VirtualService');
    await until(
      () =>
        api.requests
          .slice(cutAt)
          .some((r) => r.includes('/namespaces/shop/destinationrules?') && r.includes('watch=')),
      8_000,
      'the DestinationRule watch opened again',
    );
    await new Promise((r) => setTimeout(r, 300));
    const marker = events.count;
    putDestinationRule(api, 'shop', 'late');
    const servedAt = await firstServing(events, 'shop/late', marker);
    await until(() => performance.now() - askedAt > 12_000, 20_000, 'past the late answer');
    const lost = statesWithout(events, 'shop/late', servedAt).length;
    assert.equal(lost, 0, `${lost} later states served shop/late as deleted`);
  });

  it('says the source is well again once a list again of a scope refused meanwhile succeeds', async () => {
    const events = await start(['shop', 'team-x']);
    await events.snapshot();
    await until(() => api.openWatches === 4, 10_000, 'the watches to open');
    await lagListAgainOfTeamX(api, 6_000);
    const askedAt = performance.now();
    // The Role loses DestinationRules meanwhile: the team-x watch ends and is refused.
    api.fault('DestinationRule', 'list', 403);
    api.fault('DestinationRule', 'watch', 403);
    api.endWatches('DestinationRule', 'team-x');
    await events.status('stale', 0, 5_000);
    await until(() => performance.now() - askedAt > 5_000, 10_000, 'near the late answer');
    api.fault('DestinationRule', 'watch', undefined);
    await until(() => performance.now() - askedAt > 6_500, 10_000, 'past the late answer');
    api.fault('DestinationRule', 'list', undefined);
    await new Promise((r) => setTimeout(r, 15_000));
    const last = events.events.filter((e) => e.type === 'status').at(-1);
    assert.ok(
      !(last?.type === 'status' && last.state !== 'synced'),
      `the source still says ${last?.type === 'status' ? `${last.state}: ${last.error?.message ?? ''}` : ''}`,
    );
  });

  it('retries a kind refused while listed again on its own, never opening the others’ watches again', async () => {
    // team-x has nothing: both kinds found empty there and listed again.
    const events = await start(['shop', 'team-x']);
    await events.snapshot();
    await until(() => api.openWatches === 4, 10_000, 'the watches to open');
    const from = api.requests.length;
    api.fault('DestinationRule', 'list', 403);
    api.fault('VirtualService', 'list', 403);
    await new Promise((r) => setTimeout(r, 8_000));
    const watchesOfShop = api.requests
      .slice(from)
      .filter((r) => r.includes('/namespaces/shop/') && r.includes('watch=')).length;
    assert.equal(watchesOfShop, 0, 'the watches of shop stay open');
    await events.status('stale', 0, 5_000);
    // Allowed again: a VirtualService created in team-x is listed and served (a complete state:
    // the source is synced again).
    api.fault('DestinationRule', 'list', undefined);
    api.fault('VirtualService', 'list', undefined);
    const marker = events.count;
    api.put(vs('team-x', 'later'));
    await events.next((e) => e.type === 'snapshot' && names(e).includes('team-x/later'), marker, 70_000);
  });
});
