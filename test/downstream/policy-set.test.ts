import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  anonymousIdentity,
  describeIdentity,
  withNode,
  type ClientIdentity,
} from '../../src/downstream/client-identity.js';
import { PolicySet } from '../../src/downstream/policy/policy-set.js';
import { fakeResource } from '../support/resources.js';

function client(options: { revision?: string; sans?: string[]; node?: string } = {}): ClientIdentity {
  return withNode(
    anonymousIdentity(1, '10.0.0.7:5000', options.sans ?? []),
    options.node ?? 'sidecar~10.0.0.7~istiod-a.istio-system~istio-system.svc.cluster.local',
    options.revision === undefined ? {} : { ISTIO_REVISION: options.revision },
  );
}

const SHOP = fakeResource('cart', { namespace: 'shop' });
const OPS = fakeResource('tool', { namespace: 'ops' });

describe('policy set', () => {
  it('lists its policies by name in configuration order', () => {
    const set = new PolicySet([{ name: 'b' }, { name: 'a' }, { name: 'c' }]);
    assert.deepEqual(set.names(), ['b', 'a', 'c']);
    assert.deepEqual(new PolicySet([]).names(), []);
  });

  it('admits every client to everything when no policy is configured', () => {
    const set = new PolicySet([]);
    const admission = set.admit(client());
    assert.ok(admission.admitted);
    assert.equal(admission.policy, '(none)');
    assert.equal(admission.view.admitsAll, true);
    assert.ok(admission.view.admits(SHOP) && admission.view.admits(OPS));
  });

  it('lets the first matching policy decide, even when a later one matches too', () => {
    const set = new PolicySet([
      { name: 'other-node', match: { nodeId: 'router~*' }, allow: { namespaces: ['ops'] } },
      { name: 'shop-only', match: { revision: 'canary' }, allow: { namespaces: ['shop'] } },
      { name: 'everything', match: { revision: 'canary' } },
    ]);
    const admission = set.admit(client({ revision: 'canary' }));
    assert.ok(admission.admitted);
    assert.equal(admission.policy, 'shop-only');
    assert.equal(admission.view.admitsAll, false);
    assert.ok(admission.view.admits(SHOP));
    assert.ok(!admission.view.admits(OPS));
  });

  it('refuses a client no policy matches, describing the client', () => {
    const set = new PolicySet([{ name: 'canary-only', match: { revision: 'canary' } }]);
    const c = client({ revision: 'stable' });
    const admission = set.admit(c);
    assert.ok(!admission.admitted);
    assert.equal(admission.policy, undefined);
    assert.equal(admission.reason, `no policy matches the client (${describeIdentity(c)})`);
  });

  it('refuses a client without a verified certificate when its policy requires one, naming the policy', () => {
    const set = new PolicySet([{ name: 'mtls', requireClientCert: true }]);
    const c = client();
    const refused = set.admit(c);
    assert.ok(!refused.admitted);
    assert.equal(refused.policy, 'mtls');
    assert.equal(
      refused.reason,
      `policy mtls requires a verified client certificate (${describeIdentity(c)})`,
    );
    const withCert = set.admit(client({ sans: ['URI:spiffe://cluster.local/ns/istio-system/sa/istiod'] }));
    assert.ok(withCert.admitted);
    assert.equal(withCert.policy, 'mtls');
  });

  it('admits a client without a certificate when its policy does not require one', () => {
    for (const requireClientCert of [false, undefined]) {
      const set = new PolicySet([
        { name: 'open', ...(requireClientCert === undefined ? {} : { requireClientCert }) },
      ]);
      const admission = set.admit(client());
      assert.ok(admission.admitted, `requireClientCert: ${String(requireClientCert)}`);
      assert.equal(admission.policy, 'open');
    }
  });

  it('gives clients of one policy and revision one view, and other revisions or policies another', () => {
    const set = new PolicySet([
      { name: 'canary', match: { revision: 'canary' }, allow: { namespaces: ['shop'] } },
      { name: 'rest', allow: { namespaces: ['shop'] } },
    ]);
    const view = (c: ClientIdentity) => {
      const a = set.admit(c);
      assert.ok(a.admitted);
      return a.view;
    };
    const a = view(client({ revision: 'canary', node: 'sidecar~1~a.x~x.svc.cluster.local' }));
    const b = view(client({ revision: 'canary', node: 'sidecar~2~b.y~y.svc.cluster.local' }));
    assert.equal(a.id, b.id);
    const stable = view(client({ revision: 'stable' }));
    const none = view(client());
    assert.notEqual(stable.id, a.id);
    assert.notEqual(none.id, stable.id);
    const canaryObject = fakeResource('c', { namespace: 'shop', labels: { 'istio.io/rev': 'canary' } });
    assert.ok(a.admits(canaryObject));
    assert.ok(!stable.admits(canaryObject), 'the revision rule holds on top of the policy');
    assert.ok(none.admits(canaryObject), 'a client without a revision gets every revision');
  });
});
