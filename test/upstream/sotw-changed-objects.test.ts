import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import { messageType } from '../../src/schema/proto-root.js';
import { SubscriptionState } from '../../src/upstream/streaming/subscription-state.js';
import { ResponseLayout } from '../../src/upstream/xds/discovery-response.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { fakeVirtualService, kindNamed } from '../support/fake-objects.js';
import { bareBodyAny, discoveryResponse, mcpAny, type RawAny } from '../support/faulty-responses.js';
import { syncedXdsSource, type SourceEventRecorder } from '../support/source-event-recorder.js';

const VS_V1 = 'networking.istio.io/v1/VirtualService';
const VS = 'networking.istio.io/VirtualService';
const VS_KIND = kindNamed('VirtualService');
const VS_BODY = messageType(VS_KIND.bodyType);

/**
 * One entry of a response: a good object at some generation (its host says which); the same name
 * with an annotation istiod refuses or with a body that does not decode (each dropped alone, its
 * previous version kept); a bare body instead of an MCP Resource, or an envelope without a usable
 * name (each makes the whole response refused).
 */
type Entry =
  | { readonly is: 'good'; readonly name: string; readonly generation: number }
  | { readonly is: 'refused-annotation' | 'garbage-body' | 'bare-body' | 'no-name'; readonly name: string };

const encodedAnys = new Map<string, RawAny>();

function anyOf(entry: Entry): RawAny {
  const key = JSON.stringify(entry);
  let any = encodedAnys.get(key);
  if (any !== undefined) return any;
  const object = fakeVirtualService(
    entry.name,
    `${entry.name}.g${entry.is === 'good' ? entry.generation : 0}`,
  );
  if (entry.is === 'good') any = mcpAny(VS_KIND, object);
  else if (entry.is === 'refused-annotation')
    any = mcpAny(VS_KIND, { ...object, annotations: { 'internal.istio.io/webhook-always-reject': 'true' } });
  else if (entry.is === 'bare-body') any = bareBodyAny(VS_KIND, object);
  else if (entry.is === 'no-name') any = mcpAny(VS_KIND, { ...object, name: '' });
  else any = mcpAny(VS_KIND, { ...object, rawBody: Uint8Array.from([0x0a, 0x7f]) });
  encodedAnys.set(key, any);
  return any;
}

/**
 * What the source must serve after a response, given what it served before: the rules every
 * state-of-the-world response is judged by, written out plainly (name → generation).
 */
function expectedAfter(
  served: ReadonlyMap<string, number>,
  entries: readonly Entry[],
): { served: Map<string, number>; acked: boolean } {
  if (entries.some((e) => e.is === 'bare-body' || e.is === 'no-name')) {
    return { served: new Map(served), acked: false };
  }
  const next = new Map<string, number>();
  const dropped = new Set<string>();
  for (const e of entries) {
    if (e.is === 'good') {
      next.set(e.name, e.generation);
      dropped.delete(e.name);
    } else {
      next.delete(e.name);
      dropped.add(e.name);
    }
  }
  for (const name of dropped) {
    const previous = served.get(name);
    if (previous !== undefined) next.set(name, previous);
  }
  return { served: next, acked: dropped.size === 0 };
}

/** A state of good objects, then changes to it: each step's response is one of them. */
const names = (count: number): string[] => Array.from({ length: count }, (_, i) => `vs-${i}`);

type Edit =
  | { readonly op: 'change' | 'remove'; readonly at: number }
  | { readonly op: 'insert'; readonly at: number; readonly name: string }
  | {
      readonly op: 'duplicate' | 'refused-annotation' | 'garbage-body' | 'bare-body' | 'no-name';
      readonly at: number;
    };

const edit: fc.Arbitrary<Edit> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({ op: fc.constantFrom('change' as const, 'remove' as const), at: fc.nat() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('insert' as const),
      at: fc.nat(),
      name: fc.constantFrom(...names(40).map((n) => `new-${n}`)),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constantFrom(
        'duplicate' as const,
        'refused-annotation' as const,
        'garbage-body' as const,
        'bare-body' as const,
        'no-name' as const,
      ),
      at: fc.nat(),
    }),
  },
);

/**
 * Applies edits: changes, removals and insertions also change the base the next step starts from;
 * the faults (a name twice, a refused annotation, an undecodable body, a wrong Any, no usable name) are in this
 * response only, as an upstream fixing its mistake would send.
 */
function applyEdits(
  base: Entry[],
  edits: readonly Edit[],
  generation: number,
): { base: Entry[]; sent: Entry[] } {
  const next = [...base];
  const faults: Array<{ at: number; entry: Entry }> = [];
  for (const e of edits) {
    if (next.length === 0 && e.op !== 'insert') continue;
    const at = e.at % Math.max(1, next.length);
    const target = next[at];
    if (e.op === 'change') {
      if (target !== undefined) next[at] = { is: 'good', name: target.name, generation };
    } else if (e.op === 'remove') next.splice(at, 1);
    else if (e.op === 'insert') {
      if (!next.some((x) => x.name === e.name)) next.splice(at, 0, { is: 'good', name: e.name, generation });
    } else if (target !== undefined) {
      faults.push({ at, entry: e.op === 'duplicate' ? { ...target } : { is: e.op, name: target.name } });
    }
  }
  const sent = [...next];
  for (const f of faults.sort((a, b) => b.at - a.at)) sent.splice(f.at + 1, 0, f.entry);
  return { base: next, sent };
}

function generationOf(resource: ConfigResource): number {
  const body = VS_BODY.toObject(VS_BODY.decode(resource.body)) as { hosts?: string[] };
  return Number(/\.g(\d+)$/.exec(body.hosts?.[0] ?? '')?.[1]);
}

describe('an xds source reading state-of-the-world responses by what changed', () => {
  let fake: FakeAdsServer;
  let recorder: SourceEventRecorder;
  let nonces = 0;
  const patches = { taken: 0, declined: 0 };
  const applyPatch = Object.getOwnPropertyDescriptor(SubscriptionState.prototype, 'applyPatch')?.value as (
    ...args: unknown[]
  ) => boolean;

  before(async () => {
    // Counts how often a response was applied as a change of the last state, so the property
    // below is known to cover that path and not only the full one.
    SubscriptionState.prototype.applyPatch = function (this: SubscriptionState, ...args: unknown[]): boolean {
      const taken = applyPatch.apply(this, args);
      if (taken) patches.taken++;
      else patches.declined++;
      return taken;
    };
    fake = await FakeAdsServer.start({ peer: 'istiod' });
    fake.set('VirtualService', []);
    recorder = await syncedXdsSource(fake.address, ['VirtualService']);
  });
  after(async () => {
    SubscriptionState.prototype.applyPatch = applyPatch;
    recorder.close();
    await fake.stop();
  });

  /** Sends `entries` as one response and returns whether it was ACKed and what is served after it. */
  async function send(entries: readonly Entry[]): Promise<{ acked: boolean; served: Map<string, number> }> {
    const nonce = `n-${++nonces}`;
    fake.sendRaw(discoveryResponse(VS_V1, entries.map(anyOf), nonce));
    await fake.waitFor(() => fake.requests.some((r) => r.nonce === nonce), 10_000, `the answer to ${nonce}`);
    const answer = fake.requests.find((r) => r.nonce === nonce);
    // The source emits what it applied before it answers.
    const last = [...recorder.events]
      .reverse()
      .find((e): e is SourceSnapshotEvent => e.type === 'snapshot' && (e.kinds?.has(VS) ?? true));
    const served = new Map<string, number>();
    for (const r of last?.resources ?? []) if (r.kind === VS) served.set(r.name, generationOf(r));
    return { acked: answer?.errorDetail === null || answer?.errorDetail === undefined, served };
  }

  it('serves after every response what judging that response whole serves, across changes, faults and their repair', async () => {
    let served = new Map<string, number>();
    let generation = 0;
    await fc.assert(
      fc.asyncProperty(
        // Lists long enough to span several runs of the byte comparison (512 entries).
        fc.integer({ min: 0, max: 1200 }),
        fc.array(fc.array(edit, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 5 }),
        async (size, steps) => {
          let base: Entry[] = names(size).map((name) => ({ is: 'good', name, generation: 0 }));
          for (const edits of [[], ...steps]) {
            const step = applyEdits(base, edits, ++generation);
            base = step.base;
            const expected = expectedAfter(served, step.sent);
            const got = await send(step.sent);
            assert.equal(got.acked, expected.acked, `ACK of ${JSON.stringify(edits)}`);
            assert.deepEqual(
              [...got.served].sort(([a], [b]) => (a < b ? -1 : 1)),
              [...expected.served].sort(([a], [b]) => (a < b ? -1 : 1)),
              `served after ${JSON.stringify(edits)}`,
            );
            served = got.served;
          }
        },
      ),
      {
        numRuns: 25,
        // Always among the runs: a change applied in place, then a name twice, which must decline it.
        examples: [[600, [[{ op: 'change', at: 3 }], [{ op: 'duplicate', at: 300 }]]]],
      },
    );
    assert.ok(patches.taken > 20, `applied as changes ${patches.taken} times`);
    assert.ok(patches.declined > 0, `declined ${patches.declined} times`);
  });

  it('reads only the entries a response changed, however far apart they lie', async () => {
    const entry = Object.getOwnPropertyDescriptor(ResponseLayout.prototype, 'entry')?.value as (
      ...args: unknown[]
    ) => unknown;
    let read = 0;
    ResponseLayout.prototype.entry = function (this: ResponseLayout, ...args: unknown[]) {
      read++;
      return entry.apply(this, args);
    } as typeof ResponseLayout.prototype.entry;
    try {
      const size = 1500;
      let base: Entry[] = names(size).map((name) => ({ is: 'good', name, generation: 0 }));
      await send(base);
      for (const [n, edits] of [
        [
          { op: 'change', at: 0 },
          { op: 'change', at: size - 1 },
        ],
        [
          { op: 'change', at: 10 },
          { op: 'change', at: 700 },
          { op: 'change', at: 1400 },
        ],
        [
          { op: 'remove', at: 5 },
          { op: 'change', at: 1200 },
        ],
      ].entries() as IterableIterator<[number, Edit[]]>) {
        const step = applyEdits(base, edits, 100 + n);
        base = step.base;
        read = 0;
        const got = await send(step.sent);
        assert.ok(got.acked);
        assert.equal(got.served.size, base.length);
        const changed = edits.filter((e) => e.op === 'change').length;
        assert.equal(read, changed, `entries read for ${JSON.stringify(edits)}`);
      }
    } finally {
      ResponseLayout.prototype.entry = entry as typeof ResponseLayout.prototype.entry;
    }
  });
});
