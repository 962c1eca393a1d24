import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ContentDigest } from '../../src/core/content-digest.js';
import { compareByName, type ConfigResource } from '../../src/core/resource.js';
import type { Conflict, ConflictParty, KindSnapshot } from '../../src/merge/config-snapshot.js';
import { KindTable, type SemanticConflictPolicy, type SourceRank } from '../../src/merge/kind-table.js';
import { fakeResource } from '../support/resources.js';

const KIND = 'networking.istio.io/ServiceEntry';

/** Two pairs of equal priority, so both precedence and configuration order decide somewhere. */
const SOURCES: readonly SourceRank[] = [
  { name: 'git', priority: 0, order: 0 },
  { name: 'xds', priority: 5, order: 1 },
  { name: 'file', priority: 0, order: 2 },
  { name: 'zk', priority: 5, order: 3 },
];

/** An object's semantic keys: the hosts it claims (comma-separated), when it names any. */
function hostKeys(r: ConfigResource): string[] {
  const hosts = r.labels['host'];
  return hosts === undefined ? [] : hosts.split(',');
}

const editArb = fc.record({
  namespace: fc.constantFrom('a', 'b'),
  name: fc.constantFrom('1', '2', '3'),
  host: fc.constantFrom('h1', 'h2', 'h3', 'h1,h3', undefined),
  body: fc.constantFrom('x', 'y'),
  remove: fc.boolean(),
});

const stepArb = fc.record({
  source: fc.nat({ max: SOURCES.length - 1 }),
  edits: fc.array(editArb, { maxLength: 4 }),
  /** Clear the source's whole state first. */
  clear: fc.boolean(),
  /** Tell the table the changed keys (with an unchanged one and one never held among them), or let it compare. */
  hinted: fc.boolean(),
  revision: fc.constantFrom('r1', 'r2', undefined),
});

type State = Map<string, ConfigResource>;

/** Precedence written out: higher priority first, then configuration order. */
function ranked(holders: Array<{ rank: SourceRank; resource: ConfigResource }>) {
  return [...holders].sort((x, y) =>
    x.rank.priority !== y.rank.priority ? y.rank.priority - x.rank.priority : x.rank.order - y.rank.order,
  );
}

/** What the table must serve and report, derived from the sources' states alone. */
function expected(states: readonly State[], semantic: boolean, policy: SemanticConflictPolicy) {
  const byKey = new Map<string, Array<{ rank: SourceRank; resource: ConfigResource }>>();
  states.forEach((state, i) => {
    for (const [key, resource] of state) {
      const list = byKey.get(key) ?? [];
      list.push({ rank: SOURCES[i] as SourceRank, resource });
      byKey.set(key, list);
    }
  });
  const winners = new Map([...byKey].map(([key, list]) => [key, ranked(list)[0] as (typeof list)[0]]));
  const groups = new Map<string, string[]>();
  if (semantic) {
    for (const [key, w] of winners) {
      for (const g of hostKeys(w.resource)) groups.set(g, [...(groups.get(g) ?? []), key]);
    }
  }
  const withheld = new Set<string>();
  if (policy === 'highest-priority') {
    for (const members of groups.values()) {
      const best = Math.max(...members.map((k) => winners.get(k)?.rank.priority ?? 0));
      for (const k of members) if ((winners.get(k)?.rank.priority ?? 0) < best) withheld.add(k);
    }
  }
  const served = [...winners]
    .filter(([key]) => !withheld.has(key))
    .map(([, w]) => w.resource)
    .sort(compareByName);
  const isServed = (key: string) => byKey.has(key) && !withheld.has(key);
  const party = (h: { rank: SourceRank; resource: ConfigResource }, s: boolean): ConflictParty => ({
    source: h.rank.name,
    priority: h.rank.priority,
    kind: h.resource.kind,
    namespace: h.resource.namespace,
    name: h.resource.name,
    served: s,
  });
  const conflicts: Conflict[] = [];
  for (const [key, list] of byKey) {
    if (list.length < 2) continue;
    const order = ranked(list);
    conflicts.push({
      type: 'same-key',
      subject: `${KIND}|${key}`,
      resolution: order[0]?.rank.priority === order[1]?.rank.priority ? 'config-order' : 'priority',
      parties: order.map((h, i) => party(h, i === 0 && isServed(key))),
    });
  }
  for (const [g, members] of groups) {
    if (members.length < 2) continue;
    conflicts.push({
      type: 'service-entry-host',
      subject: g,
      resolution: members.some((k) => withheld.has(k)) ? 'priority' : 'served-all',
      parties: members.map((k) =>
        party(winners.get(k) as { rank: SourceRank; resource: ConfigResource }, isServed(k)),
      ),
    });
  }
  return { served, conflicts };
}

/** Conflicts in a stable order; a semantic conflict's parties are a set. */
function normalized(conflicts: readonly Conflict[]) {
  const partyKey = (p: ConflictParty) => `${p.source}|${p.namespace}/${p.name}`;
  return [...conflicts]
    .map((c) =>
      c.type === 'same-key'
        ? c
        : { ...c, parties: [...c.parties].sort((x, y) => (partyKey(x) < partyKey(y) ? -1 : 1)) },
    )
    .sort((x, y) => (`${x.type}|${x.subject}` < `${y.type}|${y.subject}` ? -1 : 1));
}

function digestOf(resources: readonly ConfigResource[]): string {
  const d = new ContentDigest();
  for (const r of resources) d.add(r);
  return d.version();
}

describe('a kind table under any sequence of source changes', () => {
  for (const [semantic, policy] of [
    [false, 'serve-all'],
    [true, 'serve-all'],
    [true, 'highest-priority'],
  ] as const) {
    it(`serves the highest-precedence holder of each key, reports every conflict and versions the content (${semantic ? `semantic keys, ${policy}` : 'no semantic keys'})`, () => {
      let checkedChanges = 0;
      fc.assert(
        fc.property(fc.array(stepArb, { minLength: 1, maxLength: 12 }), (steps) => {
          let counter = 0;
          const table = new KindTable(
            KIND,
            semantic ? { type: 'service-entry-host', subjects: hostKeys } : undefined,
            policy,
            () => ++counter,
          );
          const states: State[] = SOURCES.map(() => new Map<string, ConfigResource>());
          const revisions = new Map<number, string>();
          let lastVersion: string | undefined;
          let lastGeneration = 0;
          let lastConflicts: readonly Conflict[] | undefined;
          let lastSnap: KindSnapshot | undefined;
          steps.forEach((step, n) => {
            const before = states[step.source] as State;
            const after: State = step.clear ? new Map<string, ConfigResource>() : new Map(before);
            for (const e of step.edits) {
              const key = `${e.namespace}/${e.name}`;
              if (e.remove) after.delete(key);
              else
                after.set(
                  key,
                  fakeResource(e.name, {
                    kind: KIND,
                    namespace: e.namespace,
                    body: `${step.source}:${e.body}`,
                    labels: e.host === undefined ? {} : { host: e.host },
                  }),
                );
            }
            const differs = [...new Set([...before.keys(), ...after.keys()])].filter(
              (k) => before.get(k) !== after.get(k),
            );
            const rank = SOURCES[step.source] as SourceRank;
            const hints = {
              ...(step.hinted
                ? { changed: new Set([...differs, ...[...before.keys()].slice(0, 1), 'z/never-held']) }
                : {}),
              ...(step.revision === undefined ? {} : { revision: step.revision }),
            };
            table.apply(rank, new Map(before), new Map(after), hints);
            states[step.source] = after;
            if (differs.length > 0) {
              if (after.size === 0) revisions.delete(step.source);
              else revisions.set(step.source, step.revision ?? revisions.get(step.source) ?? '');
            }

            const want = expected(states, semantic, policy);
            const snap = table.snapshot();
            const at = `step ${n + 1}`;
            if (want.served.length === 0) {
              assert.equal(snap, undefined, `${at}: nothing served`);
              lastVersion = undefined;
              lastSnap = undefined;
            } else {
              assert.ok(snap !== undefined, `${at}: a snapshot`);
              assert.equal(snap.kind, KIND);
              assert.equal(snap.resources.length, want.served.length, `${at}: count`);
              snap.resources.forEach((r, i) => assert.equal(r, want.served[i], `${at}: object ${i}`));
              assert.equal(snap.version, digestOf(want.served), `${at}: version`);
              // Generations only ever grow; they move exactly when the content does (after a gap, always).
              if (snap.version === lastVersion)
                assert.equal(snap.generation, lastGeneration, `${at}: same generation`);
              else assert.ok(snap.generation > lastGeneration, `${at}: a new generation`);
              lastVersion = snap.version;
              lastGeneration = snap.generation;
              assert.deepEqual(
                snap.sourceRevisions,
                [...revisions].sort(([x], [y]) => x - y).map(([, r]) => r),
                `${at}: revisions`,
              );
              assert.equal(table.snapshot(), snap, `${at}: reused until the next change`);
              // A change set leading from the last snapshot names exactly what left and what came,
              // each in served order.
              const changes = snap.changes;
              if (changes !== undefined && lastSnap !== undefined && changes.from === lastSnap.serial) {
                const was = new Set(lastSnap.resources);
                const now = new Set(snap.resources);
                assert.ok(
                  sameItems(
                    changes.removed,
                    lastSnap.resources.filter((r) => !now.has(r)),
                  ),
                  `${at}: removed`,
                );
                assert.ok(
                  sameItems(
                    changes.added,
                    snap.resources.filter((r) => !was.has(r)),
                  ),
                  `${at}: added`,
                );
                checkedChanges++;
              }
              lastSnap = snap;
            }
            const conflicts = table.conflicts();
            assert.deepEqual(normalized(conflicts), normalized(want.conflicts), `${at}: conflicts`);
            assert.equal(table.conflicts(), conflicts, `${at}: asked again, the same list, not built again`);
            // A step that leaves every conflict as it was (in the same order) keeps the list.
            if (JSON.stringify(conflicts) === JSON.stringify(lastConflicts))
              assert.equal(conflicts, lastConflicts, `${at}: conflicts unchanged, the same list`);
            lastConflicts = conflicts;
          });
        }),
        { numRuns: 200 },
      );
      assert.ok(checkedChanges > 100, `${checkedChanges} change sets checked`);
    });
  }
});

/** Whether two lists hold the same instances in the same order. */
function sameItems<T>(a: readonly T[], b: readonly T[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
