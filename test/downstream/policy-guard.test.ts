import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { anonymousIdentity, withNode, type ClientIdentity } from '../../src/downstream/client-identity.js';
import type { PolicyConfig } from '../../src/downstream/policy/client-policy.js';
import { PolicyChanges } from '../../src/downstream/policy/policy-changes.js';
import {
  DEFAULT_POLICY_GUARD,
  holdingsUnder,
  judgePolicyChange,
} from '../../src/downstream/policy/policy-guard.js';
import { PolicySet } from '../../src/downstream/policy/policy-set.js';
import type { ConfigSnapshot } from '../../src/merge/config-snapshot.js';
import { componentLogger } from '../../src/core/logger.js';
import { fakeResource } from '../support/resources.js';

function client(node: string, id = 1): ClientIdentity {
  return withNode(anonymousIdentity(id, '10.0.0.7:5000', []), node, {});
}

/** 30 objects in `shop`, 5 in `web`, 1 in `ops`. */
function snapshot(): ConfigSnapshot {
  const resources = [
    ...Array.from({ length: 30 }, (_, i) => fakeResource(`s${i}`, { namespace: 'shop' })),
    ...Array.from({ length: 5 }, (_, i) => fakeResource(`w${i}`, { namespace: 'web' })),
    fakeResource('tool', { namespace: 'ops' }),
  ];
  return {
    kinds: new Map([['networking.istio.io/VirtualService', { resources }]]),
  } as unknown as ConfigSnapshot;
}

const RUNNING: PolicyConfig[] = [
  { name: 'shops', match: { nodeId: 'shop-*' }, allow: { namespaces: ['shop', 'web'] } },
  { name: 'ops', match: { nodeId: 'ops-*' }, allow: { namespaces: ['ops'] } },
];

const CLIENTS = [client('shop-1', 1), client('shop-2', 2), client('ops-1', 3)];

function judge(next: PolicyConfig[]) {
  return judgePolicyChange(
    snapshot(),
    holdingsUnder(new PolicySet(RUNNING), CLIENTS),
    new PolicySet(next),
    DEFAULT_POLICY_GUARD,
  );
}

describe('policy guard', () => {
  it('judges clients of one view that end in one view once, with what they would lose', () => {
    const judgement = judge([
      { name: 'shops', match: { nodeId: 'shop-*' }, allow: { namespaces: ['shp', 'web'] } },
      RUNNING[1] as PolicyConfig,
    ]);
    assert.equal(judgement.held, true);
    assert.deepEqual(judgement.losses, [
      { policy: 'shops', next: 'shops', clients: 2, objects: 35, lost: 30, held: 'mass-delete' },
      { policy: 'ops', next: 'ops', clients: 1, objects: 1, lost: 0 },
    ]);
  });

  it('counts everything as lost for a client the new policies refuse, and holds even a small view emptied', () => {
    const judgement = judge([RUNNING[0] as PolicyConfig]);
    assert.equal(judgement.held, true);
    assert.deepEqual(
      judgement.losses.find((l) => l.policy === 'ops'),
      { policy: 'ops', clients: 1, objects: 1, lost: 1, held: 'empty' },
    );
    const accepting = judgePolicyChange(
      snapshot(),
      holdingsUnder(new PolicySet(RUNNING), CLIENTS),
      new PolicySet([RUNNING[0] as PolicyConfig]),
      { ...DEFAULT_POLICY_GUARD, keepOnEmpty: false },
    );
    assert.equal(accepting.held, false);
  });

  it('follows a client moved to another policy, and lets a change within the guards through', () => {
    const moved = judge([{ name: 'all', match: { nodeId: 'shop-1' } }, ...RUNNING]);
    assert.equal(moved.held, false);
    assert.deepEqual(
      moved.losses.find((l) => l.next === 'all'),
      { policy: 'shops', next: 'all', clients: 1, objects: 35, lost: 0 },
    );
    // Five of 35 (web) is under half: applied.
    const small = judge([
      { name: 'shops', match: { nodeId: 'shop-*' }, allow: { namespaces: ['shop'] } },
      RUNNING[1] as PolicyConfig,
    ]);
    assert.equal(small.held, false);
    assert.equal(small.losses[0]?.lost, 5);
  });
});

describe('policy guard, clients claiming many revisions', () => {
  const many = Array.from({ length: 3000 }, (_, i) =>
    withNode(anonymousIdentity(i, '10.0.0.7:5000', []), `shop-${i}`, { ISTIO_REVISION: `rev-${i}` }),
  );
  const typo: PolicyConfig[] = [
    { name: 'shops', match: { nodeId: 'shop-*' }, allow: { namespaces: ['shp'] } },
  ];

  it('judges them by policy when no object is labelled with a revision', () => {
    const judgement = judgePolicyChange(
      snapshot(),
      holdingsUnder(new PolicySet(RUNNING), many),
      new PolicySet(typo),
      DEFAULT_POLICY_GUARD,
    );
    assert.deepEqual(judgement.losses, [
      { policy: 'shops', next: 'shops', clients: 3000, objects: 35, lost: 35, held: 'empty' },
    ]);
  });

  it('judges them view by view when objects are, up to a bound, and the rest by policy', () => {
    const labelled = {
      kinds: new Map([
        [
          'networking.istio.io/VirtualService',
          {
            resources: [
              ...Array.from({ length: 30 }, (_, i) => fakeResource(`s${i}`, { namespace: 'shop' })),
              fakeResource('canary', { namespace: 'shop', labels: { 'istio.io/rev': 'rev-1' } }),
            ],
          },
        ],
      ]),
    } as unknown as ConfigSnapshot;
    const judgement = judgePolicyChange(
      labelled,
      holdingsUnder(new PolicySet(RUNNING), many),
      new PolicySet(typo),
      DEFAULT_POLICY_GUARD,
    );
    assert.equal(judgement.losses.length, 65);
    assert.equal(
      judgement.losses.reduce((n, l) => n + l.clients, 0),
      3000,
    );
    // The istiod of revision rev-1 holds the object labelled for it too: it loses most, and comes first.
    assert.deepEqual(judgement.losses[0], {
      policy: 'shops',
      next: 'shops',
      clients: 1,
      objects: 31,
      lost: 31,
      held: 'empty',
    });
  });
});

describe('policy changes', () => {
  function changes(options: { confirmAfterMs?: number } = {}) {
    const applied: string[][] = [];
    const held: Array<number | undefined> = [];
    const running = new PolicySet(RUNNING);
    const c: PolicyChanges = new PolicyChanges({
      running: { set: running, configs: RUNNING },
      rules: { ...DEFAULT_POLICY_GUARD, ...options },
      snapshot,
      holdings: () => holdingsUnder(c.set, CLIENTS),
      apply: (_set, configs) => applied.push(configs.map((p) => p.name)),
      onHeld: (h) => held.push(h === undefined ? undefined : h.losses.length),
      log: componentLogger('test'),
    });
    return { c, applied, held };
  }
  const TYPO: PolicyConfig[] = [
    { name: 'shops', match: { nodeId: 'shop-*' }, allow: { namespaces: ['shp', 'web'] } },
    RUNNING[1] as PolicyConfig,
  ];

  it('holds a change that narrows too far, keeps it held when proposed again, and applies it on confirmation', () => {
    const { c, applied, held } = changes();
    assert.equal(c.propose(new PolicySet(TYPO), TYPO), 'held');
    assert.equal(c.propose(new PolicySet(TYPO), TYPO), 'held');
    assert.deepEqual(applied, []);
    assert.deepEqual(held, [2]);
    assert.equal(c.configs, RUNNING);
    assert.equal(c.report().held?.losses[0]?.lost, 30);
    assert.equal(c.confirm(), true);
    assert.deepEqual(applied, [['shops', 'ops']]);
    assert.equal(c.configs, TYPO);
    assert.equal(c.report().held, undefined);
    assert.equal(c.confirm(), false);
  });

  it('drops the hold when the running policies are proposed again, and replaces it by a change that passes', () => {
    const { c, applied } = changes();
    assert.equal(c.propose(new PolicySet(TYPO), TYPO), 'held');
    assert.equal(c.propose(new PolicySet(RUNNING), structuredClone(RUNNING)), 'withdrawn');
    assert.equal(c.report().held, undefined);
    assert.equal(c.propose(new PolicySet(RUNNING), structuredClone(RUNNING)), 'unchanged');
    assert.equal(c.propose(new PolicySet(TYPO), TYPO), 'held');
    const fine: PolicyConfig[] = [...RUNNING, { name: 'extra', match: { nodeId: 'x-*' } }];
    assert.equal(c.propose(new PolicySet(fine), fine), 'applied');
    assert.equal(c.report().held, undefined);
    assert.deepEqual(applied, [['shops', 'ops', 'extra']]);
  });

  it('applies a held change once confirmAfter has passed since it was first held', async () => {
    const { c, applied, held } = changes({ confirmAfterMs: 40 });
    assert.equal(c.propose(new PolicySet(TYPO), TYPO), 'held');
    await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(applied, []);
    await new Promise((r) => setTimeout(r, 80));
    assert.deepEqual(applied, [['shops', 'ops']]);
    assert.deepEqual(held, [2, undefined]);
    c.close();
  });
});
