import assert from 'node:assert/strict';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { runInNewContext } from 'node:vm';
import {
  heapCollector,
  MarkingWatch,
  YoungCollections,
  youngCollectionFunction,
} from '../../src/core/young-collections.js';
import { CollectionCounts } from '../../src/telemetry/collection-counts.js';

/**
 * Resolves with the kind of the next collection node reports of one of `kinds`; fails after 10 s
 * (node reports collections to observers without keeping the process alive: the timer does).
 */
function nextCollection(kinds: readonly number[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      observer.disconnect();
      reject(new Error(`no collection of kind ${kinds.join(' or ')} reported in 10 s`));
    }, 10_000);
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        const kind = (entry as { readonly detail?: { readonly kind?: number } }).detail?.kind;
        if (kind === undefined || !kinds.includes(kind)) continue;
        observer.disconnect();
        clearTimeout(timer);
        resolve(kind);
        return;
      }
    });
    observer.observe({ entryTypes: ['gc'] });
  });
}

describe('YoungCollections', () => {
  it('runs one collection each time the bytes noted since the last reach the threshold', () => {
    let runs = 0;
    const collections = new YoungCollections(() => runs++, 1000);
    collections.received(400);
    collections.received(599);
    assert.equal(runs, 0);
    collections.received(1);
    assert.equal(runs, 1);
    // What went past the threshold does not carry over: the collection freed it.
    collections.received(2500);
    assert.equal(runs, 2);
    collections.received(999);
    assert.equal(runs, 2);
    assert.equal(collections.runs, 2);
  });

  it('waits for the end of a message unless eight times the threshold went by inside one', () => {
    let runs = 0;
    const collections = new YoungCollections(() => runs++, 1000);
    collections.received(5000, false);
    assert.equal(runs, 0);
    collections.received(100, true);
    assert.equal(runs, 1);
    collections.received(7999, false);
    assert.equal(runs, 1);
    collections.received(1, false);
    assert.equal(runs, 2);
  });

  it('leaves a collection out while V8 is marking, and starts counting again', () => {
    let runs = 0;
    let marking = true;
    const collections = new YoungCollections(
      () => runs++,
      1000,
      () => marking,
    );
    collections.received(1500);
    assert.equal(runs, 0);
    assert.equal(collections.skipped, 1);
    // The full collection that ends the marking freed those bytes: they are not counted again.
    marking = false;
    collections.received(999);
    assert.equal(runs, 0);
    collections.received(1);
    assert.equal(runs, 1);
    assert.equal(collections.runs, 1);
    assert.equal(collections.skipped, 1);
  });

  it('does nothing where no collection can be asked for', () => {
    const collections = new YoungCollections(undefined, 1);
    collections.received(10);
    assert.equal(collections.runs, 0);
  });
});

describe('youngCollectionFunction', () => {
  it('runs a young collection of this process, and leaves other contexts as they were', async () => {
    const hadOwn = typeof (globalThis as { gc?: unknown }).gc;
    const collect = youngCollectionFunction();
    assert.ok(collect !== undefined, 'this runtime offers a young collection');
    const young = nextCollection([constants.NODE_PERFORMANCE_GC_MINOR, constants.NODE_PERFORMANCE_GC_MAJOR]);
    collect();
    assert.equal(await young, constants.NODE_PERFORMANCE_GC_MINOR);
    assert.equal(typeof (globalThis as { gc?: unknown }).gc, hadOwn);
    // Only a process started with --expose-gc gives every context a collector.
    assert.equal(runInNewContext('typeof gc'), hadOwn === 'function' ? 'function' : 'undefined');
  });
});

describe('MarkingWatch', () => {
  it('reports a marking of the old generation from its start to the full collection that ends it', async () => {
    const watch = new MarkingWatch().start();
    const held: object[][] = [];
    try {
      assert.equal(watch.marking, false);
      // Objects that stay alive grow the old generation until V8 starts marking it.
      const deadline = Date.now() + 20_000;
      let seen = false;
      while (!seen && Date.now() < deadline) {
        held.push(Array.from({ length: 20_000 }, (_, i) => ({ i, text: `object ${i}` })));
        await new Promise((resolve) => setImmediate(resolve));
        seen = watch.marking;
      }
      assert.ok(seen, 'no marking reported while the old generation grew');
      const full = nextCollection([constants.NODE_PERFORMANCE_GC_MAJOR]);
      // Finishes the marking: the collector called bare runs a full collection.
      heapCollector()?.();
      await full;
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(watch.marking, false);
    } finally {
      watch.stop();
      held.length = 0;
    }
  });
});

describe('CollectionCounts', () => {
  it('counts young and full collections as node reports them', async () => {
    const counts = new CollectionCounts().start();
    try {
      const collect = youngCollectionFunction();
      assert.ok(collect !== undefined);
      const young = nextCollection([constants.NODE_PERFORMANCE_GC_MINOR]);
      collect();
      await young;
      // The counter's own observer hears of it in the same batch as the one above.
      await new Promise((resolve) => setImmediate(resolve));
      assert.ok(counts.young >= 1, `young ${counts.young}`);
      const fullBefore = counts.full;
      const full = nextCollection([constants.NODE_PERFORMANCE_GC_MAJOR]);
      // A full collection: the collector called bare.
      const gc = heapCollector();
      assert.ok(gc !== undefined);
      gc();
      await full;
      await new Promise((resolve) => setImmediate(resolve));
      assert.ok(counts.full > fullBefore, `full ${counts.full}, before ${fullBefore}`);
    } finally {
      counts.stop();
    }
  });
});
