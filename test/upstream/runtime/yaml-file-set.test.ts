import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MeshmuxError } from '../../../src/core/errors.js';
import { resourceKey, type ConfigResource } from '../../../src/core/resource.js';
import {
  nextYamlFileSet,
  objectsInSeveralFiles,
  restoredYamlFileSet,
  withInstancesOf,
  yamlFileSetRevision,
  type YamlFileRead,
  type YamlFileSet,
} from '../../../src/upstream/runtime/yaml-file-set.js';
import { fakeResource } from '../../support/resources.js';

function obj(name: string, file: string, body = name): ConfigResource {
  const r = fakeResource(name, { body });
  return { ...r, origin: { ...r.origin, file } };
}

function read(file: string, names: string[], errors: string[] = []): readonly [string, YamlFileRead] {
  return [
    file,
    {
      resources: names.map((n) => obj(n, file)),
      errors: errors.map((m) => new MeshmuxError('SCHEMA', m, { file })),
      warnings: [],
    },
  ];
}

const served = (set: YamlFileSet): string[] => set.resources.map((r) => `${r.name}@${r.origin.file ?? '?'}`);

describe('a set of YAML files', () => {
  it('serves every file’s objects, the later file’s where two define one, with a warning naming both', () => {
    const set = nextYamlFileSet(undefined, [read('a.yaml', ['x', 'y']), read('b.yaml', ['y', 'z'])]);
    assert.deepEqual(served(set), ['x@a.yaml', 'y@b.yaml', 'z@b.yaml']);
    assert.equal(set.warnings.length, 1);
    assert.match(set.warnings[0]?.describe() ?? '', /b\.yaml.*also defined in a\.yaml; this later file wins/);
  });

  it('keeps what a broken file served before and no longer yields, and reports its errors', () => {
    const before = nextYamlFileSet(undefined, [read('a.yaml', ['x', 'y'])]);
    const after = nextYamlFileSet(before, [read('a.yaml', ['x'], ['doc 1 is invalid'])]);
    assert.deepEqual(served(after).sort(), ['x@a.yaml', 'y@a.yaml']);
    assert.equal(after.errors.length, 1);
    // The kept object outlives a later read that leaves the file broken.
    const still = nextYamlFileSet(after, [read('a.yaml', [], ['still invalid'])]);
    assert.deepEqual(served(still).sort(), ['x@a.yaml', 'y@a.yaml']);
  });

  it('deletes what a valid edit drops, and everything of a file no longer read', () => {
    const before = nextYamlFileSet(undefined, [read('a.yaml', ['x', 'y']), read('b.yaml', ['z'])]);
    const after = nextYamlFileSet(before, [read('a.yaml', ['x'])]);
    assert.deepEqual(served(after), ['x@a.yaml']);
    assert.deepEqual([...after.files.keys()], ['a.yaml']);
  });

  it('takes a file’s own previous entry as it is, so an unchanged file is not re-combined', () => {
    const before = nextYamlFileSet(undefined, [read('a.yaml', ['x'], ['bad'])]);
    const entry = before.files.get('a.yaml');
    assert.ok(entry !== undefined);
    const after = nextYamlFileSet(before, [['a.yaml', entry]]);
    assert.equal(after.files.get('a.yaml'), entry);
    assert.deepEqual(served(after), ['x@a.yaml']);
  });

  it('keeps everything of a file that could not be read at all', () => {
    const before = nextYamlFileSet(undefined, [read('a.yaml', ['x', 'y'])]);
    const after = nextYamlFileSet(before, [read('a.yaml', [], ['file too large'])]);
    assert.deepEqual(served(after), ['x@a.yaml', 'y@a.yaml']);
    assert.match(after.errors[0]?.describe() ?? '', /file too large/);
  });

  it('after a restart, keeps what the restored objects say a file whose first read is broken served', () => {
    const record = [obj('x', 'a.yaml'), obj('y', 'a.yaml'), obj('z', 'b.yaml'), obj('gone', 'c.yaml')];
    const reads = [read('/etc/mesh/a.yaml', ['x'], ['doc 1 is invalid']), read('/etc/mesh/b.yaml', ['w'])];
    const restored = restoredYamlFileSet(
      record,
      reads.map(([file]) => file),
      (file) => file.slice('/etc/mesh/'.length),
    );
    const first = nextYamlFileSet(restored, reads);
    // The broken file keeps `y`; the valid one serves what it yields now; a file no longer read is gone.
    assert.deepEqual(first.resources.map((r) => r.name).sort(), ['w', 'x', 'y']);
    const still = nextYamlFileSet(first, [read('/etc/mesh/a.yaml', [], ['still invalid'])]);
    assert.deepEqual(still.resources.map((r) => r.name).sort(), ['x', 'y']);
  });

  it('does not alter the set it was built from', () => {
    const before = nextYamlFileSet(undefined, [read('a.yaml', ['x'])]);
    nextYamlFileSet(before, [read('a.yaml', ['y']), read('b.yaml', ['z'])]);
    assert.deepEqual(served(before), ['x@a.yaml']);
    assert.deepEqual([...before.files.keys()], ['a.yaml']);
  });

  // The reference: every object under its `kind|namespace/name` key in one map, the later file's
  // value where two define one, at the place the first definition took.
  const reference = (entries: Iterable<YamlFileRead>): ConfigResource[] => {
    const byKey = new Map<string, ConfigResource>();
    for (const r of entries) for (const x of r.resources) byKey.set(resourceKey(x), x);
    return [...byKey.values()];
  };
  const object = fc.record({
    kind: fc.constantFrom('networking.istio.io/VirtualService', 'networking.istio.io/ServiceEntry'),
    namespace: fc.constantFrom('shop', 'default', 'shop/'),
    name: fc.constantFrom('a', 'b', 'shop/a', 'c'),
    body: fc.constantFrom('one', 'two'),
  });
  const contents = fc.array(object, { maxLength: 6 });
  const readOf = (
    file: string,
    objects: ReadonlyArray<{ kind: string; namespace: string; name: string; body: string }>,
    broken = false,
  ): YamlFileRead => ({
    resources: objects.map((o) => {
      const r = fakeResource(o.name, { kind: o.kind, namespace: o.namespace, body: `${file} ${o.body}` });
      return { ...r, origin: { file } };
    }),
    errors: broken ? [new MeshmuxError('SCHEMA', 'a document is invalid', { file })] : [],
    warnings: [],
  });

  it('serves what one map by kind, namespace and name would, in the order each object is first defined', () => {
    fc.assert(
      fc.property(fc.array(contents, { maxLength: 5 }), (files) => {
        const reads = files.map((objects, i): readonly [string, YamlFileRead] => [
          `f${i}.yaml`,
          readOf(`f${i}.yaml`, objects),
        ]);
        const set = nextYamlFileSet(undefined, reads);
        assert.deepEqual(set.resources, reference(reads.map(([, r]) => r)));
        const shadowed = reads.reduce((n, [, r]) => n + r.resources.length, 0) - set.resources.length;
        // One warning per object defined again by another file (a file defining one twice: none).
        assert.ok(set.warnings.length <= shadowed);
      }),
      { numRuns: 500 },
    );
  });

  it('built from the last set, file changes one after another, serves what a set built afresh from its files would', () => {
    // Each step, per file: kept as read before (the same entry), read anew (maybe broken: it
    // keeps what it served), or gone.
    const step = fc.array(
      fc.oneof(
        fc.constant('same' as const),
        fc.constant('gone' as const),
        fc.record({ objects: contents, broken: fc.boolean() }),
      ),
      { minLength: 4, maxLength: 4 },
    );
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 6 }), (steps) => {
        let set: YamlFileSet | undefined;
        for (const files of steps) {
          const reads: Array<readonly [string, YamlFileRead]> = [];
          files.forEach((change, i) => {
            const file = `f${i}.yaml`;
            const before = set?.files.get(file);
            if (change === 'gone') return;
            if (change === 'same') {
              if (before !== undefined) reads.push([file, before]);
              return;
            }
            reads.push([file, readOf(file, change.objects, change.broken)]);
          });
          const next = nextYamlFileSet(set, reads);
          // Afresh: the same file entries (what each serves, kept objects included) and no past.
          const fresh = nextYamlFileSet(undefined, [...next.files]);
          assert.deepEqual(next.resources, reference(next.files.values()));
          assert.deepEqual(next.resources, fresh.resources);
          assert.deepEqual(
            next.warnings.map((w) => w.describe()),
            fresh.warnings.map((w) => w.describe()),
          );
          // Its count of objects several files define, carried from set to set, is the true one.
          const definers = new Map<string, number>();
          for (const entry of next.files.values()) {
            for (const key of new Set(entry.resources.map(resourceKey)))
              definers.set(key, (definers.get(key) ?? 0) + 1);
          }
          const several = [...definers.values()].filter((n) => n > 1).length;
          assert.equal(objectsInSeveralFiles(next), several);
          if (set !== undefined) assert.equal(objectsInSeveralFiles(set), undefined);
          set = next;
        }
      }),
      { numRuns: 400 },
    );
  });

  it('has a revision that moves with what any file holds, its order and its path, and only then', () => {
    const x1 = obj('x', 'a.yaml', 'one');
    const x2 = obj('x', 'a.yaml', 'two');
    const y = obj('y', 'b.yaml');
    const entry = (resources: ConfigResource[]): YamlFileRead => ({ resources, errors: [], warnings: [] });
    const revision = (...reads: Array<readonly [string, YamlFileRead]>): string =>
      yamlFileSetRevision(nextYamlFileSet(undefined, reads));
    const base = revision(['a.yaml', entry([x1, x2])], ['b.yaml', entry([y])]);
    // Rebuilt from reads of the same content: the same revision.
    assert.equal(revision(['a.yaml', entry([x1, x2])], ['b.yaml', entry([y])]), base);
    // One file defining x twice serves the later: swapping them serves other content.
    const swapped = nextYamlFileSet(undefined, [
      ['a.yaml', entry([x2, x1])],
      ['b.yaml', entry([y])],
    ]);
    assert.equal(swapped.resources[0], x1);
    assert.notEqual(yamlFileSetRevision(swapped), base);
    assert.notEqual(revision(['a.yaml', entry([x1, x2])]), base);
    assert.notEqual(revision(['a.yaml', entry([x1, x2])], ['c.yaml', entry([y])]), base);
    assert.notEqual(revision(['a.yaml', entry([x1, x2])], ['b.yaml', entry([y, obj('z', 'b.yaml')])]), base);
  });

  it('reads a file again with the instances it held where an object is the same, in the same place', () => {
    const at = (name: string, body: string, doc: number, line: number): ConfigResource => {
      const r = fakeResource(name, { body });
      return { ...r, origin: { file: 'a.yaml', doc, line } };
    };
    const held: YamlFileRead = {
      resources: [at('x', 'one', 0, 1), at('y', 'one', 1, 5), at('z', 'one', 2, 9)],
      errors: [],
      warnings: [],
    };
    const again: YamlFileRead = {
      resources: [at('x', 'one', 0, 1), at('y', 'two', 1, 5), at('z', 'one', 2, 10), at('w', 'one', 3, 14)],
      errors: [],
      warnings: [],
    };
    const read = withInstancesOf(held, again);
    // x as it was; y changed; z moved to another line; w new.
    assert.equal(read.resources[0], held.resources[0]);
    assert.equal(read.resources[1], again.resources[1]);
    assert.equal(read.resources[2], again.resources[2]);
    assert.equal(read.resources[3], again.resources[3]);
    assert.equal(withInstancesOf(undefined, again), again);
    const unrelated: YamlFileRead = { resources: [at('v', 'one', 0, 1)], errors: [], warnings: [] };
    assert.equal(withInstancesOf(held, unrelated), unrelated);
  });
});
