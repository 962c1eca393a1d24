/**
 * What a view's content costs to follow one change of many objects of a kind:
 *
 *   npm run build && node dist/bench/view-change-cost.js [--objects 50000] [--changes 1000,5000,20000]
 *
 * A kind table holds `--objects` VirtualService-like objects, labelled by zone as the benchmark's
 * fixtures are (east about 40%, edge 2%, west the rest); three views follow it as the ADS server's
 * do: `core` (every zone but edge), `east` and `edge`. Each round changes `n` objects spread over
 * the kind and times `ViewContents.of` per view (median of ten rounds after two); then a content
 * built afresh from the last snapshot, as often, beside it. Prints figures; asserts nothing.
 */
import { makeResource, type ConfigResource } from '../src/core/resource.js';
import { ClientPolicy, policyView } from '../src/downstream/policy/client-policy.js';
import { ViewContents } from '../src/downstream/view-contents.js';
import { KindTable } from '../src/merge/kind-table.js';
import { option } from './in-process.js';

const KIND = 'networking.istio.io/VirtualService';
const OBJECTS = Number(option('objects', '50000'));
const CHANGES = option('changes', '1000,5000,20000').split(',').map(Number);
const ROUNDS = 12;

const zoneOf = (i: number): string => (i % 50 === 0 ? 'edge' : i % 5 < 2 ? 'east' : 'west');
const VIEWS = {
  core: policyView(new ClientPolicy({ name: 'core', deny: { labels: { zone: 'edge' } } }), ''),
  east: policyView(new ClientPolicy({ name: 'east', allow: { labels: { zone: 'east' } } }), ''),
  edge: policyView(new ClientPolicy({ name: 'edge', allow: { labels: { zone: 'edge' } } }), ''),
};

function object(i: number, revision: number): ConfigResource {
  const name = `svc-${String(i).padStart(6, '0')}`;
  return makeResource({
    kind: KIND,
    namespace: 'shop',
    name,
    labels: { zone: zoneOf(i) },
    annotations: {},
    createTime: { seconds: 1_700_000_000, nanos: 0 },
    body: new TextEncoder().encode(`${name} rev ${revision}`),
    origin: {},
  });
}

function median(values: number[]): string {
  const sorted = values.slice(2).sort((a, b) => a - b);
  return (sorted[Math.floor(sorted.length / 2)] ?? 0).toFixed(2);
}

for (const changes of CHANGES) {
  let generation = 0;
  const table = new KindTable(KIND, undefined, 'serve-all', () => ++generation);
  const rank = { name: 'bench', priority: 0, order: 0 };
  let held = new Map<string, ConfigResource>();
  for (let i = 0; i < OBJECTS; i++) held.set(`shop/svc-${String(i).padStart(6, '0')}`, object(i, 0));
  table.apply(rank, new Map(), held);
  const contents = new ViewContents();
  let kind = table.snapshot();
  for (const view of Object.values(VIEWS)) contents.of(view, kind);
  const followed: Record<string, number[]> = { core: [], east: [], edge: [] };
  const afresh: Record<string, number[]> = { core: [], east: [], edge: [] };
  for (let round = 1; round <= ROUNDS; round++) {
    const next = new Map(held);
    for (let j = 0; j < changes; j++) {
      const i = (round * 7919 + j * 9) % OBJECTS;
      next.set(`shop/svc-${String(i).padStart(6, '0')}`, object(i, round));
    }
    table.apply(rank, held, next);
    held = next;
    kind = table.snapshot();
    for (const [name, view] of Object.entries(VIEWS)) {
      const t = performance.now();
      contents.of(view, kind);
      followed[name]?.push(performance.now() - t);
    }
  }
  // Apart from the rounds, whose collections it would otherwise fall in.
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, view] of Object.entries(VIEWS)) {
      const t = performance.now();
      new ViewContents().of(view, kind);
      afresh[name]?.push(performance.now() - t);
    }
  }
  const line = Object.keys(VIEWS)
    .map((name) => `${name} ${median(followed[name] ?? [])} (afresh ${median(afresh[name] ?? [])})`)
    .join(', ');
  console.log(`${changes} of ${OBJECTS} objects changed, ms p50 per view: ${line}`);
}
