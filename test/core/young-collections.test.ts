import assert from 'node:assert/strict';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { runInNewContext } from 'node:vm';
import {
  heapCollector,
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
