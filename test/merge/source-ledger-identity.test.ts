/**
 * The ledger's fast path compares what a source sends by identity (sources re-send unchanged
 * objects as the same instances). Whatever a source does to its list (reorders, inserts, drops,
 * changes, re-creates an unchanged object as a new instance, sends one kind or all, listing them or
 * not), the ledger must hold exactly what the source last sent per kind, report a change for every
 * kind whose content changed, and keep the version of an unchanged object.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import { SOURCE_ANNOTATION, SOURCE_VERSION_ANNOTATION, SourceLedger } from '../../src/merge/source-ledger.js';
import { DEFAULT_SOURCE_POLICY } from '../../src/merge/source-rules.js';
import { fakeResource } from '../support/resources.js';

const KINDS = ['networking.istio.io/VirtualService', 'networking.istio.io/DestinationRule'] as const;
const NAMES = Array.from({ length: 24 }, (_, i) => `o${i}`);

/** Two content variants per key, created once: re-sending one re-sends the same instance. */
const POOL = new Map<string, readonly [ConfigResource, ConfigResource]>();
for (const kind of KINDS)
  for (const name of NAMES)
    POOL.set(`${kind}|${name}`, [
      fakeResource(name, { kind, body: `${name}:1` }),
      fakeResource(name, { kind, body: `${name}:2` }),
    ]);

type Op =
  | { op: 'remove'; at: number }
  | { op: 'insert'; at: number; kind: number; name: number; variant: 0 | 1 }
  | { op: 'replace'; at: number }
  | { op: 'fresh'; at: number }
  | { op: 'move'; from: number; to: number };

const index = fc.nat({ max: 60 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('remove' as const), at: index }),
  fc.record({
    op: fc.constant('insert' as const),
    at: index,
    kind: fc.nat({ max: KINDS.length - 1 }),
    name: fc.nat({ max: NAMES.length - 1 }),
    variant: fc.constantFrom(0 as const, 1 as const),
  }),
  fc.record({ op: fc.constant('replace' as const), at: index }),
  fc.record({ op: fc.constant('fresh' as const), at: index }),
  fc.record({ op: fc.constant('move' as const), from: index, to: index }),
);
const stepArb = fc.record({
  ops: fc.array(opArb, { maxLength: 30 }),
  // A kind's index: that kind alone; KINDS.length: every kind, listed; undefined: every kind, unlisted.
  only: fc.option(fc.nat({ max: KINDS.length }), { nil: undefined }),
});

const keyOf = (r: ConfigResource): string => `${r.kind}|${r.namespace}/${r.name}`;
const bodyOf = (r: ConfigResource): string => new TextDecoder().decode(r.body);

function edit(list: ConfigResource[], op: Op): void {
  const at = (i: number): number => (list.length === 0 ? 0 : i % list.length);
  switch (op.op) {
    case 'remove':
      if (list.length > 0) list.splice(at(op.at), 1);
      return;
    case 'insert': {
      const r = POOL.get(`${KINDS[op.kind]}|${NAMES[op.name]}`)?.[op.variant];
      if (r === undefined || list.some((x) => keyOf(x) === keyOf(r))) return;
      list.splice(op.at % (list.length + 1), 0, r);
      return;
    }
    case 'replace': {
      const old = list[at(op.at)];
      if (old === undefined) return;
      const [a, b] = POOL.get(`${old.kind}|${old.name}`) ?? [];
      list[at(op.at)] = bodyOf(old) === (a && bodyOf(a)) ? (b ?? old) : (a ?? old);
      return;
    }
    case 'fresh': {
      const old = list[at(op.at)];
      if (old !== undefined) list[at(op.at)] = fakeResource(old.name, { kind: old.kind, body: bodyOf(old) });
      return;
    }
    case 'move': {
      if (list.length === 0) return;
      const [r] = list.splice(at(op.from), 1);
      if (r !== undefined) list.splice(op.to % (list.length + 1), 0, r);
      return;
    }
  }
}

/** kind → key → body. */
type Model = Map<string, Map<string, string>>;

function contents(state: ReadonlyMap<string, ConfigResource>): Map<string, string> {
  return new Map([...state].map(([k, r]) => [k, bodyOf(r)]));
}

describe('the source ledger compared by identity', () => {
  it('holds exactly what the source last sent, and reports a change for every kind whose content changed', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 12 }), (steps) => {
        const ledger = new SourceLedger(
          { name: 'src', type: 'test', defaultNamespace: 'default' },
          {
            ...DEFAULT_SOURCE_POLICY,
            settleMs: 0,
            keepOnEmpty: false,
            maxDeleteRatio: 1,
            minDeletes: Number.MAX_SAFE_INTEGER,
          },
          0,
        );
        const list: ConfigResource[] = [];
        const model: Model = new Map();
        const served = new Map<string, ConfigResource>();
        const lastInput = new Map<string, ConfigResource>();
        steps.forEach((step, n) => {
          for (const op of step.ops) edit(list, op);
          const listed = step.only === KINDS.length;
          const only = step.only === undefined || listed ? undefined : KINDS[step.only];
          const sent = only === undefined ? [...list] : list.filter((r) => r.kind === only);
          const event: SourceSnapshotEvent = {
            type: 'snapshot',
            resources: sent,
            revision: `r${n}`,
            errors: [],
            warnings: [],
            ...(only === undefined ? {} : { kinds: new Set([only]) }),
            ...(listed ? { kinds: new Set(KINDS) } : {}),
          };
          const before: Model = new Map([...model].map(([k, m]) => [k, new Map(m)]));
          for (const kind of only === undefined ? KINDS : [only]) {
            const m = new Map(
              sent.filter((r) => r.kind === kind).map((r) => [keyOf(r).slice(kind.length + 1), bodyOf(r)]),
            );
            if (m.size === 0) model.delete(kind);
            else model.set(kind, m);
          }
          for (const r of sent) lastInput.set(keyOf(r), r);
          const changes = ledger.apply(event, new Date(n));
          const expectedChanged = KINDS.filter(
            (k) =>
              JSON.stringify([...(before.get(k) ?? [])].sort()) !==
              JSON.stringify([...(model.get(k) ?? [])].sort()),
          );
          // Every kind whose content changed is reported (a re-created but identical object may be
          // reported too: the table downstream finds it unchanged).
          const reported = new Set(changes.map((c) => c.kind));
          for (const k of expectedChanged) assert.ok(reported.has(k), `step ${n}: ${k} changed`);
          for (const c of changes)
            assert.deepEqual(contents(c.after), model.get(c.kind) ?? new Map(), `step ${n}: ${c.kind} after`);
          let total = 0;
          for (const kind of KINDS) {
            const state = ledger.kind(kind);
            assert.deepEqual(contents(state), model.get(kind) ?? new Map(), `step ${n}: ${kind}`);
            total += state.size;
            for (const [key, r] of state) {
              assert.equal(r.annotations[SOURCE_ANNOTATION], 'src');
              assert.equal(
                r.annotations[SOURCE_VERSION_ANNOTATION],
                lastInput.get(`${kind}|${key}`)?.version,
                'the source version is the version of what the source sent',
              );
              const was = served.get(`${kind}|${key}`);
              if (was !== undefined && bodyOf(was) === bodyOf(r))
                assert.equal(r.version, was.version, `step ${n}: unchanged ${key} keeps its version`);
              served.set(`${kind}|${key}`, r);
            }
          }
          const counts = Object.values(ledger.report().counts).reduce((a, b) => a + b, 0);
          assert.equal(counts, total, `step ${n}: counts`);
          assert.equal(ledger.lastRevision, `r${n}`);
        });
      }),
      { numRuns: 300 },
    );
  });
});
