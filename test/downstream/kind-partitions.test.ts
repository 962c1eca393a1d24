import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { compareByName, type ConfigResource } from '../../src/core/resource.js';
import type { ClientView } from '../../src/downstream/client-view.js';
import { KindPartitions, MAX_PARTS } from '../../src/downstream/kind-partitions.js';
import { anonymousIdentity, withNode } from '../../src/downstream/client-identity.js';
import type { PolicyConfig } from '../../src/downstream/policy/client-policy.js';
import { PolicySet } from '../../src/downstream/policy/policy-set.js';
import { ResourceEncoder } from '../../src/downstream/resource-encoder.js';
import { ResponseCache, responseBytes } from '../../src/downstream/response-cache.js';
import type { KindSnapshot } from '../../src/merge/config-snapshot.js';
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
const OBJECTS = 1200;
const ZONES = ['east', 'west', 'edge'] as const;

/** The benchmark's three policies: the core takes all but the edge, the others their zone. */
const POLICIES: readonly PolicyConfig[] = [
  { name: 'core', match: { nodeId: '*core*' }, deny: { labels: { zone: 'edge' } } },
  { name: 'east', match: { nodeId: '*east*' }, allow: { labels: { zone: 'east' } } },
  { name: 'edge', match: { nodeId: '*edge*' }, allow: { labels: { zone: 'edge' } } },
];

/** The view a client of `policy` (and of `revision`, when given) gets from `set`. */
function viewOf(set: PolicySet, policy: string, revision = ''): ClientView {
  const identity = withNode(
    anonymousIdentity(0, '127.0.0.1:1234', []),
    `sidecar~10.0.0.1~istiod-${policy}.istio-system~istio-system.svc.cluster.local`,
    revision === '' ? {} : { ISTIO_REVISION: revision },
  );
  const admission = set.admit(identity);
  assert.ok(admission.admitted, `a client of ${policy} is admitted`);
  return admission.view;
}

function object(i: number, zone: string, body: string, rev?: string): ConfigResource {
  return fakeResource(`svc-${String(i).padStart(4, '0')}`, {
    namespace: `ns-${i % 5}`,
    labels: { zone, ...(rev === undefined ? {} : { 'istio.io/rev': rev }) },
    body: `${i}:${body}`,
  });
}

/** The objects a response carries, as `namespace/name@version`, sorted. */
function served(bytes: Buffer): string[] {
  const decoded = RESPONSE.toObject(RESPONSE.decode(bytes)) as { resources?: Array<{ value: Uint8Array }> };
  return (decoded.resources ?? [])
    .map((a) => {
      const r = MCP_RESOURCE.toObject(MCP_RESOURCE.decode(a.value)) as {
        metadata: { name: string; version: string };
      };
      return `${r.metadata.name}@${r.metadata.version}`;
    })
    .sort();
}

/** `objects` sorted as a kind's snapshot holds them: by namespace, then name. */
function sorted(objects: ConfigResource[]): ConfigResource[] {
  return objects.sort((a, b) => compareByName(a, b));
}

function expected(objects: Iterable<ConfigResource>, view: ClientView): string[] {
  return [...objects]
    .filter((r) => view.admits(r))
    .map((r) => `${r.namespace}/${r.name}@${r.version}`)
    .sort();
}

/** The members of each part, as keys, by part. */
function membersOf(
  parts: ReadonlyMap<string, { toArray(): ConfigResource[] }> | undefined,
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [part, list] of parts ?? [])
    out.set(
      part,
      list.toArray().map((r) => `${r.key}@${r.version}`),
    );
  return out;
}

const editArb = fc.record({
  i: fc.nat({ max: OBJECTS + 99 }),
  op: fc.constantFrom('edit' as const, 'relabel' as const, 'remove' as const),
  zone: fc.constantFrom(...ZONES),
});

describe('views that share the parts of a kind', () => {
  it('serve each view exactly what it admits through changes, with parts edited as a fresh split would make them', () => {
    fc.assert(
      fc.property(changeSteps(editArb), (steps) => {
        const set = new PolicySet(POLICIES);
        const views = ['core', 'east', 'edge'].map((p) => viewOf(set, p));
        const scheme = views[0]?.partition?.scheme;
        assert.ok(scheme !== undefined, 'views of three policies have a place in a split');
        let counter = 0;
        const table = new KindTable(KIND, undefined, 'serve-all', () => ++counter);
        const rank = { name: 'upstream', priority: 0, order: 0 };
        const cache = new ResponseCache(new ResourceEncoder(KINDS));
        const kept = new KindPartitions();
        let held = new Map<string, ConfigResource>();
        for (let i = 0; i < OBJECTS; i++) {
          const r = object(i, ZONES[i % 3] as string, 'v0');
          held.set(r.key, r);
        }
        table.apply(rank, new Map(), held);
        steps.forEach(({ edits, looks }, n) => {
          if (n > 0) {
            const next = new Map(held);
            for (const e of edits) {
              const before = next.get(object(e.i, 'east', '').key);
              const zone = e.op === 'relabel' ? e.zone : (before?.labels['zone'] ?? e.zone);
              const r = object(e.i, zone, `v${n}`);
              if (e.op === 'remove') next.delete(r.key);
              else next.set(r.key, r);
            }
            table.apply(rank, held, next);
            held = next;
          }
          const kind = table.snapshot();
          assert.ok(kind !== undefined);
          const edited = membersOf(kept.of(scheme, kind));
          assert.deepEqual(
            edited,
            membersOf(new KindPartitions().of(scheme, kind)),
            `parts after step ${n + 1}`,
          );
          views.forEach((view, i) => {
            if (n > 0 && (looks & (1 << i)) === 0) return;
            const got = served(responseBytes(cache.response(TYPE_URL, view, kind)));
            assert.deepEqual(got, expected(held.values(), view), `${view.id} after step ${n + 1}`);
          });
        });
        assert.equal(cache.counters.partsMismatched, 0);
      }),
      { numRuns: 12 },
    );
  });

  it("copy each object's bytes into blocks once, however many views serve it", () => {
    const objects = sorted(
      Array.from({ length: OBJECTS }, (_, i) => object(i, ZONES[i % 3] as string, 'v0')),
    );
    const kind: KindSnapshot = { kind: KIND, version: 'v', generation: 1, resources: objects };
    const framedBytes = (rs: readonly ConfigResource[]): number => {
      const encoder = new ResourceEncoder(KINDS);
      return rs.reduce((n, r) => n + encoder.framed(r).byteLength, 0);
    };
    const serve = (configs: readonly PolicyConfig[]): ResponseCache => {
      const set = new PolicySet(configs);
      const cache = new ResponseCache(new ResourceEncoder(KINDS));
      for (const { name } of configs) cache.response(TYPE_URL, viewOf(set, name), kind);
      return cache;
    };
    const shared = serve(POLICIES);
    assert.equal(shared.blockCounters.bytesCopied, framedBytes(objects));
    // The same three filters, each a configuration of its own: a list per view, each copied.
    let own = 0;
    for (const policy of POLICIES) own += serve([policy]).blockCounters.bytesCopied;
    const set = new PolicySet(POLICIES);
    const views = ['core', 'east', 'edge'].map((p) => viewOf(set, p));
    assert.equal(
      own,
      views.reduce((n, view) => n + framedBytes(objects.filter((r) => view.admits(r))), 0),
    );
    assert.ok(
      own > shared.blockCounters.bytesCopied * 1.25,
      `${own} against ${shared.blockCounters.bytesCopied}`,
    );
  });

  it('keep the revision rule: an object labelled for a revision reaches only istiods of it', () => {
    const revs = [undefined, 'canary', 'stable'] as const;
    const objects = sorted(
      Array.from({ length: 300 }, (_, i) =>
        object(i, ZONES[i % 3] as string, 'v0', revs[Math.floor(i / 3) % 3]),
      ),
    );
    const kind: KindSnapshot = { kind: KIND, version: 'v', generation: 1, resources: objects };
    const set = new PolicySet(POLICIES);
    const cache = new ResponseCache(new ResourceEncoder(KINDS));
    for (const policy of ['core', 'east', 'edge'])
      for (const revision of ['', 'canary', 'stable']) {
        const view = viewOf(set, policy, revision);
        assert.ok(view.partition !== undefined);
        const got = served(responseBytes(cache.response(TYPE_URL, view, kind)));
        assert.deepEqual(got, expected(objects, view), `${policy} for revision "${revision}"`);
        if (revision !== '')
          assert.ok(
            got.every((s) => {
              const r = objects.find((o) => s.startsWith(`${o.key}@`));
              const label = r?.labels['istio.io/rev'];
              return label === undefined || label === revision;
            }),
          );
      }
    assert.equal(cache.counters.partsMismatched, 0);
  });

  it('keep the split of a kind across a configuration of the same filters, and split anew for other filters', () => {
    const objects = sorted(Array.from({ length: 300 }, (_, i) => object(i, ZONES[i % 3] as string, 'v0')));
    const kind: KindSnapshot = { kind: KIND, version: 'v', generation: 1, resources: objects };
    const schemeOf = (configs: readonly PolicyConfig[]) => {
      const scheme = viewOf(new PolicySet(configs), 'core').partition?.scheme;
      assert.ok(scheme !== undefined);
      return scheme;
    };
    const kept = new KindPartitions();
    const first = kept.of(schemeOf(POLICIES), kind);
    // Another match, the same filters: the same split, not walked again.
    const rematched = POLICIES.map((p) => ({ ...p, match: { nodeId: `*istiod-${p.name}*` } }));
    assert.equal(kept.of(schemeOf(rematched), kind), first);
    const narrowed = [POLICIES[0], { ...POLICIES[1], allow: { labels: { zone: 'west' } } }, POLICIES[2]];
    const other = kept.of(schemeOf(narrowed as PolicyConfig[]), kind);
    assert.notEqual(other, first);
    assert.deepEqual(
      membersOf(other),
      membersOf(new KindPartitions().of(schemeOf(narrowed as PolicyConfig[]), kind)),
    );
  });

  it('serve views their own lists where a kind falls in too many parts, and forget parts no view uses', () => {
    // Each object's revision label its own part: more parts than a response should be cut into.
    const many = sorted(Array.from({ length: 2 * MAX_PARTS }, (_, i) => object(i, 'east', 'v0', `r${i}`)));
    const kind: KindSnapshot = { kind: KIND, version: 'v', generation: 1, resources: many };
    const set = new PolicySet(POLICIES);
    const cache = new ResponseCache(new ResourceEncoder(KINDS));
    const core = viewOf(set, 'core');
    assert.equal(new KindPartitions().of(core.partition?.scheme as never, kind), undefined);
    assert.deepEqual(served(responseBytes(cache.response(TYPE_URL, core, kind))), expected(many, core));
    assert.equal(cache.sizes().blockLists, 1, 'the view has a list of its own');

    const few: KindSnapshot = { kind: KIND, version: 'w', generation: 2, resources: many.slice(0, 8) };
    const east = viewOf(set, 'east');
    cache.response(TYPE_URL, core, few);
    cache.response(TYPE_URL, east, few);
    // Eight objects of eight revisions: eight parts both views take, and no list of a view's own.
    assert.equal(cache.sizes().blockLists, 8);
    cache.forgetView(core.id);
    assert.equal(cache.sizes().blockLists, 8, 'the east view still takes every part');
    cache.forgetView(east.id);
    assert.equal(cache.sizes().blockLists, 0);
  });
});
