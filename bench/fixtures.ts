/**
 * Seeded, deterministic fixtures: the objects of three upstreams (ServiceEntries and
 * VirtualServices, 5% of names defined by two upstreams), the fleet's three policies, the churn
 * mix, and a reference model of what meshmux must serve to each policy. The model encodes its
 * expectation with meshmux's own encoder, so a client's view can be compared byte for byte: a
 * fast wrong answer fails the run.
 */
import { createHash } from 'node:crypto';
import { makeResource } from '../src/core/resource.js';
import { ResourceEncoder } from '../src/downstream/resource-encoder.js';
import { SOURCE_ANNOTATION, SOURCE_VERSION_ANNOTATION } from '../src/merge/source-ledger.js';
import { KINDS, typeUrlOf, type KindDescriptor } from '../src/schema/kinds.js';
import { anyTypeUrl, messageType } from '../src/schema/proto-root.js';
import { McpResourceReader } from '../src/upstream/mcp-resource-reader.js';
import { lengthDelimited } from './wire-scan.js';

/** A benchmark shape: how many objects and istiods. */
export interface Shape {
  /** S and L are the benchmark's; T is the test suite's, small enough for exact counters. */
  readonly name: 'S' | 'L' | 'T';
  readonly serviceEntries: number;
  readonly virtualServices: number;
  /** istiods in the fleet (split evenly over the three policies). */
  readonly clients: number;
  /**
   * istiods for the baselines that re-encode per client. Their cost grows with clients × objects,
   * so a smaller fleet keeps the run short; it flatters them (less to push), never meshmux.
   */
  readonly baselineClients: number;
  /**
   * Zones (and so the views) by namespace instead of by object: the first 40 of the 100
   * namespaces east, the last two edge, as where policies admit whole namespaces. By object (the
   * default), each view's objects lie scattered among the others'.
   */
  readonly zonesByNamespace?: boolean;
}

export const SHAPES: Readonly<Record<'S' | 'L' | 'T', Shape>> = {
  S: { name: 'S', serviceEntries: 10_000, virtualServices: 2_000, clients: 50, baselineClients: 10 },
  L: { name: 'L', serviceEntries: 50_000, virtualServices: 2_000, clients: 200, baselineClients: 5 },
  T: { name: 'T', serviceEntries: 300, virtualServices: 30, clients: 6, baselineClients: 3 },
};

export const UPSTREAMS = 3;
/** Source names in configuration order (earlier wins a name two upstreams define). */
export const SOURCE_NAMES = ['u0', 'u1', 'u2'] as const;

export const SE = KINDS.get('networking.istio.io/ServiceEntry') as KindDescriptor;
export const VS = KINDS.get('networking.istio.io/VirtualService') as KindDescriptor;
export const SE_URL = typeUrlOf(SE, SE.currentVersion);
export const VS_URL = typeUrlOf(VS, VS.currentVersion);
/** Every type URL an istiod ≥1.24 asks for besides MeshConfig. */
export const CONFIG_TYPE_URLS: readonly string[] = KINDS.currentTypeUrls();

export type Zone = 'east' | 'west' | 'edge';
export type PolicyName = 'core' | 'east' | 'edge';
/**
 * The fleet's policies: `core` istiods get everything but the edge's objects (~98%), `east` the
 * objects labelled `zone: east` (~40%), `edge` gateways' istiods only `zone: edge` (~2%, the small view).
 */
export const POLICIES: readonly PolicyName[] = ['core', 'east', 'edge'];

/** Whether a policy's view holds an object of this zone. */
export function admits(policy: PolicyName, zone: Zone): boolean {
  return policy === 'core' ? zone !== 'edge' : policy === zone;
}

/** The policies section of meshmux's configuration for the fleet. */
export function policiesYaml(): string {
  return [
    'policies:',
    '  - name: core',
    '    match: { nodeId: "*~istiod-core-*" }',
    '    deny: { labels: { zone: edge } }',
    '  - name: east',
    '    match: { nodeId: "*~istiod-east-*" }',
    '    allow: { labels: { zone: east } }',
    '  - name: edge',
    '    match: { nodeId: "*~istiod-edge-*" }',
    '    allow: { labels: { zone: edge } }',
  ].join('\n');
}

/** The policy of fleet member `i`. */
export function policyOfClient(i: number): PolicyName {
  return POLICIES[i % POLICIES.length] as PolicyName;
}

/** The node id of fleet member `i` (an istiod in istio-system), matched by the policies above. */
export function nodeIdOfClient(i: number, policy: PolicyName = policyOfClient(i)): string {
  return `sidecar~10.1.${(i >> 8) & 255}.${i & 255}~istiod-${policy}-${i}.istio-system~istio-system.svc.cluster.local`;
}

/** Small, fast, seeded PRNG (mulberry32). */
export class Random {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
}

/** One object as an upstream holds it. Immutable: a change makes a new one. */
export interface FixtureObject {
  readonly kind: KindDescriptor;
  readonly namespace: string;
  readonly name: string;
  readonly zone: Zone;
  /** Content generation: bodies differ per generation. */
  readonly generation: number;
  /** Distinguishes the copies two upstreams hold of one name. */
  readonly variant: number;
  /** `metadata.version`, as a Kubernetes resourceVersion: changes with content. */
  readonly version: string;
  readonly createTime: number;
}

export function keyOf(o: { namespace: string; name: string }): string {
  return `${o.namespace}/${o.name}`;
}

/** The order meshmux serves objects in: namespace, then name. */
function sortKey(o: { namespace: string; name: string }): string {
  return `${o.namespace}\u0000${o.name}`;
}

function zoneOf(r: number): Zone {
  return r < 0.4 ? 'east' : r < 0.98 ? 'west' : 'edge';
}

/** Objects spread over this many namespaces, `ns-000` to `ns-099`. */
const NAMESPACES = 100;

function namespaceOf(n: number): string {
  return `ns-${String(n % NAMESPACES).padStart(3, '0')}`;
}

const SE_TYPE = messageType(SE.bodyType);
const VS_TYPE = messageType(VS.bodyType);

function octet(n: number): number {
  return Math.abs(n) % 250;
}

/** The body of an object: a function of its identity, generation and variant only. */
function encodeBody(o: FixtureObject): Uint8Array {
  const seed = hashString(`${o.name}|${o.generation}|${o.variant}`);
  if (o.kind === SE) {
    const endpoints = [0, 1, 2].map((e) => ({
      address: `10.${octet(seed + e)}.${octet(seed >> 8)}.${octet(seed >> 16) + e}`,
      ports: { http: 8080, grpc: 9090 },
      labels: { app: o.name, version: `v${(seed >> (e + 3)) & 3}` },
      locality: `${o.zone}/zone-${e}`,
      network: 'net-1',
    }));
    return SE_TYPE.encode(
      SE_TYPE.fromObject({
        hosts: [`${o.name}.${o.namespace}.svc.example.com`],
        ports: [
          { number: 8080, protocol: 'HTTP', name: 'http' },
          { number: 9090, protocol: 'GRPC', name: 'grpc' },
        ],
        location: 'MESH_INTERNAL',
        resolution: 'STATIC',
        endpoints,
        export_to: ['*'],
      }),
    ).finish();
  }
  const weight = 10 + (seed % 80);
  return VS_TYPE.encode(
    VS_TYPE.fromObject({
      hosts: [`${o.name}.${o.namespace}.svc.example.com`],
      http: [
        {
          name: 'primary',
          match: [{ uri: { prefix: `/api/${o.name}` } }],
          route: [
            { destination: { host: `${o.name}-v1.${o.namespace}.svc.example.com`, subset: 'v1' }, weight },
            {
              destination: { host: `${o.name}-v2.${o.namespace}.svc.example.com`, subset: 'v2' },
              weight: 100 - weight,
            },
          ],
          timeout: { seconds: 5 },
        },
      ],
    }),
  ).finish();
}

function hashString(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

const MCP_RESOURCE_URL = anyTypeUrl('istio.mcp.v1alpha1.Resource');

function anyOf(typeUrl: string, value: Uint8Array): Uint8Array {
  return Buffer.concat([lengthDelimited(1, new TextEncoder().encode(typeUrl)), lengthDelimited(2, value)]);
}

/** Encodes what the benchmark needs of each object once per object version. */
class Encodings {
  private readonly bodies = new WeakMap<FixtureObject, Uint8Array>();
  private readonly upstream = new WeakMap<FixtureObject, Uint8Array>();
  private readonly served = new WeakMap<FixtureObject, Uint8Array>();
  private readonly encoder = new ResourceEncoder(KINDS, { maxCacheBytes: 1 });
  private readonly text = new TextEncoder();
  /** meshmux's own reader of upstream objects, so the expectation follows what it keeps of them. */
  private readonly reader = new McpResourceReader({
    defaultNamespace: 'default',
    origin: 'bench',
    cacheBytes: 1,
  });

  body(o: FixtureObject): Uint8Array {
    let b = this.bodies.get(o);
    if (b === undefined) this.bodies.set(o, (b = encodeBody(o)));
    return b;
  }

  /** The object as an upstream sends it: one `resources` entry, `Any(istio.mcp.v1alpha1.Resource)`. */
  upstreamFrame(o: FixtureObject): Uint8Array {
    let f = this.upstream.get(o);
    if (f !== undefined) return f;
    const ts = lengthDelimited(2, Buffer.from([0x08, ...varint(o.createTime)]));
    const meta = Buffer.concat([
      lengthDelimited(1, this.text.encode(keyOf(o))),
      ts,
      lengthDelimited(3, this.text.encode(o.version)),
      ...Object.entries(labelsOf(o)).map(([k, v]) =>
        lengthDelimited(
          4,
          Buffer.concat([lengthDelimited(1, this.text.encode(k)), lengthDelimited(2, this.text.encode(v))]),
        ),
      ),
    ]);
    const resource = Buffer.concat([
      lengthDelimited(1, meta),
      lengthDelimited(2, anyOf(anyTypeUrl(o.kind.bodyType), this.body(o))),
    ]);
    f = lengthDelimited(2, anyOf(MCP_RESOURCE_URL, resource));
    this.upstream.set(o, f);
    return f;
  }

  /** The object as meshmux must serve it from `source`: provenance annotations added, meshmux's encoding. */
  servedFrame(o: FixtureObject, source: string): Uint8Array {
    let f = this.served.get(o);
    if (f !== undefined) return f;
    // The upstream entry's value is the MCP Resource: skip tag and length of field 2, then the Any.
    const read = this.reader.read(o.kind, mcpResourceOf(this.upstreamFrame(o)), 'bench');
    if (!read.ok) throw new Error(`fixture ${keyOf(o)} does not read: ${read.error.message}`);
    const r = read.resource;
    // What the merge adds: the source's name and its version of the object.
    const resource = makeResource({
      ...r,
      annotations: {
        ...r.annotations,
        [SOURCE_ANNOTATION]: source,
        [SOURCE_VERSION_ANNOTATION]: r.origin.upstreamVersion ?? r.version,
      },
    });
    f = this.encoder.framed(resource);
    this.served.set(o, f);
    return f;
  }
}

/** The `istio.mcp.v1alpha1.Resource` bytes inside one framed `resources` entry. */
function mcpResourceOf(frame: Uint8Array): Uint8Array {
  let pos = 1;
  while ((frame[pos++] ?? 0) >= 0x80);
  // Inside the Any: field 1 (type URL), then field 2 (value).
  pos++;
  let length = 0;
  let shift = 0;
  for (;;) {
    const b = frame[pos++] ?? 0;
    length += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if (b < 0x80) break;
  }
  pos += length + 1;
  while ((frame[pos++] ?? 0) >= 0x80);
  return frame.subarray(pos);
}

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

function labelsOf(o: FixtureObject): Record<string, string> {
  return { app: o.name, zone: o.zone };
}

/** What a change did, as the fleet must see it. */
export interface AppliedChange {
  readonly upstream: number;
  readonly kind: KindDescriptor;
  readonly key: string;
  readonly op: ChangeOp;
  /** Policies whose view of the kind changed. */
  readonly affected: ReadonlySet<PolicyName>;
  /**
   * Some view now holds an object version it did not hold before: the changed object, or, when
   * the change deleted the winner, another upstream's object of the same name. What encodes
   * are counted against.
   */
  readonly servesNew: boolean;
}

export type ChangeOp = 'endpoints' | 'route' | 'label' | 'add' | 'delete';

/** One edit of an upstream's objects: an object set (new, or replacing its name) or a name deleted. */
export type ObjectEdit =
  | { readonly upstream: number; readonly set: FixtureObject }
  | { readonly upstream: number; readonly kind: KindDescriptor; readonly deleted: string };

/** The objects of one upstream, per kind, with a key index for random picks. */
class UpstreamObjects {
  readonly byKind = new Map<KindDescriptor, Map<string, FixtureObject>>([
    [SE, new Map()],
    [VS, new Map()],
  ]);
  private readonly keys = new Map<KindDescriptor, string[]>([
    [SE, []],
    [VS, []],
  ]);
  private readonly position = new Map<KindDescriptor, Map<string, number>>([
    [SE, new Map()],
    [VS, new Map()],
  ]);
  versionCounter = 1;
  /** Grows with every set and delete: the reference views are recomputed only after a change. */
  mutations = 0;

  constructor(
    readonly index: number,
    private readonly edited: (edit: ObjectEdit) => void,
  ) {}

  get(kind: KindDescriptor, key: string): FixtureObject | undefined {
    return this.byKind.get(kind)?.get(key);
  }

  set(o: FixtureObject): void {
    this.mutations++;
    const key = keyOf(o);
    const map = this.byKind.get(o.kind) as Map<string, FixtureObject>;
    if (!map.has(key)) {
      const keys = this.keys.get(o.kind) as string[];
      (this.position.get(o.kind) as Map<string, number>).set(key, keys.length);
      keys.push(key);
    }
    map.set(key, o);
    this.edited({ upstream: this.index, set: o });
  }

  delete(kind: KindDescriptor, key: string): void {
    const map = this.byKind.get(kind) as Map<string, FixtureObject>;
    if (!map.delete(key)) return;
    this.mutations++;
    this.edited({ upstream: this.index, kind, deleted: key });
    const keys = this.keys.get(kind) as string[];
    const positions = this.position.get(kind) as Map<string, number>;
    const at = positions.get(key) as number;
    const last = keys.pop() as string;
    positions.delete(key);
    if (last !== key) {
      keys[at] = last;
      positions.set(last, at);
    }
  }

  randomKey(kind: KindDescriptor, rng: Random): string | undefined {
    const keys = this.keys.get(kind) as string[];
    return keys.length === 0 ? undefined : keys[rng.int(keys.length)];
  }

  nextVersion(): string {
    return `${this.index + 1}${String(++this.versionCounter).padStart(7, '0')}`;
  }
}

/**
 * The three upstreams' objects and the merge meshmux must make of them: for each name, the
 * object of the first upstream in configuration order that defines it, filtered per policy.
 */
export class MeshModel {
  readonly upstreams: readonly UpstreamObjects[];
  readonly encodings = new Encodings();
  private readonly rng: Random;
  private added = 0;
  /**
   * Called after every edit of an upstream's objects made once the model is built: what a copy
   * built from the same seed needs to stay in step (see {@link applyEdit}).
   */
  onEdit: (edit: ObjectEdit) => void = () => undefined;

  constructor(
    readonly shape: Shape,
    readonly seed = 20260822,
  ) {
    this.rng = new Random(seed);
    this.upstreams = Array.from(
      { length: UPSTREAMS },
      (_, i) => new UpstreamObjects(i, (e) => this.onEdit(e)),
    );
    const create = 1_700_000_000;
    const place = (kind: KindDescriptor, i: number, prefix: string): void => {
      const zone = this.zoneFor(i);
      const base = {
        kind,
        namespace: namespaceOf(i),
        name: `${prefix}-${String(i).padStart(6, '0')}`,
        zone,
        generation: 0,
        createTime: create + (i % 1000),
      };
      const home = i % UPSTREAMS;
      const u = this.upstreams[home] as UpstreamObjects;
      u.set({ ...base, variant: home, version: u.nextVersion() });
      // 5% of names are also defined by the next upstream, with other content.
      if (i % 20 === 7) {
        const other = this.upstreams[(home + 1) % UPSTREAMS] as UpstreamObjects;
        other.set({ ...base, variant: other.index, version: other.nextVersion() });
      }
    };
    for (let i = 0; i < shape.serviceEntries; i++) place(SE, i, 'se');
    for (let i = 0; i < shape.virtualServices; i++) place(VS, i, 'vs');
  }

  /**
   * The zone of the `n`th object placed or added: drawn (the draw made either way, so the rest of
   * the model is the same), or its namespace's with `zonesByNamespace`.
   */
  private zoneFor(n: number): Zone {
    const drawn = zoneOf(this.rng.next());
    return this.shape.zonesByNamespace === true ? zoneOf((n % NAMESPACES) / NAMESPACES) : drawn;
  }

  /** Makes an edit another model made (a copy of this one kept in step). */
  applyEdit(edit: ObjectEdit): void {
    const objects = this.upstreams[edit.upstream] as UpstreamObjects;
    if ('set' in edit) objects.set(edit.set);
    else objects.delete(edit.kind, edit.deleted);
  }

  /** The object served under a name, and the upstream it comes from. */
  winner(kind: KindDescriptor, key: string): { upstream: number; object: FixtureObject } | undefined {
    for (const u of this.upstreams) {
      const o = u.get(kind, key);
      if (o !== undefined) return { upstream: u.index, object: o };
    }
    return undefined;
  }

  /** Served objects of a kind, in served order, with their source. */
  private served(kind: KindDescriptor): Array<{ upstream: number; object: FixtureObject }> {
    const out = new Map<string, { upstream: number; object: FixtureObject }>();
    for (const u of this.upstreams) {
      for (const [key, object] of u.byKind.get(kind) ?? []) {
        if (!out.has(key)) out.set(key, { upstream: u.index, object });
      }
    }
    return [...out.values()]
      .map((w) => ({ ...w, sk: sortKey(w.object) }))
      .sort((a, b) => (a.sk < b.sk ? -1 : a.sk > b.sk ? 1 : 0));
  }

  /** The exact `resources` bytes a client of `policy` must hold for a type URL. */
  expectedBytes(policy: PolicyName, typeUrl: string): Buffer {
    const kind = typeUrl === SE_URL ? SE : typeUrl === VS_URL ? VS : undefined;
    if (kind === undefined) return Buffer.alloc(0);
    const frames = this.served(kind)
      .filter((w) => admits(policy, w.object.zone))
      .map((w) => this.encodings.servedFrame(w.object, SOURCE_NAMES[w.upstream] as string));
    return Buffer.concat(frames);
  }

  /** Per policy and type URL, the digest of the entries a client must hold (see {@link entriesDigest}). */
  expectedDigests(): Map<PolicyName, Map<string, string>> {
    const stamp = this.upstreams.reduce((n, u) => n + u.mutations, 0);
    if (this.digests?.stamp !== stamp) this.digests = { stamp, value: this.computeDigests() };
    return this.digests.value;
  }

  private digests: { stamp: number; value: Map<PolicyName, Map<string, string>> } | undefined;

  private computeDigests(): Map<PolicyName, Map<string, string>> {
    const out = new Map<PolicyName, Map<string, string>>();
    const empty = digestOf(Buffer.alloc(0));
    for (const policy of POLICIES) {
      const perType = new Map<string, string>();
      for (const url of CONFIG_TYPE_URLS) {
        perType.set(
          url,
          url === SE_URL || url === VS_URL ? entriesDigest(this.expectedBytes(policy, url)) : empty,
        );
      }
      out.set(policy, perType);
    }
    return out;
  }

  /** Objects held by an upstream, for its full-state responses. */
  objects(upstream: number, kind: KindDescriptor): Iterable<FixtureObject> {
    return (this.upstreams[upstream] as UpstreamObjects).byKind.get(kind)?.values() ?? [];
  }

  /** Total objects served (after precedence). */
  servedCount(): number {
    return this.served(SE).length + this.served(VS).length;
  }

  /** Objects of `kind` a client of `policy` holds. */
  expectedCount(policy: PolicyName, kind: KindDescriptor): number {
    return this.served(kind).filter((w) => admits(policy, w.object.zone)).length;
  }

  /** Picks a change of the churn mix (50% endpoints, 10% routes, 20% label moves, 10% adds, 10% deletes) and applies it. */
  churnChange(): AppliedChange {
    const r = this.rng.next();
    const op: ChangeOp =
      r < 0.5 ? 'endpoints' : r < 0.6 ? 'route' : r < 0.8 ? 'label' : r < 0.9 ? 'add' : 'delete';
    return this.change(op, this.rng.int(UPSTREAMS));
  }

  /** Applies one change of `op` to a random object of `upstream` (or a new one for `add`). */
  change(op: ChangeOp, upstream: number, pick?: { kind: KindDescriptor; key: string }): AppliedChange {
    const u = this.upstreams[upstream] as UpstreamObjects;
    const kind = op === 'route' ? VS : SE;
    if (op === 'add') {
      const n = this.added++;
      const o: FixtureObject = {
        kind,
        namespace: namespaceOf(n),
        name: `se-new-${String(n).padStart(6, '0')}`,
        zone: this.zoneFor(n),
        generation: 0,
        variant: upstream,
        version: u.nextVersion(),
        createTime: 1_700_100_000 + n,
      };
      return this.mutate(upstream, kind, keyOf(o), () => u.set(o), op);
    }
    const key = pick?.key ?? u.randomKey(kind, this.rng);
    const current = key === undefined ? undefined : u.get(pick?.kind ?? kind, key);
    if (key === undefined || current === undefined) return this.change('add', upstream);
    if (op === 'delete')
      return this.mutate(upstream, current.kind, key, () => u.delete(current.kind, key), op);
    const zones: Zone[] = ['east', 'west', 'edge'];
    const zone =
      op === 'label' ? (zones.filter((z) => z !== current.zone)[this.rng.int(2)] as Zone) : current.zone;
    const next: FixtureObject = {
      ...current,
      zone,
      generation: current.generation + 1,
      version: u.nextVersion(),
    };
    return this.mutate(upstream, current.kind, key, () => u.set(next), op);
  }

  /** A served object of a zone, for isolated changes that must reach a given view. */
  servedInZone(zone: Zone): { upstream: number; kind: KindDescriptor; key: string } {
    for (let tries = 0; tries < 10_000; tries++) {
      const upstream = this.rng.int(UPSTREAMS);
      const key = (this.upstreams[upstream] as UpstreamObjects).randomKey(SE, this.rng);
      if (key === undefined) continue;
      const w = this.winner(SE, key);
      if (w !== undefined && w.upstream === upstream && w.object.zone === zone)
        return { upstream, kind: SE, key };
    }
    throw new Error(`no served object in zone ${zone}`);
  }

  /** Edits the endpoints of `share` of one upstream's objects without telling anyone; returns the changes. */
  editShare(share: number, upstream: number): AppliedChange[] {
    const out: AppliedChange[] = [];
    for (const u of this.upstreams.filter((x) => x.index === upstream)) {
      const keys = [...(u.byKind.get(SE) ?? new Map<string, FixtureObject>()).keys()];
      const n = Math.round(keys.length * share);
      for (let i = 0; i < n; i++) {
        const key = keys[this.rng.int(keys.length)] as string;
        out.push(this.change('endpoints', u.index, { kind: SE, key }));
      }
    }
    return out;
  }

  private mutate(
    upstream: number,
    kind: KindDescriptor,
    key: string,
    apply: () => void,
    op: ChangeOp,
  ): AppliedChange {
    const before = this.winner(kind, key);
    apply();
    const after = this.winner(kind, key);
    const affected = new Set<PolicyName>();
    if (before?.object !== after?.object) {
      for (const p of POLICIES) {
        const had = before !== undefined && admits(p, before.object.zone);
        const has = after !== undefined && admits(p, after.object.zone);
        if (had || has) affected.add(p);
      }
    }
    const servesNew =
      after !== undefined &&
      before?.object !== after.object &&
      POLICIES.some((p) => admits(p, after.object.zone));
    return { upstream, kind, key, op, affected, servesNew };
  }
}

/** The tag of a DiscoveryResponse's `resources` entry: field 2, length-delimited. */
const RESOURCES_TAG = 0x12;

/**
 * The SHA-256 (base64url) of the `resources` entries in `bytes` (each with its tag and length, as
 * a response carries them) taken in the order of their bytes: which entries a client holds, not
 * the order they came in. istiod keeps a response's objects by name, whatever their order, and
 * meshmux sends a view's objects part by part (the parts its views share), not by name.
 */
export function entriesDigest(bytes: Uint8Array | readonly Uint8Array[]): string {
  const all = Buffer.concat(bytes instanceof Uint8Array ? [bytes] : bytes);
  const entries: Buffer[] = [];
  for (let at = 0; at < all.length;) {
    const start = at;
    if (all[at++] !== RESOURCES_TAG) throw new Error(`no resources entry at byte ${start}`);
    let length = 0;
    for (let shift = 0; ; shift += 7) {
      const b = all[at++];
      if (b === undefined) throw new Error(`an entry's length runs past the end at byte ${start}`);
      length += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    at += length;
    if (at > all.length) throw new Error(`an entry runs past the end at byte ${start}`);
    entries.push(all.subarray(start, at));
  }
  entries.sort((a, b) => Buffer.compare(a, b));
  return digestOf(entries);
}

/** SHA-256 of bytes, base64url. */
export function digestOf(bytes: Uint8Array | readonly Uint8Array[]): string {
  const hash = createHash('sha256');
  for (const piece of bytes instanceof Uint8Array ? [bytes] : bytes) hash.update(piece);
  return hash.digest('base64url');
}
