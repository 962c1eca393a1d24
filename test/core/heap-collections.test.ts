import assert from 'node:assert/strict';
import { constants } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { HeapCollections } from '../../src/core/heap-collections.js';
import { heapCollector, youngCollectionFunction } from '../../src/core/young-collections.js';
import { nextCollection } from '../support/gc-reports.js';

describe('HeapCollections', () => {
  it('reports a marking of the old generation from its start to the full collection that ends it', async () => {
    const watch = new HeapCollections().start();
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

  it('counts young and full collections as node reports them', async () => {
    const counts = new HeapCollections().start();
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
