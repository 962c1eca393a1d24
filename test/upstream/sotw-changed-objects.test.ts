import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import { messageType } from '../../src/schema/proto-root.js';
import { SubscriptionState, type ChannelPatch } from '../../src/upstream/streaming/subscription-state.js';
import { MeshmuxError } from '../../src/core/errors.js';
import { ResponseLayout } from '../../src/upstream/xds/discovery-response.js';
import { EarlierReads } from '../../src/upstream/xds/earlier-reads.js';
import { countCalls } from '../support/call-count.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { fakeVirtualService, kindNamed } from '../support/fake-objects.js';
import { bareBodyAny, discoveryResponse, mcpAny, type RawAny } from '../support/faulty-responses.js';
import { syncedXdsSource, type SourceEventRecorder } from '../support/source-event-recorder.js';

const VS_V1 = 'networking.istio.io/v1/VirtualService';
const VS = 'networking.istio.io/VirtualService';
const VS_KIND = kindNamed('VirtualService');
const VS_BODY = messageType(VS_KIND.bodyType);

/**
 * What a good object carries that meshmux prunes or keeps with a warning: nothing, Higress's
 * envelope field 100, or a body field its message does not define (#111). An upper-case name is
 * worth a warning too.
 */
type Note = 'none' | 'field100' | 'body-field';

/**
 * One entry of a response: a good object at some generation (its host says which); the same name
 * with an annotation istiod refuses or with a body that does not decode (each dropped alone, its
 * previous version kept); a bare body instead of an MCP Resource, or an envelope without a usable
 * name (each makes the whole response refused).
 */
type Good = { readonly is: 'good'; readonly name: string; readonly generation: number; readonly note: Note };
type Entry =
  | Good
  | { readonly is: 'refused-annotation' | 'garbage-body' | 'bare-body' | 'no-name'; readonly name: string };

/** A body field no VirtualService defines: field 111, a varint. */
const UNKNOWN_BODY_FIELD = Uint8Array.of(0xf8, 0x06, 0x01);

const encodedAnys = new Map<string, RawAny>();

function anyOf(entry: Entry): RawAny {
  const key = JSON.stringify(entry);
  let any = encodedAnys.get(key);
  if (any !== undefined) return any;
  const object = fakeVirtualService(
    entry.name,
    `${entry.name}.g${entry.is === 'good' ? entry.generation : 0}`,
  );
  if (entry.is === 'good') {
    const rawBody =
      entry.note === 'body-field'
        ? Buffer.concat([VS_BODY.encode(VS_BODY.fromObject(object.spec)).finish(), UNKNOWN_BODY_FIELD])
        : undefined;
    any = mcpAny(VS_KIND, rawBody === undefined ? object : { ...object, rawBody }, {
      extra100: entry.note === 'field100',
    });
  } else if (entry.is === 'refused-annotation')
    any = mcpAny(VS_KIND, { ...object, annotations: { 'internal.istio.io/webhook-always-reject': 'true' } });
  else if (entry.is === 'bare-body') any = bareBodyAny(VS_KIND, object);
  else if (entry.is === 'no-name') any = mcpAny(VS_KIND, { ...object, name: '' });
  else any = mcpAny(VS_KIND, { ...object, rawBody: Uint8Array.from([0x0a, 0x7f]) });
  encodedAnys.set(key, any);
  return any;
}

/** What the source serves, as the model knows it: the objects by name, and the names sent twice. */
interface Served {
  readonly objects: ReadonlyMap<string, Good>;
  readonly twice: number;
}

/**
 * What the source must serve after a response, given what it served before: the rules every
 * state-of-the-world response is judged by, written out plainly.
 */
function expectedAfter(served: Served, entries: readonly Entry[]): { served: Served; acked: boolean } {
  if (entries.some((e) => e.is === 'bare-body' || e.is === 'no-name')) return { served, acked: false };
  const next = new Map<string, Good>();
  const dropped = new Set<string>();
  const seen = new Set<string>();
  let twice = 0;
  for (const e of entries) {
    if (e.is === 'good') {
      if (seen.has(e.name)) twice++;
      next.set(e.name, e);
      dropped.delete(e.name);
    } else {
      next.delete(e.name);
      dropped.add(e.name);
    }
    seen.add(e.name);
  }
  for (const name of dropped) {
    const previous = served.objects.get(name);
    if (previous !== undefined) next.set(name, previous);
  }
  return { served: { objects: next, twice }, acked: dropped.size === 0 };
}

/** The warnings of a source serving `objects`, told apart from their wording. */
interface WarningTally {
  /** Objects with Higress's field 100, and the field numbers named. */
  readonly envelope: string;
  /** Objects with unknown body fields; and whether the names shown are some of them, as many as may be. */
  readonly body: number;
  readonly bodyNamesOk: boolean;
  /** Names warned of for upper case, sorted. */
  readonly upperCase: readonly string[];
  readonly twice: number;
}

function expectedTally(served: Served): WarningTally {
  const all = [...served.objects.values()];
  const field100 = all.filter((o) => o.note === 'field100').length;
  return {
    envelope: field100 === 0 ? '' : `${field100} (100)`,
    body: all.filter((o) => o.note === 'body-field').length,
    bodyNamesOk: true,
    upperCase: all
      .filter((o) => o.name !== o.name.toLowerCase())
      .map((o) => o.name)
      .sort(),
    twice: served.twice,
  };
}

function tallyOf(warnings: readonly MeshmuxError[], served: Served): WarningTally {
  let envelope = '';
  let body = 0;
  let bodyNamesOk = true;
  const upperCase: string[] = [];
  let twice = 0;
  for (const w of warnings) {
    const m = w.message;
    const fields =
      /^(\d+) objects carried fields istio\.mcp\.v1alpha1\.Resource does not define (\(.*\))/.exec(m);
    const bodyFields =
      /^(\d+) objects carry body fields their message does not define, kept as sent: (.*)$/.exec(m);
    if (fields !== null) envelope = `${fields[1]} ${fields[2]}`;
    else if (bodyFields !== null) {
      body = Number(bodyFields[1]);
      const shown = (bodyFields[2] ?? '').split('; ');
      bodyNamesOk =
        shown.length === Math.min(20, body) &&
        shown.every((s) => {
          const [name, field] = s.split(': ');
          return (
            served.objects.get(name?.slice('shop/'.length) ?? '')?.note === 'body-field' && field === '#111'
          );
        });
    } else if (/appears twice in one response/.test(m)) twice++;
    else if (/accepted because Istio tolerates upper case/.test(m))
      upperCase.push(JSON.parse(m.slice(0, m.indexOf(' is '))) as string);
    else assert.fail(`an unexpected warning: ${m}`);
  }
  return { envelope, body, bodyNamesOk, upperCase: upperCase.sort(), twice };
}

/** A state of good objects, then changes to it: each step's response is one of them. */
const names = (count: number): string[] => Array.from({ length: count }, (_, i) => `vs-${i}`);

type Edit =
  | { readonly op: 'change'; readonly at: number; readonly note: Note }
  | { readonly op: 'remove' | 'break' | 'shadow'; readonly at: number }
  | { readonly op: 'insert'; readonly at: number; readonly name: string; readonly note: Note }
  | { readonly op: 'move' | 'reverse'; readonly at: number; readonly to: number }
  | {
      readonly op: 'duplicate' | 'refused-annotation' | 'garbage-body' | 'bare-body' | 'no-name';
      readonly at: number;
    };

const note: fc.Arbitrary<Note> = fc.constantFrom('none', 'none', 'field100', 'body-field');

const edit: fc.Arbitrary<Edit> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('change' as const), at: fc.nat(), note }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('remove' as const), at: fc.nat() }) },
  // An object whose body stops decoding, or a copy of it that does not decode sent after it, so
  // until a change repairs it.
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constantFrom('break' as const, 'shadow' as const), at: fc.nat() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('insert' as const),
      at: fc.nat(),
      // Some in upper case: a warning of their own.
      name: fc.constantFrom(...names(40).map((n, i) => (i % 4 === 0 ? `New-${n}` : `new-${n}`))),
      note,
    }),
  },
  // The same entries in another order: one moved elsewhere, or a stretch listed backwards (an
  // upstream that orders its objects otherwise from one response to the next).
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constantFrom('move' as const, 'reverse' as const),
      at: fc.nat(),
      to: fc.nat(),
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
 * Applies edits: changes, removals, insertions, moves and breaks also change the base the next step
 * starts from (a broken object is sent as it is until a change repairs it); the faults (a name
 * twice, a refused annotation, an undecodable body, a wrong Any, no usable name) are in this
 * response only, as an upstream fixing its mistake would send.
 */
function applyEdits(
  base: readonly Entry[],
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
      if (target !== undefined) next[at] = { is: 'good', name: target.name, generation, note: e.note };
    } else if (e.op === 'remove') next.splice(at, 1);
    else if (e.op === 'break') {
      if (target !== undefined) next[at] = { is: 'garbage-body', name: target.name };
    } else if (e.op === 'shadow') {
      if (target !== undefined) next.splice(at + 1, 0, { is: 'garbage-body', name: target.name });
    } else if (e.op === 'insert') {
      if (!next.some((x) => x.name === e.name))
        next.splice(at, 0, { is: 'good', name: e.name, generation, note: e.note });
    } else if (e.op === 'move') {
      const [moved] = next.splice(at, 1);
      if (moved !== undefined) next.splice(e.to % (next.length + 1), 0, moved);
    } else if (e.op === 'reverse') {
      const end = e.to % (next.length + 1);
      const [from, to] = at <= end ? [at, end] : [end, at];
      next.splice(from, to - from, ...next.slice(from, to).reverse());
    } else if (target !== undefined) {
      faults.push({ at, entry: e.op === 'duplicate' ? { ...target } : { is: e.op, name: target.name } });
    }
  }
  const sent: Entry[] = [...next];
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
  const patches = { taken: 0, declined: 0, noted: 0, dropsAgain: 0 };
  const applyPatch = Object.getOwnPropertyDescriptor(SubscriptionState.prototype, 'applyPatch')?.value as (
    ...args: unknown[]
  ) => boolean;
  /** Entries handed back as read before, found elsewhere than in place. */
  let foundElsewhere = 0;
  const find = Object.getOwnPropertyDescriptor(EarlierReads.prototype, 'find')?.value as (
    this: EarlierReads,
    ...args: unknown[]
  ) => unknown;

  before(async () => {
    // Counts how often a response was applied as a change of the last state, so the property
    // below is known to cover that path and not only the full one.
    SubscriptionState.prototype.applyPatch = function (this: SubscriptionState, ...args: unknown[]): boolean {
      const taken = applyPatch.apply(this, args);
      if (taken) patches.taken++;
      else patches.declined++;
      if (taken && (args[1] as ChannelPatch).noted !== undefined) patches.noted++;
      if (taken && args[3] === true) patches.dropsAgain++;
      return taken;
    };
    EarlierReads.prototype.find = function (this: EarlierReads, ...args: unknown[]) {
      const found = find.apply(this, args);
      if (found !== undefined) foundElsewhere++;
      return found as ReturnType<EarlierReads['find']>;
    };
    fake = await FakeAdsServer.start({ peer: 'istiod' });
    fake.set('VirtualService', []);
    recorder = await syncedXdsSource(fake.address, ['VirtualService']);
  });
  after(async () => {
    SubscriptionState.prototype.applyPatch = applyPatch;
    EarlierReads.prototype.find = find as EarlierReads['find'];
    recorder.close();
    await fake.stop();
  });

  /**
   * Sends `entries` as one response and returns whether it was ACKed, what is served after it
   * (name → generation) and the warnings served with it.
   */
  async function send(
    entries: readonly Entry[],
  ): Promise<{ acked: boolean; served: Map<string, number>; warnings: readonly MeshmuxError[] }> {
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
    return {
      acked: answer?.errorDetail === null || answer?.errorDetail === undefined,
      served,
      warnings: last?.warnings ?? [],
    };
  }

  it('serves after every response what judging that response whole serves, across changes, faults and their repair', async () => {
    let served: Served = { objects: new Map(), twice: 0 };
    let generation = 0;
    await fc.assert(
      fc.asyncProperty(
        // Lists long enough to span several runs of the byte comparison (512 entries).
        fc.integer({ min: 0, max: 1200 }),
        fc.array(fc.array(edit, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 5 }),
        async (size, steps) => {
          let base: Entry[] = names(size).map((name, i): Good => ({
            is: 'good',
            name,
            generation: 0,
            note: i % 5 === 1 ? 'field100' : i % 13 === 2 ? 'body-field' : 'none',
          }));
          for (const edits of [[], ...steps]) {
            const step = applyEdits(base, edits, ++generation);
            base = step.base;
            const expected = expectedAfter(served, step.sent);
            const got = await send(step.sent);
            assert.equal(got.acked, expected.acked, `ACK of ${JSON.stringify(edits)}`);
            assert.deepEqual(
              [...got.served].sort(([a], [b]) => (a < b ? -1 : 1)),
              [...expected.served.objects]
                .map(([n, o]): [string, number] => [n, o.generation])
                .sort(([a], [b]) => (a < b ? -1 : 1)),
              `served after ${JSON.stringify(edits)}`,
            );
            assert.deepEqual(
              tallyOf(got.warnings, expected.served),
              expectedTally(expected.served),
              `warnings after ${JSON.stringify(edits)}`,
            );
            served = expected.served;
          }
        },
      ),
      {
        numRuns: 25,
        examples: [
          // A change applied in place, then a name twice, which must decline it.
          [600, [[{ op: 'change', at: 3, note: 'none' }], [{ op: 'duplicate', at: 300 }]]],
          // An object with Higress's field dropped for a bad body (its last version, and its note,
          // kept), then changes that add and clear notes.
          [
            600,
            [
              [{ op: 'garbage-body', at: 1 }],
              [{ op: 'change', at: 6, note: 'body-field' }],
              [{ op: 'change', at: 1, note: 'none' }],
            ],
          ],
          // An object broken for several states while others change around it, then repaired.
          [
            600,
            [
              [{ op: 'break', at: 2 }],
              [{ op: 'change', at: 100, note: 'none' }],
              [{ op: 'remove', at: 200 }],
              [{ op: 'change', at: 2, note: 'none' }],
            ],
          ],
          // An object followed by a copy that does not decode: a change of it keeps its last version.
          [
            600,
            [
              [{ op: 'shadow', at: 5 }],
              [{ op: 'change', at: 100, note: 'none' }],
              [{ op: 'change', at: 5, note: 'none' }],
            ],
          ],
          // A broken object, its last version kept, moved elsewhere while others change; then
          // the whole list backwards with one object changed, and the broken one repaired.
          [
            600,
            [
              [{ op: 'break', at: 7 }],
              [
                { op: 'move', at: 7, to: 400 },
                { op: 'change', at: 10, note: 'none' },
              ],
              [
                { op: 'reverse', at: 0, to: 600 },
                { op: 'change', at: 50, note: 'field100' },
              ],
              [{ op: 'change', at: 200, note: 'none' }],
            ],
          ],
        ],
      },
    );
    assert.ok(patches.taken > 20, `applied as changes ${patches.taken} times`);
    assert.ok(patches.noted > 5, `applied as changes with noted objects ${patches.noted} times`);
    assert.ok(
      patches.dropsAgain >= 3,
      `applied as changes dropping objects again ${patches.dropsAgain} times`,
    );
    assert.ok(patches.declined > 0, `declined ${patches.declined} times`);
    assert.ok(foundElsewhere > 100, `objects found where they were read before ${foundElsewhere} times`);
  });

  it('carries the warnings of a state whose every object has one through a change without describing them again', async () => {
    // Upper-case names: accepted, with a warning each.
    let base: Entry[] = names(600).map((n): Good => ({
      is: 'good',
      name: `V${n.slice(1)}`,
      generation: 0,
      note: 'none',
    }));
    const first = await send(base);
    assert.equal(first.warnings.length, 600);
    const described = countCalls(MeshmuxError.prototype, 'describe');
    try {
      let step = applyEdits(base, [{ op: 'change', at: 300, note: 'none' }], 1);
      base = step.base;
      let got = await send(step.sent);
      assert.equal(got.served.get('Vs-300'), 1);
      assert.equal(got.warnings.length, 600);
      // An object warned of comes, another goes.
      step = applyEdits(
        base,
        [
          { op: 'insert', at: 10, name: 'New-vs-0', note: 'none' },
          { op: 'remove', at: 500 },
        ],
        2,
      );
      base = step.base;
      got = await send(step.sent);
      assert.equal(got.served.get('New-vs-0'), 2);
      assert.equal(got.warnings.length, 600);
      assert.ok(described.calls <= 4, `${described.calls} warnings described for changes of a few objects`);
    } finally {
      described.restore();
    }
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
      let base: Entry[] = names(size).map((name): Good => ({
        is: 'good',
        name,
        generation: 0,
        note: 'none',
      }));
      await send(base);
      for (const [n, edits] of [
        [
          { op: 'change', at: 0, note: 'none' },
          { op: 'change', at: size - 1, note: 'none' },
        ],
        [
          { op: 'change', at: 10, note: 'none' },
          { op: 'change', at: 700, note: 'none' },
          { op: 'change', at: 1400, note: 'none' },
        ],
        [
          { op: 'remove', at: 5 },
          { op: 'change', at: 1200, note: 'none' },
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
