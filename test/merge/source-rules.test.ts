/**
 * A source's access rules on their own: which objects a source may write, and why not, as the
 * rejections name it on /debug/rejections and in metrics.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SourceAcl } from '../../src/merge/source-rules.js';

const VS = 'networking.istio.io/VirtualService';
const DR = 'networking.istio.io/DestinationRule';
const SE = 'networking.istio.io/ServiceEntry';

describe('SourceAcl', () => {
  it('admits everything, and says it is unrestricted, when a source has no rules', () => {
    const acl = new SourceAcl({});
    assert.equal(acl.unrestricted, true);
    assert.equal(acl.check({ kind: VS, namespace: 'anything' }), undefined);
    assert.equal(acl.mayContribute(DR), true);
  });

  it('is restricted as soon as it has an allow or a deny list, even one that admits everything', () => {
    assert.equal(new SourceAcl({ allow: { namespaces: ['*'] } }).unrestricted, false);
    assert.equal(new SourceAcl({ deny: {} }).unrestricted, false);
  });

  it('names each reason for refusing an object, in the order allow namespaces, allow kinds, deny namespaces, deny kinds', () => {
    const acl = new SourceAcl({
      allow: { namespaces: ['team-a', 'team-a-*'], kinds: ['VirtualService', DR, 'ServiceEntry'] },
      deny: { namespaces: ['team-a-secret'], kinds: ['ServiceEntry'] },
    });
    assert.equal(acl.check({ kind: VS, namespace: 'shop' }), 'namespace-not-allowed');
    assert.equal(
      acl.check({ kind: 'security.istio.io/AuthorizationPolicy', namespace: 'team-a' }),
      'kind-not-allowed',
    );
    assert.equal(acl.check({ kind: VS, namespace: 'team-a-secret' }), 'namespace-denied');
    assert.equal(acl.check({ kind: SE, namespace: 'team-a' }), 'kind-denied');
    assert.equal(acl.check({ kind: VS, namespace: 'team-a-dev' }), undefined, 'a glob admits');
    assert.equal(acl.check({ kind: DR, namespace: 'team-a' }), undefined, 'a registry key admits');
    // A namespace outside the allow list is reported as such even when the kind is also not allowed.
    assert.equal(
      acl.check({ kind: 'security.istio.io/PeerAuthentication', namespace: 'shop' }),
      'namespace-not-allowed',
    );
  });

  it('matches kinds by short name or by registry key, in allow and deny lists alike', () => {
    const acl = new SourceAcl({ allow: { kinds: ['VirtualService'] }, deny: { kinds: [DR] } });
    assert.equal(acl.check({ kind: VS, namespace: 'x' }), undefined);
    assert.equal(acl.check({ kind: DR, namespace: 'x' }), 'kind-not-allowed');
    const denyOnly = new SourceAcl({ deny: { kinds: [DR], namespaces: ['kube-*'] } });
    assert.equal(denyOnly.check({ kind: DR, namespace: 'x' }), 'kind-denied');
    assert.equal(denyOnly.check({ kind: VS, namespace: 'kube-system' }), 'namespace-denied');
    assert.equal(denyOnly.check({ kind: VS, namespace: 'x' }), undefined);
  });

  it('says whether a source may ever contribute a kind, from its kind rules alone', () => {
    const acl = new SourceAcl({
      allow: { kinds: ['VirtualService', 'ServiceEntry'], namespaces: ['a'] },
      deny: { kinds: ['ServiceEntry'] },
    });
    assert.equal(acl.mayContribute(VS), true);
    assert.equal(acl.mayContribute(DR), false, 'not allowed');
    assert.equal(acl.mayContribute(SE), false, 'denied');
    const namespacesOnly = new SourceAcl({ allow: { namespaces: ['a'] } });
    assert.equal(namespacesOnly.mayContribute(DR), true, 'namespace rules do not limit kinds');
    assert.equal(new SourceAcl({ deny: { kinds: ['VirtualService'] } }).mayContribute(VS), false);
    assert.equal(new SourceAcl({ deny: { kinds: ['VirtualService'] } }).mayContribute(DR), true);
  });
});
