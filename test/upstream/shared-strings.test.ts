/**
 * Namespaces and label values that many objects of an upstream repeat are held once, not once per
 * object: counted in a heap snapshot of this process, with thousands of objects read and kept.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getHeapSnapshot } from 'node:v8';
import { McpResourceReader } from '../../src/upstream/mcp-resource-reader.js';
import { encodeMcpResource, kindNamed } from '../support/fake-objects.js';

const SE = kindNamed('ServiceEntry');
/** Node types of strings in a heap snapshot (a slice of a longer string is one of its own). */
const STRING_TYPES: ReadonlySet<string> = new Set(['string', 'sliced string', 'concatenated string']);

/** How many strings of the heap have each of `texts` as their content. */
async function stringsWith(texts: readonly string[]): Promise<Map<string, number>> {
  const chunks: Buffer[] = [];
  for await (const chunk of getHeapSnapshot()) chunks.push(chunk as Buffer);
  const snap = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const types = snap.snapshot.meta.node_types[0];
  const counts = new Map(texts.map((t) => [t, 0]));
  for (let i = 0; i < snap.nodes.length; i += width) {
    if (!STRING_TYPES.has(types[snap.nodes[i + typeAt] ?? 0] ?? '')) continue;
    const text = snap.strings[snap.nodes[i + nameAt] ?? 0] ?? '';
    const n = counts.get(text);
    if (n !== undefined) counts.set(text, n + 1);
  }
  return counts;
}

describe('strings many objects repeat', () => {
  it('are held once per reader, however many objects carry them', async () => {
    // Built at run time, so no literal in this file has the same content.
    const namespace = ['ns', String(7 * 6)].join('-');
    const zone = ['zone', 'marker', String(9 * 9)].join('-');
    const reader = new McpResourceReader({ defaultNamespace: 'default', origin: 'xds://upstream:15010' });
    const kept = Array.from({ length: 3000 }, (_, i) =>
      reader.read(
        SE,
        encodeMcpResource(
          SE,
          {
            namespace,
            name: `svc-${i}`,
            labels: { app: `svc-${i}`, zone },
            spec: { hosts: [`svc-${i}.example.com`], location: 'MESH_EXTERNAL' },
          },
          { createTime: { seconds: 1_700_000_000, nanos: 0 } },
        ),
        'test',
      ),
    );
    for (const r of kept) {
      assert.ok(r.ok);
      assert.equal(r.resource.namespace, namespace);
      assert.equal(r.resource.labels['zone'], zone);
    }
    const counts = await stringsWith([namespace, zone]);
    // The test's own two strings and the reader's shared ones; one per object without sharing.
    assert.ok((counts.get(namespace) ?? 0) <= 3, `${counts.get(namespace)} strings "${namespace}"`);
    assert.ok((counts.get(zone) ?? 0) <= 3, `${counts.get(zone)} strings "${zone}"`);
    assert.equal(kept.length, 3000);
  });
});
