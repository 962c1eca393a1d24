import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MeshmuxError } from '../../../src/core/errors.js';
import type { ConfigResource } from '../../../src/core/resource.js';
import {
  nextYamlFileSet,
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

  it('does not alter the set it was built from', () => {
    const before = nextYamlFileSet(undefined, [read('a.yaml', ['x'])]);
    nextYamlFileSet(before, [read('a.yaml', ['y']), read('b.yaml', ['z'])]);
    assert.deepEqual(served(before), ['x@a.yaml']);
    assert.deepEqual([...before.files.keys()], ['a.yaml']);
  });
});
