/**
 * The Kubernetes source's timers for a kind found empty, against the in-process API server: lists
 * again on a timer and on watch events, failed and refused ones tried again, on the wall clock and
 * on source clocks that run faster, slower or set back.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { Subscription, type SchedulerAction, type SchedulerLike } from 'rxjs';
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

/** A scheduler for a source's time, which a test may step (as NTP or a resumed VM steps a clock). */
interface SteppedScheduler extends SchedulerLike {
  /** Added to the time now() reads; timers already set keep their delays. */
  offsetMs: number;
}

/**
 * A scheduler whose time runs `factor` times as fast as the wall clock: a source's timers pass in
 * a fraction of their time (or a multiple, below 1), while its requests take the time they take.
 */
function scaledScheduler(factor: number): SteppedScheduler {
  const start = Date.now();
  const scheduler: SteppedScheduler = {
    offsetMs: 0,
    now: () => start + (Date.now() - start) * factor + scheduler.offsetMs,
    schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T): Subscription {
      const subscription = new Subscription();
      const timer = setTimeout(() => {
        if (!subscription.closed) work.call(subscription as SchedulerAction<T>, state);
      }, delay / factor);
      timer.unref();
      subscription.add(() => clearTimeout(timer));
      return subscription;
    },
  };
  return scheduler;
}

describe('Kubernetes source, the timers of a kind found empty', () => {
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

  it('tries a failed list again past the kind’s two minutes of lists again, serving what its watch told', async () => {
    // Source time runs 20 times as fast: the two minutes a kind found empty at the start is
    // listed again on its timer last 6 s.
    const events = await start(['shop', 'team-x'], scaledScheduler(20));
    await events.snapshot();
    await until(() => api.openWatches === 4, 10_000, 'the watches to open');
    await new Promise((r) => setTimeout(r, 7_000));
    // Past those two minutes, the API server fails lists; a DestinationRule created in team-x:
    // its watch event asks for a list, which fails.
    api.fault('DestinationRule', 'list', 500);
    const from = api.requests.length;
    const marker = events.count;
    putDestinationRule(api, 'team-x', 'later');
    await until(
      () =>
        api.requests
          .slice(from)
          .some((r) => r.includes('/namespaces/team-x/destinationrules?') && !r.includes('watch=')),
      10_000,
      'the list the watch event asked for',
    );
    await new Promise((r) => setTimeout(r, 500));
    api.fault('DestinationRule', 'list', undefined);
    // Tried again at most a minute of source time later (3 s here).
    const served = await events.next(
      (e) => e.type === 'snapshot' && names(e).includes('team-x/later'),
      marker,
      10_000,
    );
    const between = events.events.slice(marker, events.events.indexOf(served));
    assert.ok(
      between.some((e) => e.type === 'status' && e.state === 'stale'),
      'the source said stale while the list failed',
    );
  });

  it('lists a kind found empty at once on its watch event, when its last list is 2 s old', async () => {
    // Source time runs 5 times as slow: the kind's lists again, 2 s and some 4 s after its first
    // list, come some 10 s and 20 s later.
    const events = await start(['shop', 'team-x'], scaledScheduler(0.2));
    await events.snapshot();
    const from = api.requests.length;
    const listsOfTeamX = (): string[] =>
      api.requests
        .slice(from)
        .filter((r) => r.includes('/namespaces/team-x/destinationrules?') && !r.includes('watch='));
    await until(() => listsOfTeamX().length === 1, 20_000, 'the first list again of team-x');
    // 2.2 s of source time on: the next list again is 0.8–2.8 s of source time away.
    await new Promise((r) => setTimeout(r, 11_000));
    const marker = events.count;
    putDestinationRule(api, 'team-x', 'first');
    // Listed on the event: before, at the list again's time or 2 s of source time on (4–14 s here).
    await events.next((e) => e.type === 'snapshot' && names(e).includes('team-x/first'), marker, 2_500);
    assert.equal(listsOfTeamX().length, 2);
  });

  it('lists a kind found empty within 2 s of a watch event that came while a list was under way', async () => {
    const events = await start(['shop', 'team-x']);
    await events.snapshot();
    // The first two lists again of team-x, some 2 s and 6 s after its first list.
    let from = api.requests.length;
    await until(() => listsOf(api, 'team-x', from) >= 2, 20_000, 'two lists again');
    // The third, some 8 s on, answers 1.5 s late from what the server held when asked; the next
    // is due 12–20 s after it.
    api.lagNextList('DestinationRule', 1_500);
    from = api.requests.length;
    await until(() => listsOf(api, 'team-x', from) === 1, 20_000, 'the third list again');
    await new Promise((r) => setTimeout(r, 300));
    const marker = events.count;
    putDestinationRule(api, 'team-x', 'first');
    // Listed 2 s after that list began; before, its answer put the list off to the next one.
    await events.next((e) => e.type === 'snapshot' && names(e).includes('team-x/first'), marker, 6_000);
  });

  it('lists a kind found empty on its watch event after the clock is set back an hour', async () => {
    const scheduler = scaledScheduler(1);
    const events = await start(['shop', 'team-x'], scheduler);
    await events.snapshot();
    const from = api.requests.length;
    await until(() => listsOf(api, 'team-x', from) >= 1, 20_000, 'the first list again');
    scheduler.offsetMs = -3_600_000;
    await new Promise((r) => setTimeout(r, 500));
    const marker = events.count;
    putDestinationRule(api, 'team-x', 'first');
    // Before, the list waited as long as the clock went back.
    await events.next((e) => e.type === 'snapshot' && names(e).includes('team-x/first'), marker, 15_000);
  });

  it('says the source is well again once a list again refused once succeeds, its watch ended meanwhile', async () => {
    const events = await start(['shop', 'team-x']);
    await events.snapshot();
    await until(() => api.openWatches === 4, 10_000, 'the watches to open');
    const from = api.requests.length;
    api.fault('DestinationRule', 'list', 403);
    await until(
      () => api.requests.slice(from).some((r) => r.includes('/namespaces/team-x/destinationrules?')),
      10_000,
      'the DestinationRules of team-x listed again',
    );
    await events.status('stale', 0, 5_000);
    api.fault('DestinationRule', 'list', undefined);
    // The watch ends as its timeout passes on the server, and opens again.
    assert.equal(api.endWatches('DestinationRule', 'team-x'), 1);
    const marker = events.count;
    await new Promise((r) => setTimeout(r, 12_000));
    api.put(vs('shop', 'later'));
    await events.next((e) => e.type === 'snapshot' && names(e).includes('shop/later'), marker, 15_000);
    await new Promise((r) => setTimeout(r, 500));
    const last = events.events.at(-1);
    assert.ok(
      !(last?.type === 'status' && last.state !== 'synced'),
      `the source still says ${last?.type === 'status' ? `${last.state}: ${last.error?.message ?? ''}` : ''}`,
    );
  });
});
