import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { queueScheduler, Subject } from 'rxjs';
import type { SourceEvent } from '../../src/core/source-event.js';
import type { SemanticConflictPolicy } from '../../src/merge/kind-table.js';
import { MergeEngine } from '../../src/merge/merge-engine.js';
import { KINDS } from '../../src/schema/kinds.js';
import { messageType } from '../../src/schema/proto-root.js';
import {
  semanticSubjectsOf,
  semanticSubjectsOfMessage,
  semanticRuleOf,
} from '../../src/schema/semantic-keys.js';
import { readYamlDocuments } from '../../src/schema/yaml-reader.js';

function state(yaml: string): SourceEvent {
  const read = readYamlDocuments(yaml, { file: 'test.yaml', defaultNamespace: 'default' });
  assert.deepEqual(read.errors, []);
  return { type: 'snapshot', resources: read.resources, revision: yaml, errors: [], warnings: [] };
}

const SE_A = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api-a, namespace: one}
spec: {hosts: [api.example.com], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}
`;
const SE_B = SE_A.replace('api-a', 'api-b').replace('namespace: one', 'namespace: two');
const VS_GW = (name: string) => `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: edge}
spec: {hosts: [shop.example.com], gateways: [ingress], http: [{route: [{destination: {host: shop}}]}]}
`;
const DR = (name: string) => `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ${name}, namespace: shop}
spec: {host: reviews}
`;

/** A started engine over two sources, `high` (priority 10) fed by `a` and `low` (1) by `b`. */
function twoSources(policy: SemanticConflictPolicy) {
  const a = new Subject<SourceEvent>();
  const b = new Subject<SourceEvent>();
  const engine = new MergeEngine(
    [
      {
        descriptor: { name: 'high', type: 't', defaultNamespace: 'default' },
        events$: a,
        policy: { priority: 10 },
      },
      {
        descriptor: { name: 'low', type: 't', defaultNamespace: 'default' },
        events$: b,
        policy: { priority: 1 },
      },
    ],
    { scheduler: queueScheduler, syncTimeoutMs: 0, semanticRules: semanticRuleOf, semanticConflicts: policy },
  );
  engine.start();
  return { engine, a, b };
}

function run(policy: SemanticConflictPolicy, high: string, low: string) {
  const { engine, a, b } = twoSources(policy);
  a.next(state(high));
  b.next(state(low));
  const snapshot = engine.current();
  engine.stop();
  return snapshot;
}

describe('semantic conflicts istiod would resolve silently', () => {
  it('reports two ServiceEntries for one host and serves both by default', () => {
    const s = run('serve-all', SE_A, SE_B);
    const conflict = s.conflicts.find((c) => c.type === 'service-entry-host');
    assert.equal(conflict?.subject, 'api.example.com');
    assert.equal(conflict?.resolution, 'served-all');
    assert.equal(s.kinds.get('networking.istio.io/ServiceEntry')?.resources.length, 2);
  });

  it('serves only the higher-priority source’s ServiceEntry when configured to', () => {
    const s = run('highest-priority', SE_A, SE_B);
    const served = s.kinds.get('networking.istio.io/ServiceEntry')?.resources.map((r) => r.name);
    assert.deepEqual(served, ['api-a']);
    const conflict = s.conflicts.find((c) => c.type === 'service-entry-host');
    assert.equal(conflict?.resolution, 'priority');
    assert.deepEqual(
      conflict?.parties.map((p) => [p.name, p.served]),
      [
        ['api-a', true],
        ['api-b', false],
      ],
    );
  });

  it('reports two VirtualServices binding one host on one gateway', () => {
    const s = run('serve-all', VS_GW('front'), VS_GW('other-front'));
    const conflict = s.conflicts.find((c) => c.type === 'gateway-host');
    assert.equal(conflict?.subject, 'edge/ingress shop.example.com');
    assert.equal(conflict?.parties.length, 2);
  });

  it('reports two DestinationRules for one host in one namespace', () => {
    const s = run('serve-all', DR('reviews-a'), DR('reviews-b'));
    assert.equal(s.conflicts.find((c) => c.type === 'destination-rule-host')?.subject, 'shop reviews');
  });

  it('reports nothing for objects that do not clash', () => {
    const s = run('serve-all', SE_A, DR('reviews-a'));
    assert.deepEqual(s.conflicts, []);
  });

  it("derives the same keys from a body's bytes as from its decoded message", () => {
    const documents = [
      SE_A,
      SE_A.replace('hosts: [api.example.com]', 'hosts: [a.example.com, b.example.com]'),
      VS_GW('front'),
      VS_GW('front').replace('gateways: [ingress], ', ''),
      VS_GW('front').replace('gateways: [ingress]', 'gateways: [mesh, other/gw]'),
      DR('reviews'),
      DR('no-host').replace('spec: {host: reviews}', 'spec: {trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}}'),
      DR('selected').replace(
        'spec: {host: reviews}',
        'spec: {host: reviews, workloadSelector: {matchLabels: {app: r}}}',
      ),
      `apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: shop}\nspec: {egress: [{hosts: ["./*"]}]}\n`,
      `apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: s, namespace: shop}\nspec: {workloadSelector: {labels: {app: r}}}\n`,
    ];
    const expected = [
      ['api.example.com'],
      ['a.example.com', 'b.example.com'],
      ['edge/ingress shop.example.com'],
      ['mesh shop.example.com'],
      ['mesh shop.example.com', 'other/gw shop.example.com'],
      ['shop reviews'],
      [],
      [],
      ['shop'],
      [],
    ];
    // The clash each kind's subjects are in: one per kind.
    const types = [
      ...Array<string>(2).fill('service-entry-host'),
      ...Array<string>(3).fill('gateway-host'),
      ...Array<string>(3).fill('destination-rule-host'),
      ...Array<string>(2).fill('sidecar-default'),
    ];
    documents.forEach((yaml, i) => {
      const read = readYamlDocuments(yaml, { file: 'test.yaml', defaultNamespace: 'default' });
      assert.deepEqual(read.errors, []);
      const [r] = read.resources;
      assert.ok(r !== undefined);
      // From the body's bytes, as the merge reads them...
      const alone = semanticSubjectsOf(r);
      // ...and from the decoded message.
      const type = messageType(KINDS.get(r.kind)?.bodyType ?? '');
      const decoded = semanticSubjectsOfMessage(r.kind, r.namespace, type.decode(r.body));
      assert.deepEqual(alone, expected[i], `document ${i}`);
      assert.equal(semanticRuleOf(r.kind)?.type, types[i], `document ${i}`);
      assert.deepEqual(decoded, alone, `document ${i}`);
      // The same body in another namespace names that namespace.
      if (r.kind.endsWith('DestinationRule') && alone.length > 0)
        assert.deepEqual(semanticSubjectsOf({ ...r, namespace: 'other' }), ['other reviews']);
    });
  });

  it('has no clash rule for a kind whose objects never clash', () => {
    assert.equal(semanticRuleOf('networking.istio.io/Gateway'), undefined);
    assert.equal(semanticRuleOf('security.istio.io/AuthorizationPolicy'), undefined);
  });

  it('keeps the same conflict list across snapshots while no conflict changes', () => {
    const { engine, a, b } = twoSources('serve-all');
    a.next(state(SE_A + '---\n' + DR('reviews-a')));
    b.next(state(SE_B));
    const first = engine.current();
    assert.equal(first.conflicts.length, 1);
    // A new version of an object in no conflict, then of one in the conflict: the same parties.
    a.next(state(SE_A + '---\n' + DR('reviews-a').replace('host: reviews', 'host: reviews2')));
    const second = engine.current();
    assert.notEqual(second.generation, first.generation);
    assert.equal(second.conflicts, first.conflicts, 'an unrelated change keeps the list');
    b.next(state(SE_B.replace('number: 443', 'number: 8443')));
    const third = engine.current();
    assert.notEqual(third.generation, second.generation);
    assert.equal(third.conflicts, first.conflicts, 'a party changed in content only keeps the list');
    // The clash ends: a new list.
    b.next(state(SE_B.replace('api.example.com', 'other.example.com')));
    const fourth = engine.current();
    assert.notEqual(fourth.conflicts, first.conflicts);
    assert.equal(fourth.conflicts.length, 0);
    engine.stop();
  });
});
