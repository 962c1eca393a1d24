import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseMeshmuxConfig, type SourceConfig } from '../../src/settings/meshmux-config.js';
import { sameConnection, sourcePolicy } from '../../src/settings/merge-rules.js';
import { MERGE_RULE_FIELDS } from '../../src/settings/sources/common.js';

/** A value of each rule field other than its default, as a user would write it. */
const EDITED: Record<keyof typeof MERGE_RULE_FIELDS, string> = {
  priority: '7',
  allow: '{ namespaces: [shop] }',
  deny: '{ kinds: [EnvoyFilter] }',
  onEmpty: 'accept',
  maxStale: '10m',
  maxDeleteRatio: '0.9',
  deleteWindow: '1h',
  confirmAfter: '1h',
  settle: '3s',
  required: 'false',
};

function source(extra = ''): SourceConfig {
  const config = parseMeshmuxConfig(
    `sources:\n  - name: local\n    type: file\n    path: /srv/mesh\n${extra}`,
    'test',
    '/',
  );
  const [only] = config.sources;
  assert.ok(only !== undefined);
  return only;
}

describe('merge rules apart from a source connection', () => {
  it('knows an edited value for every rule field the schema has', () => {
    assert.deepEqual(Object.keys(EDITED).sort(), Object.keys(MERGE_RULE_FIELDS).sort());
  });

  for (const field of Object.keys(MERGE_RULE_FIELDS) as Array<keyof typeof MERGE_RULE_FIELDS>) {
    it(`keeps the running source and applies new rules when only ${field} changes`, () => {
      const before = source();
      const after = source(`    ${field}: ${EDITED[field]}\n`);
      assert.ok(sameConnection(before, after), 'same connection: the source keeps running');
      assert.notDeepEqual(sourcePolicy(after.rules), sourcePolicy(before.rules), 'the policy changed');
      assert.equal(
        (after as unknown as Record<string, unknown>)[field],
        undefined,
        'the field sits in rules only',
      );
    });
  }

  it('restarts the source when how it reaches its upstream changes', () => {
    assert.ok(!sameConnection(source(), source('    rescanInterval: 5s\n')));
    const moved = parseMeshmuxConfig(
      'sources:\n  - name: local\n    type: file\n    path: /srv/other\n',
      'test',
      '/',
    );
    assert.ok(!sameConnection(source(), moved.sources[0] as SourceConfig));
  });

  it('compares connections structurally, whatever the order of the fields', () => {
    const a = source('    rescanInterval: 5s\n    namespace: shop\n');
    const b = parseMeshmuxConfig(
      'sources:\n  - namespace: shop\n    rescanInterval: 5s\n    path: /srv/mesh\n    type: file\n    name: local\n',
      'test',
      '/',
    ).sources[0] as SourceConfig;
    assert.ok(sameConnection(a, b));
  });
});
