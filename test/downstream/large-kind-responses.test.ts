import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { ConfigResource } from '../../src/core/resource.js';
import { FULL_VIEW, type ClientView } from '../../src/downstream/client-view.js';
import { ClientPolicy, policyView } from '../../src/downstream/policy/client-policy.js';
import { ResourceEncoder } from '../../src/downstream/resource-encoder.js';
import { ResponseCache, responseBytes } from '../../src/downstream/response-cache.js';
import { KindTable } from '../../src/merge/kind-table.js';
import { KINDS } from '../../src/schema/kinds.js';
import { messageType } from '../../src/schema/proto-root.js';
import { changeSteps } from '../support/change-steps.js';
import { fakeResource } from '../support/resources.js';

const KIND = 'networking.istio.io/VirtualService';
const TYPE_URL = 'networking.istio.io/v1/VirtualService';
const RESPONSE = messageType('envoy.service.discovery.v3.DiscoveryResponse');
const MCP_RESOURCE = messageType('istio.mcp.v1alpha1.Resource');
/** Objects in the kind: several of the chunks its lists are kept in. */
const OBJECTS = 1500;

const VIEWS: readonly ClientView[] = [
  FULL_VIEW,
  policyView(new ClientPolicy({ name: 'no-red', deny: { labels: { team: 'red' } } }), ''),
  policyView(new ClientPolicy({ name: 'red', allow: { labels: { team: 'red' } } }), ''),
];

function object(i: number, team: string, body: string): ConfigResource {
  return fakeResource(`svc-${String(i).padStart(4, '0')}`, {
    namespace: `ns-${i % 4}`,
    labels: { team },
    body: `${i}:${body}`,
  });
}

/** The objects a response carries, as `namespace/name@version`, in its order. */
function served(bytes: Buffer): string[] {
  const decoded = RESPONSE.toObject(RESPONSE.decode(bytes)) as { resources?: Array<{ value: Uint8Array }> };
  return (decoded.resources ?? []).map((a) => {
    const r = MCP_RESOURCE.toObject(MCP_RESOURCE.decode(a.value)) as {
      metadata: { name: string; version: string };
    };
    return `${r.metadata.name}@${r.metadata.version}`;
  });
}

const editArb = fc.record({
  i: fc.nat({ max: OBJECTS + 99 }),
  op: fc.constantFrom('edit' as const, 'relabel' as const, 'remove' as const),
});

describe('responses of a kind of many objects', () => {
  it('carry exactly what each view admits, in order, through changes that views see or skip', () => {
    fc.assert(
      fc.property(changeSteps(editArb), (steps) => {
        let counter = 0;
        const table = new KindTable(KIND, undefined, 'serve-all', () => ++counter);
        const rank = { name: 'upstream', priority: 0, order: 0 };
        const cache = new ResponseCache(new ResourceEncoder(KINDS));
        let held = new Map<string, ConfigResource>();
        for (let i = 0; i < OBJECTS; i++) {
          const r = object(i, i % 3 === 0 ? 'red' : 'blue', 'v0');
          held.set(`${r.namespace}/${r.name}`, r);
        }
        table.apply(rank, new Map(), held);
        steps.forEach(({ edits, looks }, n) => {
          if (n > 0) {
            const next = new Map(held);
            for (const e of edits) {
              const r = object(e.i, e.op === 'relabel' ? (n % 2 === 0 ? 'red' : 'blue') : 'blue', `v${n}`);
              const key = `${r.namespace}/${r.name}`;
              if (e.op === 'remove') next.delete(key);
              else next.set(key, r);
            }
            table.apply(rank, held, next);
            held = next;
          }
          const kind = table.snapshot();
          // Each view is asked for this snapshot or not, as its clients happen to (bit i of `looks`).
          VIEWS.forEach((view, i) => {
            if (n > 0 && (looks & (1 << i)) === 0) return;
            const got = served(responseBytes(cache.response(TYPE_URL, view, kind)));
            const want = [...held.values()]
              .filter((r) => view.admits(r))
              .sort((a, b) => (`${a.namespace}\0${a.name}` < `${b.namespace}\0${b.name}` ? -1 : 1))
              .map((r) => `${r.namespace}/${r.name}@${r.version}`);
            assert.deepEqual(got, want, `${view.id} after step ${n + 1}`);
          });
        });
      }),
      { numRuns: 12 },
    );
  });
});
