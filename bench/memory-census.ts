/**
 * Where meshmux's memory goes, per served object:
 *
 *   npm run build && node dist/bench/memory-census.js [--shape S|L] [--zones object|namespace] [--keep]
 *
 * The benchmark's upstreams hold a shape's objects; meshmux runs as shipped in a process of its
 * own with one istiod of each view, and once they hold what the model says and the server's memory
 * has settled (20 to 45 s), a heap snapshot of the server is taken (after a full collection) and
 * read here. Printed: the RSS that neither V8's heap
 * nor Node's buffers account for, against the idle process's; the heap's objects by kind and
 * constructor, with their count per served object; the memory of array buffers (upstream bytes,
 * blocks of framed objects, kept responses) by the property that holds their views; arrays,
 * strings and objects by the property holding them; and how much of the strings' memory repeats
 * content another string already has, and where. `--zones namespace` puts whole namespaces in
 * one zone (views admitting whole namespaces; by object, the default, each view's objects lie
 * scattered among the others'). `--keep` leaves the snapshot
 * file for a closer look in a browser's developer tools.
 */
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SHAPES, type PolicyName } from './fixtures.js';
import { Fleet } from './fleet.js';
import { option } from './in-process.js';
import { ShapeRig } from './phases.js';
import type { RetainedMemory } from './server-main.js';
import { pinSelf, ServerProcess } from './server-process.js';
import { settledMemory } from './settled-memory.js';

interface HeapSnapshot {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: readonly string[];
      readonly node_types: readonly [readonly string[], ...unknown[]];
      readonly edge_fields: readonly string[];
      readonly edge_types: readonly [readonly string[], ...unknown[]];
    };
  };
  readonly nodes: readonly number[];
  readonly edges: readonly number[];
  readonly strings: readonly string[];
}

/** A snapshot's nodes, with each one's first retainer that is not an internal edge. */
class HeapGraph {
  readonly count: number;
  private readonly nodeWidth: number;
  private readonly at: { type: number; name: number; size: number; edges: number };
  private readonly nodeTypes: readonly string[];
  /** Per node: the retaining node and the name of the property, or -1. */
  readonly retainer: Int32Array;
  readonly retainerEdge: string[];
  /** Per array buffer: the typed arrays and buffers that view it. */
  private readonly views = new Map<number, number[]>();

  constructor(private readonly snap: HeapSnapshot) {
    const { meta } = snap.snapshot;
    this.nodeWidth = meta.node_fields.length;
    this.at = {
      type: meta.node_fields.indexOf('type'),
      name: meta.node_fields.indexOf('name'),
      size: meta.node_fields.indexOf('self_size'),
      edges: meta.node_fields.indexOf('edge_count'),
    };
    this.nodeTypes = meta.node_types[0];
    this.count = snap.nodes.length / this.nodeWidth;
    this.retainer = new Int32Array(this.count).fill(-1);
    this.retainerEdge = new Array<string>(this.count).fill('');
    const edgeWidth = meta.edge_fields.length;
    const edgeType = meta.edge_fields.indexOf('type');
    const edgeName = meta.edge_fields.indexOf('name_or_index');
    const edgeTo = meta.edge_fields.indexOf('to_node');
    const edgeTypes = meta.edge_types[0];
    let e = 0;
    for (let i = 0; i < this.count; i++) {
      const edges = snap.nodes[i * this.nodeWidth + this.at.edges] ?? 0;
      for (let k = 0; k < edges; k++, e += edgeWidth) {
        const kind = edgeTypes[snap.edges[e + edgeType] ?? 0];
        if (kind !== 'property' && kind !== 'element' && kind !== 'internal') continue;
        const to = (snap.edges[e + edgeTo] ?? 0) / this.nodeWidth;
        if (kind === 'property' && snap.strings[snap.edges[e + edgeName] ?? 0] === 'buffer') {
          const list = this.views.get(to) ?? [];
          list.push(i);
          this.views.set(to, list);
        }
        // A property edge wins over an element or internal one found earlier.
        if (this.retainer[to] !== -1 && (kind !== 'property' || this.retainerEdge[to] !== '')) continue;
        this.retainer[to] = i;
        this.retainerEdge[to] =
          kind === 'property' ? (snap.strings[snap.edges[e + edgeName] ?? 0] ?? '') : '';
      }
    }
  }

  private ownerName(i: number): string {
    const name = this.name(i);
    return name === 'Object' ? '{…}' : name;
  }

  type(i: number): string {
    return this.nodeTypes[this.snap.nodes[i * this.nodeWidth + this.at.type] ?? 0] ?? '?';
  }
  name(i: number): string {
    return this.snap.strings[this.snap.nodes[i * this.nodeWidth + this.at.name] ?? 0] ?? '';
  }
  size(i: number): number {
    return this.snap.nodes[i * this.nodeWidth + this.at.size] ?? 0;
  }

  /**
   * `Owner.property` holding the memory of array buffer data `i`: the property holding one of the
   * buffer's views directly (a block's own buffer, say, rather than a slice of it kept in a weak
   * map), else the first property edge on the way up (a few steps at most).
   */
  holder(i: number): string {
    const arrayBuffer = this.retainer[i] ?? -1;
    for (const view of this.views.get(arrayBuffer) ?? []) {
      const edge = this.retainerEdge[view] ?? '';
      const up = this.retainer[view] ?? -1;
      if (edge !== '' && up !== -1) return `${this.ownerName(up)}.${edge}`;
    }
    let node = i;
    for (let step = 0; step < 6; step++) {
      const up = this.retainer[node] ?? -1;
      if (up === -1) break;
      const edge = this.retainerEdge[node] ?? '';
      if (edge !== '' && !['buffer', 'backing_store'].includes(edge)) return `${this.ownerName(up)}.${edge}`;
      node = up;
    }
    return '(elsewhere)';
  }
}

const zones = option('zones', 'object');
if (zones !== 'object' && zones !== 'namespace') throw new Error(`--zones ${zones}: object or namespace`);
const shape = {
  ...SHAPES[option('shape', 'S') === 'L' ? 'L' : 'S'],
  ...(zones === 'namespace' ? { zonesByNamespace: true } : {}),
};
const keep = process.argv.includes('--keep');
const MB = (bytes: number): string => (bytes / 1e6).toFixed(2).padStart(8);

pinSelf(1);
const folder = await mkdtemp(path.join(tmpdir(), 'meshmux-census-'));
const rig = new ShapeRig(shape);
await rig.start();
const server = await ServerProcess.start({ mode: 'meshmux', shape: shape.name, upstreams: rig.addresses });
const policies: PolicyName[] = ['edge', 'core', 'east'];
const fleets = policies.map((policy, i) => new Fleet(server.xdsAddress, 1, { first: i, policy }).start());
let file: string;
try {
  for (const f of fleets) {
    await f.until(() => f.mismatches(rig.model.expectedDigests()).length === 0, 300_000, 'the first sync');
  }
  // Read once settled: right after the sync, V8 still holds the young generation it grew and the
  // pages it emptied, some 20 MB whatever the number of objects.
  const { reading: retained, afterMs } = await settledMemory(() => server.memory());
  file = await server.heapSnapshot(path.join(folder, `meshmux-${shape.name}.heapsnapshot`));
  const objects = rig.model.servedCount();
  console.log(
    `${shape.name}: ${objects} objects served, istiods of ${policies.join(', ')}; settled after ${(afterMs / 1000).toFixed(0)} s: heap ${MB(retained.heapUsedBytes).trim()} MB, external ${MB(retained.externalBytes).trim()} MB, RSS ${MB(retained.rssBytes).trim()} MB`,
  );
  // What neither V8's heap nor Node's buffers account for: the program itself, thread stacks and
  // the malloc heaps' own use, and memory malloc holds free without giving it back (it returns
  // memory only from the top of a heap, so what is freed under live allocations stays resident).
  const outside = (m: RetainedMemory): number => m.rssBytes - m.heapTotalBytes - m.externalBytes;
  console.log(
    `RSS outside V8's heap and Node's buffers: ${MB(outside(retained)).trim()} MB, ${MB(outside(retained) - outside(server.base)).trim()} MB more than the idle process; V8's heap committed ${MB(retained.heapTotalBytes).trim()} MB`,
  );
  const graph = new HeapGraph(JSON.parse(await readFile(file, 'utf8')) as HeapSnapshot);

  const byKind = new Map<string, { count: number; bytes: number }>();
  const buffers = new Map<string, { count: number; bytes: number }>();
  const arrays = new Map<string, { count: number; bytes: number }>();
  const stringHolders = new Map<string, { count: number; bytes: number }>();
  const objectHolders = new Map<string, { count: number; bytes: number }>();
  const strings = new Map<string, number>();
  const repeatHolders = new Map<string, { count: number; bytes: number }>();
  let stringBytes = 0;
  let repeatedBytes = 0;
  const add = (map: Map<string, { count: number; bytes: number }>, key: string, bytes: number): void => {
    const row = map.get(key) ?? { count: 0, bytes: 0 };
    row.count++;
    row.bytes += bytes;
    map.set(key, row);
  };
  for (let i = 0; i < graph.count; i++) {
    const type = graph.type(i);
    const size = graph.size(i);
    if (type === 'string' || type === 'concatenated string' || type === 'sliced string') {
      stringBytes += size;
      const text = graph.name(i);
      if (strings.has(text)) {
        repeatedBytes += size;
        add(repeatHolders, graph.holder(i), size);
      } else strings.set(text, size);
      add(byKind, type, size);
      add(stringHolders, graph.holder(i), size);
      continue;
    }
    add(byKind, type === 'object' || type === 'native' ? `${type} ${graph.name(i)}` : type, size);
    if (graph.name(i) === 'system / JSArrayBufferData') add(buffers, graph.holder(i), size);
    else if (type === 'array') add(arrays, graph.holder(i), size);
    else if (type === 'object') add(objectHolders, `${graph.name(i)} in ${graph.holder(i)}`, size);
  }
  const table = (title: string, map: Map<string, { count: number; bytes: number }>, rows: number): void => {
    console.log(`\n${title}\n      MB    count  per object`);
    for (const [key, { count, bytes }] of [...map].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, rows))
      console.log(
        `${MB(bytes)} ${String(count).padStart(8)} ${(count / objects).toFixed(2).padStart(10)}  ${key}`,
      );
  };
  table('heap and external memory by kind of node (self sizes)', byKind, 25);
  table('array buffer memory by the property holding it', buffers, 15);
  table('arrays (hash tables, elements, property stores) by the property holding them', arrays, 20);
  table('strings by the property holding them', stringHolders, 20);
  table('objects by constructor and the property holding them', objectHolders, 20);
  table('strings whose content another string has already, by the property holding them', repeatHolders, 10);
  console.log(
    `\nstrings: ${MB(stringBytes).trim()} MB, of which ${MB(repeatedBytes).trim()} MB repeat the content of another string`,
  );
} finally {
  for (const f of fleets) f.close();
  await server.stop();
  await rig.close();
  if (!keep) await rm(folder, { recursive: true, force: true });
}
if (keep) console.log(`\nthe snapshot: ${file}`);
