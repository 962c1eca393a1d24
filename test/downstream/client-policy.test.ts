import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { anonymousIdentity, withNode, type ClientIdentity } from '../../src/downstream/client-identity.js';
import { ClientPolicy, type PolicyConfig, policyView } from '../../src/downstream/policy/client-policy.js';
import { fakeResource } from '../support/resources.js';

function client(
  options: { peer?: string; node?: string; metadata?: Record<string, unknown>; sans?: string[] } = {},
): ClientIdentity {
  return withNode(
    anonymousIdentity(1, options.peer ?? '10.1.2.3:4000', options.sans ?? []),
    options.node ?? 'sidecar~10.1.2.3~istiod-a.istio-system~istio-system.svc.cluster.local',
    options.metadata ?? {},
  );
}

function matches(match: PolicyConfig['match'], c: ClientIdentity): boolean {
  return new ClientPolicy({ name: 'p', match }).matches(c);
}

describe('client policy', () => {
  it('applies to every client when it names no match', () => {
    assert.ok(matches(undefined, client()));
    assert.ok(matches({}, client({ peer: '[::1]:1' })));
  });

  it('applies to clients whose node id fits its glob', () => {
    assert.ok(matches({ nodeId: 'sidecar~*' }, client()));
    assert.ok(!matches({ nodeId: 'router~*' }, client()));
  });

  it('applies to clients whose node metadata has every named key with a fitting string value', () => {
    const metadata = { CLUSTER_ID: 'east-1', ISTIO_VERSION: '1.22.0', REPLICAS: 3 };
    assert.ok(matches({ metadata: { CLUSTER_ID: 'east-*', ISTIO_VERSION: '1.22.*' } }, client({ metadata })));
    assert.ok(
      !matches({ metadata: { CLUSTER_ID: 'east-*', ISTIO_VERSION: '1.21.*' } }, client({ metadata })),
    );
    assert.ok(!matches({ metadata: { MISSING: '*' } }, client({ metadata })), 'an absent key does not match');
    assert.ok(
      !matches({ metadata: { REPLICAS: '*' } }, client({ metadata })),
      'a non-string value does not match',
    );
  });

  it('applies to clients whose peer is inside one of its CIDRs, IPv4 or IPv6', () => {
    const cidrs = ['192.168.0.0/16', '10.1.2.3', 'fd00::/8', '::1'];
    assert.ok(matches({ peerCidrs: cidrs }, client({ peer: '192.168.44.1:1' })));
    assert.ok(matches({ peerCidrs: cidrs }, client({ peer: '10.1.2.3:1' })), 'a bare IPv4 address is a /32');
    assert.ok(!matches({ peerCidrs: cidrs }, client({ peer: '10.1.2.4:1' })), 'and only that address');
    assert.ok(matches({ peerCidrs: cidrs }, client({ peer: '[fd12::5]:1' })));
    assert.ok(matches({ peerCidrs: cidrs }, client({ peer: '[::1]:1' })), 'a bare IPv6 address is a /128');
    assert.ok(!matches({ peerCidrs: cidrs }, client({ peer: '[::2]:1' })), 'and only that address');
    assert.ok(!matches({ peerCidrs: cidrs }, client({ peer: '172.16.0.1:1' })));
    assert.ok(!matches({ peerCidrs: cidrs }, client({ peer: 'unix:/run/x.sock' })), 'a peer without an IP');
  });

  it('refuses to compile a CIDR that is not one, naming it', () => {
    assert.throws(() => new ClientPolicy({ name: 'bad', match: { peerCidrs: ['10.0.0.0/8', 'east/8'] } }), {
      message: 'not a CIDR: east/8',
    });
  });

  it('applies to clients with a certificate SAN fitting a glob, with or without its type', () => {
    const sans = ['DNS:istiod.corp', 'URI:spiffe://cluster.local/ns/istio-system/sa/istiod'];
    assert.ok(matches({ certSan: ['spiffe://cluster.local/ns/istio-system/*'] }, client({ sans })));
    assert.ok(matches({ certSan: ['DNS:*.corp'] }, client({ sans })));
    assert.ok(!matches({ certSan: ['DNS:*.example'] }, client({ sans })));
    assert.ok(!matches({ certSan: ['*'] }, client()), 'no certificate, no SAN to fit');
  });

  it('applies to clients of its revision only', () => {
    assert.ok(matches({ revision: 'canary' }, client({ metadata: { ISTIO_REVISION: 'canary' } })));
    assert.ok(!matches({ revision: 'canary' }, client({ metadata: { ISTIO_REVISION: 'stable' } })));
    assert.ok(!matches({ revision: 'canary' }, client()));
  });

  it('applies only when every part of its match fits', () => {
    const match = { nodeId: 'sidecar~*', revision: 'canary' };
    assert.ok(matches(match, client({ metadata: { ISTIO_REVISION: 'canary' } })));
    assert.ok(!matches(match, client({ node: 'router~x', metadata: { ISTIO_REVISION: 'canary' } })));
    assert.ok(!matches(match, client({ metadata: { ISTIO_REVISION: 'stable' } })));
  });

  it('admits objects that fit every list of allow and no list of deny', () => {
    const policy = new ClientPolicy({
      name: 'p',
      allow: { namespaces: ['shop', 'pay'], kinds: ['VirtualService', 'networking.istio.io/Gateway'] },
      deny: { labels: { secret: 'yes' }, names: ['tmp-*'] },
    });
    assert.equal(policy.admitsAll, false);
    const vs = (namespace: string, name: string, labels: Record<string, string> = {}) =>
      fakeResource(name, { namespace, labels });
    assert.ok(policy.admits(vs('shop', 'cart')), 'kind by its short name');
    assert.ok(policy.admits(fakeResource('gw', { namespace: 'pay', kind: 'networking.istio.io/Gateway' })));
    assert.ok(!policy.admits(vs('ops', 'cart')), 'namespace not allowed');
    assert.ok(
      !policy.admits(fakeResource('dr', { namespace: 'shop', kind: 'networking.istio.io/DestinationRule' })),
    );
    assert.ok(!policy.admits(vs('shop', 'cart', { secret: 'yes' })), 'denied by a label');
    assert.ok(policy.admits(vs('shop', 'cart', { secret: 'no' })), 'the label value must match to deny');
    assert.ok(!policy.admits(vs('shop', 'tmp-1')), 'denied by a name');
  });

  it('needs every allowed label to admit an object', () => {
    const policy = new ClientPolicy({ name: 'p', allow: { labels: { team: 'blue', tier: 'web' } } });
    assert.ok(policy.admits(fakeResource('a', { labels: { team: 'blue', tier: 'web', x: 'y' } })));
    assert.ok(!policy.admits(fakeResource('a', { labels: { team: 'blue' } })));
    assert.ok(!policy.admits(fakeResource('a', { labels: { team: 'blue', tier: 'db' } })));
  });

  it('admits everything when it has neither allow nor deny', () => {
    const open = new ClientPolicy({ name: 'open', match: { revision: 'x' } });
    assert.equal(open.admitsAll, true);
    assert.ok(open.admits(fakeResource('a')));
    assert.equal(new ClientPolicy({ name: 'd', deny: { names: ['x'] } }).admitsAll, false);
    assert.equal(new ClientPolicy({ name: 'a', allow: { names: ['x'] } }).admitsAll, false);
  });

  it('keeps its fingerprint across a reload that changes only the match, and changes it with the filter', () => {
    const base = new ClientPolicy({ name: 'p', match: { revision: 'a' }, allow: { namespaces: ['shop'] } });
    const rematched = new ClientPolicy({
      name: 'p',
      match: { revision: 'b' },
      allow: { namespaces: ['shop'] },
    });
    const refiltered = new ClientPolicy({
      name: 'p',
      match: { revision: 'a' },
      allow: { namespaces: ['pay'] },
    });
    const denying = new ClientPolicy({ name: 'p', match: { revision: 'a' }, deny: { namespaces: ['shop'] } });
    assert.equal(base.fingerprint, rematched.fingerprint);
    assert.notEqual(base.fingerprint, refiltered.fingerprint);
    assert.notEqual(base.fingerprint, denying.fingerprint);
    assert.equal(base.fingerprint.length, 10);
    assert.equal(base.name, 'p');
  });

  it('views: a client with a revision gets objects of its revision and unlabelled ones, not other revisions', () => {
    const canary = fakeResource('c', { labels: { 'istio.io/rev': 'canary' } });
    const stable = fakeResource('s', { labels: { 'istio.io/rev': 'stable' } });
    const plain = fakeResource('p');
    const view = policyView(undefined, 'canary');
    assert.equal(view.admitsAll, false);
    assert.ok(view.admits(canary) && view.admits(plain));
    assert.ok(!view.admits(stable));
    const everything = policyView(undefined, '');
    assert.equal(everything.admitsAll, true);
    assert.ok(everything.admits(canary) && everything.admits(stable) && everything.admits(plain));
  });

  it('views: a policy filter applies on top of the revision rule, and an open policy filters nothing', () => {
    const policy = new ClientPolicy({ name: 'shop', allow: { namespaces: ['shop'] } });
    const view = policyView(policy, '');
    assert.equal(view.admitsAll, false);
    assert.ok(view.admits(fakeResource('a', { namespace: 'shop' })));
    assert.ok(!view.admits(fakeResource('a', { namespace: 'ops' })));
    const both = policyView(policy, 'canary');
    assert.ok(!both.admits(fakeResource('a', { namespace: 'shop', labels: { 'istio.io/rev': 'stable' } })));
    assert.ok(!both.admits(fakeResource('a', { namespace: 'ops', labels: { 'istio.io/rev': 'canary' } })));
    const open = policyView(new ClientPolicy({ name: 'open' }), '');
    assert.equal(open.admitsAll, true);
  });

  it('views: ids are equal exactly when policy name, filter and revision are', () => {
    const p = new ClientPolicy({ name: 'p', allow: { namespaces: ['shop'] } });
    const same = new ClientPolicy({ name: 'p', match: { revision: 'z' }, allow: { namespaces: ['shop'] } });
    const other = new ClientPolicy({ name: 'p', allow: { namespaces: ['pay'] } });
    const renamed = new ClientPolicy({ name: 'q', allow: { namespaces: ['shop'] } });
    assert.equal(policyView(p, 'a').id, policyView(same, 'a').id);
    assert.notEqual(policyView(p, 'a').id, policyView(p, 'b').id);
    assert.notEqual(policyView(p, 'a').id, policyView(other, 'a').id);
    assert.notEqual(policyView(p, 'a').id, policyView(renamed, 'a').id);
    assert.notEqual(policyView(undefined, 'a').id, policyView(p, 'a').id);
    assert.equal(policyView(undefined, 'a').id, policyView(undefined, 'a').id);
  });
});
