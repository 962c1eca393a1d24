import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { VirtualTimeScheduler } from 'rxjs';
import type { ClientView } from '../../src/downstream/client-view.js';
import { ViewRegistry } from '../../src/downstream/view-registry.js';

const view = (id: string): ClientView => ({ id, admitsAll: false, admits: () => true });

function rig(maxViews = 3, graceMs = 30_000) {
  const scheduler = new VirtualTimeScheduler();
  const freed: string[] = [];
  const registry = new ViewRegistry({ maxViews, graceMs, scheduler, onFree: (id) => freed.push(id) });
  const runTo = (at: number): void => {
    scheduler.maxFrames = at;
    scheduler.flush();
    scheduler.frame = at;
  };
  return { registry, freed, runTo };
}

describe('ViewRegistry', () => {
  it('frees a view once the grace period after its last client ends', () => {
    const { registry, freed, runTo } = rig();
    const v = view('rev-a');
    registry.acquire(v);
    registry.acquire(view('rev-a'));
    registry.release(v);
    runTo(60_000);
    assert.deepEqual(freed, [], 'one client is still there');
    registry.release(v);
    runTo(89_999);
    assert.deepEqual(freed, []);
    assert.equal(registry.idleViews, 1);
    runTo(90_000);
    assert.deepEqual(freed, ['rev-a']);
    assert.equal(registry.size, 0);
  });

  it('keeps a view whose client comes back within the grace period, and shares one object per id', () => {
    const { registry, freed, runTo } = rig();
    const first = view('rev-a');
    assert.equal(registry.acquire(first), first);
    registry.release(first);
    runTo(10_000);
    assert.equal(registry.acquire(view('rev-a')), first, 'the reconnecting client gets the kept view');
    runTo(100_000);
    assert.deepEqual(freed, []);
  });

  it('shares a refreshed view object with clients that come later, keeping the count of its clients', () => {
    const { registry, freed, runTo } = rig();
    const first = view('rev-a');
    registry.acquire(first);
    const renewed = view('rev-a');
    registry.refresh(renewed);
    registry.refresh(view('rev-b'));
    assert.equal(registry.size, 1, 'refreshing an id nobody holds adds nothing');
    assert.equal(registry.acquire(view('rev-a')), renewed);
    registry.release(first);
    runTo(60_000);
    assert.deepEqual(freed, [], 'the second client holds the view still');
  });

  it('at the cap, replaces the view idle the longest, and refuses when every view has clients', () => {
    const { registry, freed, runTo } = rig(2);
    const a = view('a');
    const b = view('b');
    registry.acquire(a);
    registry.acquire(b);
    assert.equal(registry.acquire(view('c')), undefined, 'both views have clients');
    registry.release(b);
    runTo(1_000);
    registry.release(a);
    assert.ok(registry.acquire(view('c')) !== undefined);
    assert.deepEqual(freed, ['b'], 'b was idle the longest');
    assert.equal(registry.size, 2);
  });
});
