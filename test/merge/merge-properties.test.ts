import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { queueScheduler, Subject } from 'rxjs';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceEvent } from '../../src/core/source-event.js';
import { SOURCE_ANNOTATION } from '../../src/merge/source-ledger.js';
import type { ConfigSnapshot } from '../../src/merge/config-snapshot.js';
import { MergeEngine } from '../../src/merge/merge-engine.js';
import type { SourcePolicy } from '../../src/merge/source-rules.js';
import { fakeResource } from '../support/resources.js';

const NAMESPACES = ['shop', 'pay', 'team-a', 'team-a-dev'] as const;
const KINDS = ['networking.istio.io/VirtualService', 'networking.istio.io/DestinationRule'] as const;
const NAMES = ['r1', 'r2', 'r3'] as const;

/** One object a source may send: a key and one of two bodies. */
const objectArb = fc.record({
  kind: fc.constantFrom(...KINDS),
  namespace: fc.constantFrom(...NAMESPACES),
  name: fc.constantFrom(...NAMES),
  body: fc.constantFrom('v1', 'v2'),
});

const stateArb = fc.uniqueArray(objectArb, {
  selector: (o) => `${o.kind}|${o.namespace}/${o.name}`,
  maxLength: 12,
});

const policyArb = fc.record({
  priority: fc.integer({ min: 0, max: 3 }),
  allowNs: fc.option(fc.subarray([...NAMESPACES, 'team-a-*'], { minLength: 1 }), { nil: undefined }),
  denyKinds: fc.option(fc.constant<string[]>(['DestinationRule']), { nil: undefined }),
});

type Model = fc.Arbitrary<{
  policies: Array<{ priority: number; allowNs: string[] | undefined; denyKinds: string[] | undefined }>;
  steps: Array<{
    source: number;
    state: Array<{ kind: string; namespace: string; name: string; body: string }>;
  }>;
}>;

/**
 * Sources and their steps. A step either sends a state of its own or (`drop`) the source's last
 * state without one kind: the edit of an upstream that lost a kind, which random states rarely are,
 * or (`fresh`) a state of its own without that kind, a kind lost beside edits of the others.
 */
const modelArb: Model = fc.integer({ min: 3, max: 5 }).chain((n) =>
  fc
    .record({
      policies: fc.array(policyArb, { minLength: n, maxLength: n }),
      steps: fc.array(
        fc.record({
          source: fc.integer({ min: 0, max: n - 1 }),
          state: stateArb,
          drop: fc.option(fc.constantFrom(...KINDS), { nil: undefined, freq: 3 }),
          fresh: fc.boolean(),
        }),
        { maxLength: 25 },
      ),
    })
    .map(({ policies, steps }) => {
      const last = new Map<number, Array<{ kind: string; namespace: string; name: string; body: string }>>();
      return {
        policies,
        steps: steps.map(({ source, state, drop, fresh }) => {
          const kept = fresh ? state : (last.get(source) ?? []);
          const sent = drop === undefined ? state : kept.filter((o) => o.kind !== drop);
          last.set(source, sent);
          return { source, state: sent };
        }),
      };
    }),
);

function toPolicy(
  p: { priority: number; allowNs: string[] | undefined; denyKinds: string[] | undefined },
  guards: boolean,
): Partial<SourcePolicy> {
  return {
    priority: p.priority,
    ...(p.allowNs === undefined ? {} : { allow: { namespaces: p.allowNs } }),
    ...(p.denyKinds === undefined ? {} : { deny: { kinds: p.denyKinds } }),
    keepOnEmpty: guards,
    maxDeleteRatio: guards ? 0.5 : 1,
    minDeletes: guards ? 2 : Number.MAX_SAFE_INTEGER,
    // Each step is judged as it arrives, against the state before it alone (the settle window is
    // a timer, covered in virtual time; the deletion window in source-ledger.test.ts).
    settleMs: 0,
    deleteWindowMs: 0,
  };
}

/** The access rule written out independently of the production code: allowed namespaces (one glob), denied kinds. */
function admits(
  p: { allowNs: string[] | undefined; denyKinds: string[] | undefined },
  r: { kind: string; namespace: string },
): boolean {
  if (
    p.allowNs !== undefined &&
    !p.allowNs.some((ns) => ns === r.namespace || (ns === 'team-a-*' && r.namespace.startsWith('team-a-')))
  ) {
    return false;
  }
  return !(p.denyKinds ?? []).some((k) => r.kind.endsWith(`/${k}`));
}

function event(state: Array<{ kind: string; namespace: string; name: string; body: string }>): SourceEvent {
  return {
    type: 'snapshot',
    resources: state.map((o) => fakeResource(o.name, { kind: o.kind, namespace: o.namespace, body: o.body })),
    // Each state lists its kinds afresh, as an upstream's answers do.
    listed: new Set(KINDS),
    revision: JSON.stringify(state),
    errors: [],
    warnings: [],
  };
}

/** An engine over `n` subjects, building synchronously after each event. */
function harness(policies: Array<Partial<SourcePolicy>>) {
  const subjects = policies.map(() => new Subject<SourceEvent>());
  const engine = new MergeEngine(
    subjects.map((events$, i) => ({
      descriptor: { name: `s${i}`, type: 'test', defaultNamespace: 'default' },
      events$,
      policy: policies[i] ?? {},
    })),
    { scheduler: queueScheduler, syncTimeoutMs: 0 },
  );
  engine.start();
  return { subjects, engine };
}

function served(engine: MergeEngine): Map<string, ConfigResource> {
  const out = new Map<string, ConfigResource>();
  for (const k of engine.current().kinds.values())
    for (const r of k.resources) out.set(`${r.kind}|${r.namespace}/${r.name}`, r);
  return out;
}

function versions(engine: MergeEngine): Record<string, string> {
  return Object.fromEntries([...engine.current().kinds].map(([k, s]) => [k, s.version]));
}

describe('merge properties over random interleavings of 3–5 sources', () => {
  it('serves a state that depends only on the sources’ final states, not on the order of events', () => {
    fc.assert(
      fc.property(modelArb, ({ policies, steps }) => {
        const replayed = harness(policies.map((p) => toPolicy(p, false)));
        for (const s of steps) replayed.subjects[s.source]?.next(event(s.state));
        const finals = new Map<number, (typeof steps)[number]['state']>();
        for (const s of steps) finals.set(s.source, s.state);
        const direct = harness(policies.map((p) => toPolicy(p, false)));
        for (const [source, state] of [...finals].reverse()) direct.subjects[source]?.next(event(state));
        assert.deepEqual(versions(replayed.engine), versions(direct.engine));
        assert.deepEqual(
          [...served(replayed.engine).keys()].sort(),
          [...served(direct.engine).keys()].sort(),
        );
        replayed.engine.stop();
        direct.engine.stop();
      }),
      { numRuns: 150 },
    );
  });

  it('never serves an object outside the access rules of the source it is served from', () => {
    fc.assert(
      fc.property(modelArb, ({ policies, steps }) => {
        const { subjects, engine } = harness(policies.map((p) => toPolicy(p, true)));
        for (const s of steps) {
          subjects[s.source]?.next(event(s.state));
          for (const r of served(engine).values()) {
            const from = Number((r.annotations[SOURCE_ANNOTATION] ?? '').slice(1));
            const policy = policies[from];
            assert.ok(
              policy !== undefined && admits(policy, r),
              `${r.kind} ${r.namespace}/${r.name} from s${from}`,
            );
          }
        }
        engine.stop();
      }),
      { numRuns: 150 },
    );
  });

  it('lets an object disappear only when no source holds it any more, or a guard let the deletion through', () => {
    fc.assert(
      fc.property(modelArb, ({ policies, steps }) => {
        const { subjects, engine } = harness(policies.map((p) => toPolicy(p, true)));
        const lastSent = new Map<number, ReturnType<typeof event>>();
        let before = served(engine);
        for (const s of steps) {
          const e = event(s.state);
          lastSent.set(s.source, e);
          subjects[s.source]?.next(e);
          const after = served(engine);
          for (const [key, r] of before) {
            if (after.has(key)) continue;
            // Gone: every source whose last state admits the object must not be holding it in the merge.
            const holders = [...lastSent].filter(
              ([i, ev]) =>
                ev.type === 'snapshot' &&
                [...ev.resources].some(
                  (x) => x.kind === r.kind && x.namespace === r.namespace && x.name === r.name,
                ) &&
                admits(policies[i] ?? { allowNs: [], denyKinds: undefined }, r) &&
                engine.current().sources[i]?.held === undefined,
            );
            assert.deepEqual(
              holders.map(([i]) => i),
              [],
              `${key} vanished while still held`,
            );
          }
          before = after;
        }
        engine.stop();
      }),
      { numRuns: 150 },
    );
  });

  it('holds exactly the updates a guard must hold, and keeps serving what it held', () => {
    // The guards written out independently: per source, the committed (admitted) keys; a full
    // state that empties a source holding objects is held, so is one deleting more than
    // minDeletes (2) and more than half of them; kinds are held alone where a state takes every
    // object of a kind it held more than one of (with every kind that state empties) or deletes
    // more than 2 and more than half of a kind's objects (the rest of that update is committed
    // when it passes the guards alone, and there is a rest); anything else is committed and ends
    // a hold.
    fc.assert(
      fc.property(modelArb, ({ policies, steps }) => {
        const { subjects, engine } = harness(policies.map((p) => toPolicy(p, true)));
        const committed = policies.map(() => new Set<string>());
        // Per source, the kinds of what it sent that the merge took (before the access rules).
        const taken = policies.map(() => new Set<string>());
        for (const s of steps) {
          const policy = policies[s.source] ?? { allowNs: [], denyKinds: undefined };
          const sentKinds = new Set(s.state.map((o) => o.kind));
          const known = taken[s.source] ?? new Set<string>();
          const admitted = new Set(
            s.state.filter((o) => admits(policy, o)).map((o) => `${o.kind}|${o.namespace}/${o.name}`),
          );
          const before = committed[s.source] ?? new Set<string>();
          const deletions = [...before].filter((k) => !admitted.has(k)).length;
          const ofKind = (keys: ReadonlySet<string>, kind: string): number =>
            [...keys].filter((k) => k.startsWith(`${kind}|`)).length;
          const keyKind = (key: string): string => key.slice(0, key.indexOf('|'));
          const takesKind = KINDS.some((kind) => ofKind(before, kind) > 1 && ofKind(admitted, kind) === 0);
          const lostOf = (kind: string): number =>
            [...before].filter((k) => keyKind(k) === kind && !admitted.has(k)).length;
          const alone = new Set<string>([
            ...(takesKind ? KINDS.filter((k) => ofKind(before, k) > 0 && ofKind(admitted, k) === 0) : []),
            ...KINDS.filter((k) => lostOf(k) > 2 && lostOf(k) > 0.5 * ofKind(before, k)),
          ]);
          // No other kind sent, held or taken: nothing to apply beside them, the update is judged whole.
          const rest = KINDS.some(
            (k) => !alone.has(k) && (sentKinds.has(k) || known.has(k) || ofKind(before, k) > 0),
          );
          const restDeletions = [...before].filter((k) => !alone.has(keyKind(k)) && !admitted.has(k)).length;
          const restPasses = !(restDeletions > 2 && restDeletions > 0.5 * before.size);
          const expected =
            before.size > 0 && admitted.size === 0
              ? 'empty'
              : alone.size > 0 && rest && restPasses
                ? 'emptied-kind'
                : deletions > 2 && deletions > 0.5 * before.size
                  ? 'mass-delete'
                  : alone.size > 0
                    ? 'emptied-kind'
                    : undefined;
          if (expected === undefined) {
            committed[s.source] = admitted;
            taken[s.source] = sentKinds;
          }
          if (expected === 'emptied-kind' && rest && restPasses) {
            committed[s.source] = new Set([
              ...[...admitted].filter((k) => !alone.has(keyKind(k))),
              ...[...before].filter((k) => alone.has(keyKind(k))),
            ]);
            taken[s.source] = new Set([
              ...[...known].filter((k) => alone.has(k)),
              ...[...sentKinds].filter((k) => !alone.has(k)),
            ]);
          }
          subjects[s.source]?.next(event(s.state));
          const report = engine.current().sources[s.source];
          assert.equal(report?.held?.reason, expected, `s${s.source}: ${before.size} → ${admitted.size}`);
          const counted = Object.values(report?.counts ?? {}).reduce((a, b) => a + b, 0);
          assert.equal(counted, committed[s.source]?.size, `s${s.source} contributes what it committed`);
          const servedKeys = new Set(served(engine).keys());
          for (const key of committed[s.source] ?? []) assert.ok(servedKeys.has(key), `${key} is served`);
        }
        engine.stop();
      }),
      { numRuns: 150 },
    );
  });

  it('serves each object from its highest-priority holder, the earlier source on a tie', () => {
    fc.assert(
      fc.property(modelArb, ({ policies, steps }) => {
        const { subjects, engine } = harness(policies.map((p) => toPolicy(p, false)));
        const last = new Map<number, (typeof steps)[number]['state']>();
        for (const s of steps) {
          subjects[s.source]?.next(event(s.state));
          last.set(s.source, s.state);
        }
        for (const [key, r] of served(engine)) {
          const holders = [...last]
            .filter(
              ([i, st]) =>
                st.some((o) => `${o.kind}|${o.namespace}/${o.name}` === key) &&
                admits(policies[i] ?? { allowNs: [], denyKinds: undefined }, r),
            )
            .map(([i]) => i)
            .sort((a, b) => (policies[b]?.priority ?? 0) - (policies[a]?.priority ?? 0) || a - b);
          assert.equal(r.annotations[SOURCE_ANNOTATION], `s${holders[0] ?? -1}`, key);
        }
        engine.stop();
      }),
      { numRuns: 150 },
    );
  });

  it('is ready for every kind in every snapshot that is ready', () => {
    // The ADS server relies on it: between two ready snapshots no kind's readiness can move, so a
    // stream looks only at the kinds whose objects moved.
    let ready = 0;
    let notReady = 0;
    const kinds = [...KINDS, 'networking.istio.io/Gateway', 'security.istio.io/AuthorizationPolicy'];
    fc.assert(
      fc.property(modelArb, fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }), (model, failing) => {
        const h = harness(model.policies.map((p) => toPolicy(p, false)));
        const snapshots: ConfigSnapshot[] = [];
        const sub = h.engine.snapshots$.subscribe((s) => snapshots.push(s));
        for (const s of model.steps) {
          h.subjects[s.source]?.next(event(s.state));
          // A source that fails after its state keeps serving it, stale.
          if (failing[s.source] === true) h.subjects[s.source]?.next({ type: 'status', state: 'stale' });
        }
        sub.unsubscribe();
        for (const snapshot of snapshots) {
          if (!snapshot.ready) {
            notReady++;
            continue;
          }
          ready++;
          for (const kind of kinds) assert.ok(snapshot.readyFor(kind), `ready, but not for ${kind}`);
        }
        h.engine.stop();
      }),
      { numRuns: 150 },
    );
    assert.ok(ready > 0 && notReady > 0, `snapshots ready ${ready}, not ready ${notReady}`);
  });

  it('gives two independent instances fed the same events identical versions', () => {
    fc.assert(
      fc.property(modelArb, ({ policies, steps }) => {
        const one = harness(policies.map((p) => toPolicy(p, true)));
        const two = harness(policies.map((p) => toPolicy(p, true)));
        for (const s of steps) {
          one.subjects[s.source]?.next(event(s.state));
          two.subjects[s.source]?.next(event(s.state));
          assert.deepEqual(versions(one.engine), versions(two.engine));
        }
        one.engine.stop();
        two.engine.stop();
      }),
      { numRuns: 100 },
    );
  });
});
