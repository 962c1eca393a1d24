import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { anonymousIdentity, withNode } from '../../src/downstream/client-identity.js';
import type { PolicyConfig } from '../../src/downstream/policy/client-policy.js';
import { PolicySet } from '../../src/downstream/policy/policy-set.js';
import { ResourceEncoder } from '../../src/downstream/resource-encoder.js';
import { ResponseCache, responseBytes } from '../../src/downstream/response-cache.js';
import type { KindSnapshot } from '../../src/merge/config-snapshot.js';
import { KINDS } from '../../src/schema/kinds.js';
import { messageType } from '../../src/schema/proto-root.js';
import { fakeResource } from '../support/resources.js';

const NAMESPACES = ['shop', 'pay', 'ops', 'istio-system'];
const KIND = 'networking.istio.io/VirtualService';
const TYPE_URL = 'networking.istio.io/v1/VirtualService';
const RESPONSE = messageType('envoy.service.discovery.v3.DiscoveryResponse');
const MCP_RESOURCE = messageType('istio.mcp.v1alpha1.Resource');

const objectArb = fc.record({
  namespace: fc.constantFrom(...NAMESPACES),
  name: fc.constantFrom('a', 'b', 'c', 'd'),
  team: fc.constantFrom('red', 'blue', undefined),
  rev: fc.constantFrom('canary', 'stable', undefined),
});

const policyArb = fc.record({
  revision: fc.constantFrom('canary', 'stable', undefined),
  cidr: fc.constantFrom('127.0.0.0/8', '10.0.0.0/8', undefined),
  allowNs: fc.option(fc.subarray(NAMESPACES, { minLength: 1 }), { nil: undefined }),
  denyTeam: fc.constantFrom('red', undefined),
});

const clientArb = fc.record({
  revision: fc.constantFrom('canary', 'stable', ''),
  peer: fc.constantFrom('127.0.0.1', '10.1.2.3', '192.168.1.1'),
});

type P = {
  revision: string | undefined;
  cidr: string | undefined;
  allowNs: string[] | undefined;
  denyTeam: string | undefined;
};

function toConfig(p: P, i: number): PolicyConfig {
  return {
    name: `p${i}`,
    match: {
      ...(p.revision === undefined ? {} : { revision: p.revision }),
      ...(p.cidr === undefined ? {} : { peerCidrs: [p.cidr] }),
    },
    ...(p.allowNs === undefined ? {} : { allow: { namespaces: p.allowNs } }),
    ...(p.denyTeam === undefined ? {} : { deny: { labels: { team: p.denyTeam } } }),
  };
}

/** The rules written out independently: first matching policy; allow namespaces; deny a team; istiod's revision rule. */
function oracle(policies: P[], client: { revision: string; peer: string }) {
  const inCidr = (peer: string, cidr: string) => peer.startsWith(`${cidr.split('.')[0] ?? ''}.`);
  const index = policies.findIndex(
    (p) =>
      (p.revision === undefined || p.revision === client.revision) &&
      (p.cidr === undefined || inCidr(client.peer, p.cidr)),
  );
  if (policies.length > 0 && index < 0) return undefined;
  const p = policies[index];
  return (o: { namespace: string; team: string | undefined; rev: string | undefined }) =>
    (client.revision === '' || o.rev === undefined || o.rev === client.revision) &&
    (p?.allowNs === undefined || p.allowNs.includes(o.namespace)) &&
    (p?.denyTeam === undefined || o.team !== p.denyTeam);
}

describe('policy views', () => {
  it('never send a client an object outside its policy, and give clients of one view identical bytes', () => {
    fc.assert(
      fc.property(
        fc.array(policyArb, { maxLength: 4 }),
        fc.uniqueArray(objectArb, { selector: (o) => `${o.namespace}/${o.name}`, maxLength: 16 }),
        fc.array(clientArb, { minLength: 1, maxLength: 8 }),
        (policies, objects, clients) => {
          const set = new PolicySet(policies.map(toConfig));
          const cache = new ResponseCache(new ResourceEncoder(KINDS));
          const resources = objects
            .map((o) =>
              fakeResource(o.name, {
                namespace: o.namespace,
                labels: {
                  ...(o.team === undefined ? {} : { team: o.team }),
                  ...(o.rev === undefined ? {} : { 'istio.io/rev': o.rev }),
                },
              }),
            )
            .sort((x, y) => (x.namespace + x.name < y.namespace + y.name ? -1 : 1));
          const kind: KindSnapshot = { kind: KIND, version: 'v', generation: 1, resources };
          const byView = new Map<string, readonly Buffer[]>();
          clients.forEach((c, i) => {
            const identity = withNode(
              anonymousIdentity(i, `${c.peer}:1234`, []),
              `sidecar~${c.peer}~x.y~y.svc.cluster.local`,
              c.revision === '' ? {} : { ISTIO_REVISION: c.revision },
            );
            const admission = set.admit(identity);
            const expected = oracle(policies, c);
            assert.equal(admission.admitted, expected !== undefined, 'admission');
            if (!admission.admitted || expected === undefined) return;
            const response = cache.response(TYPE_URL, admission.view, kind);
            const decoded = RESPONSE.toObject(RESPONSE.decode(responseBytes(response))) as {
              resources?: Array<{ value: Uint8Array }>;
            };
            const got = (decoded.resources ?? []).map(
              (a) =>
                (MCP_RESOURCE.toObject(MCP_RESOURCE.decode(a.value)) as { metadata: { name: string } })
                  .metadata.name,
            );
            const want = objects
              .filter((o) => expected(o))
              .map((o) => `${o.namespace}/${o.name}`)
              .sort();
            assert.deepEqual([...got].sort(), want);
            const shared = byView.get(admission.view.id);
            if (shared !== undefined) assert.equal(shared, response.chunks, 'one response per view');
            byView.set(admission.view.id, response.chunks);
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});
