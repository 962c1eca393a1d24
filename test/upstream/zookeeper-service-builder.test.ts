import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ContentDigest } from '../../src/core/content-digest.js';
import type { ConfigResource } from '../../src/core/resource.js';
import { messageType } from '../../src/schema/proto-root.js';
import { parseProviderNode, type ProviderParse } from '../../src/upstream/zookeeper/dubbo-provider-url.js';
import { DubboHostTemplate } from '../../src/upstream/zookeeper/dubbo-host-template.js';
import {
  DubboServiceBuilder,
  SERVICE_ENTRY_KIND,
  WORKLOAD_ENTRY_KIND,
  type DubboServiceBuilderOptions,
  type EndpointMode,
  type RegistryProviders,
} from '../../src/upstream/zookeeper/dubbo-service-builder.js';
import { GlobSelector } from '../../src/upstream/zookeeper/glob-selector.js';
import { encodeLikeJava, providerUrl, type ProviderSpec } from '../support/dubbo-registry.js';

function builder(options: Partial<DubboServiceBuilderOptions> = {}): DubboServiceBuilder {
  let clock = 1_000;
  return new DubboServiceBuilder(
    {
      namespace: 'dubbo',
      hostTemplate: new DubboHostTemplate(),
      endpoints: 'inline',
      applications: new GlobSelector(),
      labelParameters: new GlobSelector({ exclude: ['timestamp', 'pid'] }),
      root: '/dubbo',
      originPrefix: 'zookeeper://zk:2181',
      ...options,
    },
    () => ({ seconds: clock++, nanos: 0 }),
  );
}

/** A registry view, as the watcher and the source hand it over. */
function registry(specs: readonly (ProviderSpec | { iface: string; rawNode: string })[]): RegistryProviders {
  const out = new Map<string, Map<string, ProviderParse>>();
  for (const s of specs) {
    const node = 'rawNode' in s ? s.rawNode : encodeLikeJava(providerUrl(s));
    let nodes = out.get(s.iface);
    if (nodes === undefined) out.set(s.iface, (nodes = new Map<string, ProviderParse>()));
    nodes.set(node, parseProviderNode(node, s.iface));
  }
  return out;
}

function decode(r: ConfigResource): Record<string, unknown> {
  const type = messageType(
    r.kind === SERVICE_ENTRY_KIND
      ? 'istio.networking.v1alpha3.ServiceEntry'
      : 'istio.networking.v1alpha3.WorkloadEntry',
  );
  return type.toObject(type.decode(r.body), { enums: String, defaults: false });
}

const names = (rs: readonly ConfigResource[]): string[] =>
  rs.map((r) => `${r.kind.split('/')[1] ?? ''} ${r.name}`);

describe('building ServiceEntries from Dubbo providers', () => {
  it('makes one ServiceEntry per interface, group and version', () => {
    const result = builder().build(
      registry([
        { iface: 'com.a.Svc', ip: '10.0.0.1' },
        { iface: 'com.a.Svc', ip: '10.0.0.2' },
        { iface: 'com.a.Svc', ip: '10.0.0.3', version: '2.0' },
        { iface: 'com.a.Svc', ip: '10.0.0.4', group: 'eu', version: '2.0' },
        { iface: 'com.b.Other', ip: '10.0.0.5' },
      ]),
    );
    assert.deepEqual(result.errors, []);
    assert.equal(result.services, 4);
    assert.deepEqual(names(result.resources), [
      'ServiceEntry com.a.svc',
      'ServiceEntry 2-0.com.a.svc',
      'ServiceEntry 2-0.eu.com.a.svc',
      'ServiceEntry com.b.other',
    ]);
    const se = decode(result.resources[0] as ConfigResource);
    assert.deepEqual(se['hosts'], ['com.a.svc']);
    assert.equal((se['endpoints'] as unknown[]).length, 2);
    assert.equal(result.resources[0]?.namespace, 'dubbo');
    assert.equal(result.resources[0]?.origin.file, 'zookeeper://zk:2181/dubbo/com.a.Svc/providers');
  });

  it('reports an interface whose host collides with another, and keeps the one listed first', () => {
    const result = builder().build(
      registry([
        { iface: 'com.a.Bar-Svc', ip: '10.0.0.1' },
        { iface: 'com.a.Bar_Svc', ip: '10.0.0.2' },
      ]),
    );
    assert.deepEqual(names(result.resources), ['ServiceEntry com.a.bar-svc']);
    assert.equal(result.errors.length, 1);
    assert.equal(
      result.errors[0]?.describe(),
      '/dubbo/com.a.Bar_Svc/providers field spec.hosts[0]: host com.a.bar-svc is also generated for com.a.Bar-Svc (group "", version ""), which holds it; com.a.Bar_Svc (group "", version "") is not served',
    );
    const endpoints = decode(result.resources[0] as ConfigResource)['endpoints'] as Array<{
      address: string;
    }>;
    assert.deepEqual(
      endpoints.map((e) => e.address),
      ['10.0.0.1'],
      'never merged',
    );
  });

  it('gives a contested host to the service registered first, in a builder that saw it come and in a new one', () => {
    const running = { iface: 'com.foo.Svc', ip: '10.0.0.1', params: { timestamp: '1700000000000' } };
    // Sorts first, registered later: both services make the host com.foo.svc.
    const newcomer = { iface: 'com.Foo.Svc', ip: '10.0.0.2', params: { timestamp: '1700000060000' } };
    const address = (result: ReturnType<DubboServiceBuilder['build']>): unknown =>
      (decode(result.resources[0] as ConfigResource)['endpoints'] as Array<{ address: string }>).map(
        (e) => e.address,
      );
    const b = builder();
    b.build(registry([running]));
    const seen = b.build(registry([running, newcomer]));
    // Another replica, or this one restarted, sees both at once.
    const fresh = builder().build(registry([newcomer, running]));
    for (const result of [seen, fresh]) {
      assert.deepEqual(names(result.resources), ['ServiceEntry com.foo.svc']);
      assert.deepEqual(address(result), ['10.0.0.1']);
      assert.equal(result.errors.length, 1);
      assert.match(
        result.errors[0]?.message ?? '',
        /generated for com\.foo\.Svc .*; com\.Foo\.Svc .* is not served/,
      );
    }
  });

  it('reports object names that would collide after shortening to 253 characters', () => {
    // Two hosts of 255 characters that differ only past the 244th: names are cut with a hash of the whole.
    const long = (last: string): string =>
      `${Array.from({ length: 4 }, () => 'a'.repeat(60)).join('.')}.b${last}`;
    const template = new DubboHostTemplate('{interface}');
    const result = builder({ hostTemplate: template }).build(
      registry([
        { iface: long('x'), ip: '10.0.0.1' },
        { iface: long('y'), ip: '10.0.0.2' },
      ]),
    );
    assert.deepEqual(result.errors, []);
    const [first, second] = result.resources;
    assert.notEqual(first?.name, second?.name);
    assert.ok((first?.name.length ?? 0) <= 253);
  });

  it('reports a bad registration with its znode path and serves the rest', () => {
    const result = builder().build(
      registry([
        { iface: 'com.a.Svc', ip: '10.0.0.1' },
        { iface: 'com.a.Svc', rawNode: 'nonsense' },
      ]),
    );
    assert.equal(result.services, 1);
    assert.equal(result.errors.length, 1);
    assert.equal(result.errors[0]?.code, 'DECODE');
    assert.equal(result.errors[0]?.location.file, '/dubbo/com.a.Svc/providers/nonsense');
  });

  it('reports a host the template cannot make valid', () => {
    const result = builder({ hostTemplate: new DubboHostTemplate('{interface}.{version}') }).build(
      registry([{ iface: 'com.a.Svc', ip: '10.0.0.1', version: '7' }]),
    );
    assert.equal(result.resources.length, 0);
    assert.match(
      result.errors[0]?.describe() ?? '',
      /^\/dubbo\/com\.a\.Svc\/providers field spec\.hosts\[0\]: cannot make a valid host/,
    );
  });

  it('names ports tcp-<protocol>, with the number when there are several, and routes each port to every provider', () => {
    const single = decode(
      builder().build(registry([{ iface: 'com.a.Svc', ip: '10.0.0.1' }])).resources[0] as ConfigResource,
    );
    assert.deepEqual(single['ports'], [{ number: 20880, protocol: 'TCP', name: 'tcp-dubbo' }]);

    const result = builder().build(
      registry([
        { iface: 'com.a.Svc', ip: '10.0.0.1', port: 20881 },
        { iface: 'com.a.Svc', ip: '10.0.0.2', port: 20880 },
        { iface: 'com.a.Svc', ip: '10.0.0.3', port: 50051, protocol: 'tri' },
      ]),
    );
    const se = decode(result.resources[0] as ConfigResource);
    assert.deepEqual(se['ports'], [
      { number: 20880, protocol: 'TCP', name: 'tcp-dubbo-20880' },
      { number: 20881, protocol: 'TCP', name: 'tcp-dubbo-20881' },
      { number: 50051, protocol: 'TCP', name: 'tcp-tri-50051' },
    ]);
    assert.deepEqual(
      (se['endpoints'] as Array<{ ports: unknown }>).map((e) => e.ports),
      [
        { 'tcp-dubbo-20880': 20881, 'tcp-dubbo-20881': 20881 },
        { 'tcp-dubbo-20880': 20880, 'tcp-dubbo-20881': 20880 },
        { 'tcp-tri-50051': 50051 },
      ],
    );
    assert.equal(result.warnings.length, 1, 'mixing protocols is worth a warning');
    assert.match(result.warnings[0]?.message ?? '', /mixes protocols \(dubbo, tri\)/);
  });

  it('serves one endpoint for a provider registered twice, the newer registration', () => {
    const result = builder().build(
      registry([
        { iface: 'com.a.Svc', ip: '10.0.0.1', params: { timestamp: '200', release: 'new' } },
        { iface: 'com.a.Svc', ip: '10.0.0.1', params: { timestamp: '100', release: 'old' } },
      ]),
    );
    const endpoints = decode(result.resources[0] as ConfigResource)['endpoints'] as Array<{
      labels: Record<string, string>;
    }>;
    assert.equal(endpoints.length, 1);
    assert.equal(endpoints[0]?.labels['release'], 'new');
    assert.equal(result.warnings.length, 1);
  });

  it('leaves out providers of applications the selection rejects', () => {
    const result = builder({
      applications: new GlobSelector({ include: ['shop-*'], exclude: ['shop-test'] }),
    }).build(
      registry([
        { iface: 'com.a.Svc', ip: '10.0.0.1', application: 'shop-api' },
        { iface: 'com.a.Svc', ip: '10.0.0.2', application: 'shop-test' },
        { iface: 'com.b.Svc', ip: '10.0.0.3', application: 'billing' },
      ]),
    );
    assert.deepEqual(names(result.resources), ['ServiceEntry com.a.svc']);
    assert.equal((decode(result.resources[0] as ConfigResource)['endpoints'] as unknown[]).length, 1);
  });

  it('makes WorkloadEntries that the ServiceEntry selects, when configured', () => {
    const result = builder({ endpoints: 'workload-entries' }).build(
      registry([
        { iface: 'com.a.Svc', ip: '10.0.0.1', params: { weight: '10' } },
        { iface: 'com.a.Svc', ip: 'fd00::1' },
      ]),
    );
    assert.deepEqual(names(result.resources), [
      'ServiceEntry com.a.svc',
      'WorkloadEntry com.a.svc-10-0-0-1-20880',
      'WorkloadEntry com.a.svc-fd00-1-20880',
    ]);
    const se = decode(result.resources[0] as ConfigResource);
    assert.equal(se['endpoints'], undefined);
    assert.deepEqual(se['workload_selector'], { labels: { 'meshmux.io/dubbo-service': 'com.a.svc' } });
    const we = decode(result.resources[1] as ConfigResource);
    assert.equal(we['address'], '10.0.0.1');
    assert.equal(we['weight'], 10);
    assert.deepEqual(we['ports'], { 'tcp-dubbo': 20880 });
    assert.equal((we['labels'] as Record<string, string>)['meshmux.io/dubbo-service'], 'com.a.svc');
    assert.equal(result.resources[1]?.labels['meshmux.io/dubbo-service'], 'com.a.svc');
    assert.equal(result.resources[1]?.kind, WORKLOAD_ENTRY_KIND);
  });

  it('reuses unchanged objects and keeps createTime across changes', () => {
    const b = builder();
    const first = b.build(
      registry([
        { iface: 'com.a.Svc', ip: '10.0.0.1' },
        { iface: 'com.b.Svc', ip: '10.0.0.2' },
      ]),
    );
    const second = b.build(
      registry([
        { iface: 'com.a.Svc', ip: '10.0.0.1' },
        { iface: 'com.a.Svc', ip: '10.0.0.3' },
        { iface: 'com.b.Svc', ip: '10.0.0.2' },
      ]),
    );
    assert.notEqual(second.resources[0]?.version, first.resources[0]?.version, 'com.a.Svc changed');
    assert.deepEqual(second.resources[0]?.createTime, first.resources[0]?.createTime);
    assert.equal(second.resources[1], first.resources[1], 'com.b.Svc is the very same object');
  });

  it('encodes equal input to equal bytes', () => {
    const specs = [
      { iface: 'com.a.Svc', ip: '10.0.0.2', params: { zeta: '1', alpha: '2' } },
      { iface: 'com.a.Svc', ip: '10.0.0.1' },
    ];
    const a = builder().build(registry(specs));
    const b = builder().build(registry([...specs].reverse()));
    assert.equal(a.resources[0]?.version, b.resources[0]?.version);
  });
});

describe('building again as registrations change', () => {
  /** An applications selection that counts the providers it is asked about. */
  class CountingSelector extends GlobSelector {
    asked = 0;
    override matches(name: string): boolean {
      this.asked++;
      return super.matches(name);
    }
  }

  it('looks only at the interfaces whose registrations changed', () => {
    const applications = new CountingSelector();
    const b = builder({ applications });
    const specs: ProviderSpec[] = [];
    for (let i = 0; i < 1000; i++) {
      for (let p = 1; p <= 3; p++) specs.push({ iface: `com.bulk.Svc${i}`, ip: `10.0.${p}.${i % 250}` });
    }
    // The registry as the source keeps it: the outer map updated, an interface's map replaced.
    const view = new Map(registry(specs));
    const first = b.build(view);
    assert.equal(applications.asked, 3000);
    applications.asked = 0;
    view.set(
      'com.bulk.Svc7',
      registry([...specs.slice(21, 24), { iface: 'com.bulk.Svc7', ip: '10.9.9.9' }]).get(
        'com.bulk.Svc7',
      ) as ReadonlyMap<string, ProviderParse>,
    );
    const second = b.build(view);
    assert.equal(applications.asked, 4, 'the changed interface alone');
    assert.equal(second.resources.length, 1000);
    const changed = second.resources.filter((r, i) => r !== first.resources[i]);
    assert.deepEqual(names(changed), ['ServiceEntry com.bulk.svc7']);
    applications.asked = 0;
    view.delete('com.bulk.Svc8');
    const third = b.build(view);
    assert.equal(applications.asked, 0);
    assert.equal(third.resources.length, 999);
    assert.ok(!names(third.resources).includes('ServiceEntry com.bulk.svc8'));
  });

  it('builds the same objects, errors, warnings and revision as builds that reuse nothing', () => {
    const IFACES = ['com.a.Bar-Svc', 'com.a.Bar_Svc', 'com.a.Svc', 'com.b.Svc'] as const;
    const specArb = fc.oneof(
      {
        weight: 9,
        arbitrary: fc.record(
          {
            iface: fc.constantFrom(...IFACES),
            ip: fc.constantFrom('10.0.0.1', '10.0.0.2', '10.0.0.3'),
            port: fc.constantFrom(20880, 20881),
            protocol: fc.constantFrom('dubbo', 'tri'),
            application: fc.constantFrom('demo-provider', 'blocked'),
            group: fc.constant('1.0'),
            version: fc.constant('1.0'),
            params: fc.record({ timestamp: fc.constantFrom('100', '200'), zone: fc.constantFrom('a', 'b') }),
          },
          { requiredKeys: ['iface', 'ip', 'params'] },
        ),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          iface: fc.constantFrom(...IFACES),
          rawNode: fc.constantFrom('nonsense', 'dubbo%3A%2F%2Fx'),
        }),
      },
    );
    const stepArb = fc.record({
      add: fc.array(specArb, { maxLength: 3 }),
      remove: fc.array(fc.nat(), { maxLength: 3 }),
    });
    const summary = (result: ReturnType<DubboServiceBuilder['build']>, times = true): unknown => ({
      resources: result.resources.map(
        (r) => `${r.kind} ${r.name} ${r.version}${times ? ` ${r.createTime.seconds}` : ''}`,
      ),
      errors: result.errors.map((e) => e.describe()),
      warnings: result.warnings.map((e) => e.describe()),
      services: result.services,
      revision: result.revision,
    });
    fc.assert(
      fc.property(
        fc.constantFrom<EndpointMode>('inline', 'workload-entries'),
        fc.array(stepArb, { minLength: 1, maxLength: 12 }),
        (endpoints, steps) => {
          const options = { endpoints, applications: new GlobSelector({ exclude: ['blocked'] }) };
          const reusing = builder(options);
          const fresh = builder(options);
          let specs: Array<ProviderSpec | { iface: string; rawNode: string }> = [];
          const view = new Map<string, ReadonlyMap<string, ProviderParse>>();
          for (const step of steps) {
            const before = specs;
            specs = specs.filter((_, i) => !step.remove.some((r) => r % Math.max(1, before.length) === i));
            specs.push(...step.add);
            // Only the interfaces whose registrations changed get a new map, as from the source.
            const next = registry(specs);
            for (const iface of IFACES) {
              const map = next.get(iface);
              const old = view.get(iface);
              if (map === undefined) view.delete(iface);
              else if (old === undefined || !sameNodes(old, map)) view.set(iface, map);
            }
            const a = reusing.build(view);
            // The same history, every interface a new map each time: only built objects reused.
            const b = fresh.build(registry(specs));
            assert.deepEqual(summary(a), summary(b));
            // A builder that never saw the history (another replica, a restart) agrees but for
            // creation times: even on which of two colliding services holds a host.
            const c = builder(options).build(registry(specs));
            assert.deepEqual(summary(a, false), summary(c, false));
            const digest = new ContentDigest(false);
            for (const r of a.resources) digest.add(r);
            assert.equal(a.revision, digest.version(), 'the revision is that of the objects served');
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it('serves a service left out by a collision once the service holding its host is gone', () => {
    const b = builder();
    const holder = { iface: 'com.a.Bar-Svc', ip: '10.0.0.1' };
    const newcomer = { iface: 'com.a.Bar_Svc', ip: '10.0.0.2' };
    const view = new Map(registry([holder]));
    b.build(view);
    view.set(newcomer.iface, registry([newcomer]).get(newcomer.iface) as ReadonlyMap<string, ProviderParse>);
    const both = b.build(view);
    assert.equal(both.errors.length, 1);
    assert.equal(both.resources[0]?.annotations['meshmux.io/dubbo-interface'], 'com.a.Bar-Svc');
    view.delete(holder.iface);
    const alone = b.build(view);
    assert.deepEqual(alone.errors, []);
    assert.deepEqual(names(alone.resources), ['ServiceEntry com.a.bar-svc']);
    assert.equal(alone.resources[0]?.annotations['meshmux.io/dubbo-interface'], 'com.a.Bar_Svc');
  });

  it('gives a host back when its service leaves: one coming back with a newcomer has no claim to it', () => {
    const b = builder();
    const leaving = { iface: 'com.a.Bar_Svc', ip: '10.0.0.1' };
    const other = { iface: 'com.c.Svc', ip: '10.0.0.3' };
    b.build(registry([leaving, other]));
    b.build(registry([other]));
    // Both now claim the host; the one listed first takes it, as any two newcomers.
    const result = b.build(registry([leaving, { iface: 'com.a.Bar-Svc', ip: '10.0.0.2' }, other]));
    assert.equal(result.errors.length, 1);
    assert.equal(result.resources[0]?.annotations['meshmux.io/dubbo-interface'], 'com.a.Bar-Svc');
  });

  it('gives an object that was gone and comes back a new creation time', () => {
    const b = builder();
    const a = { iface: 'com.a.Svc', ip: '10.0.0.1' };
    const other = { iface: 'com.b.Svc', ip: '10.0.0.2' };
    const view = new Map(registry([a, other]));
    const first = b.build(view);
    view.delete(a.iface);
    b.build(view);
    view.set(a.iface, registry([a]).get(a.iface) as ReadonlyMap<string, ProviderParse>);
    const back = b.build(view);
    assert.equal(back.resources[0]?.version, first.resources[0]?.version);
    assert.notDeepEqual(back.resources[0]?.createTime, first.resources[0]?.createTime);
    assert.equal(back.resources[1], first.resources[1], 'the other interface untouched');
  });

  it('gives the same registrations the same revision whenever and in whatever order they were built', () => {
    const specs: ProviderSpec[] = [
      { iface: 'com.a.Svc', ip: '10.0.0.1' },
      { iface: 'com.b.Svc', ip: '10.0.0.2' },
    ];
    const early = builder().build(registry(specs));
    const late = builder();
    late.build(registry([{ iface: 'com.c.Svc', ip: '10.0.0.3' }]));
    late.build(registry([specs[1] as ProviderSpec, { iface: 'com.c.Svc', ip: '10.0.0.3' }]));
    const again = late.build(registry([...specs].reverse()));
    assert.notDeepEqual(again.resources[0]?.createTime, early.resources[0]?.createTime);
    assert.equal(again.revision, early.revision);
    const moved = late.build(registry([specs[0] as ProviderSpec, { iface: 'com.b.Svc', ip: '10.0.0.9' }]));
    assert.notEqual(moved.revision, early.revision);
  });
});

/** Whether two registrations of one interface list the same znodes. */
function sameNodes(a: ReadonlyMap<string, ProviderParse>, b: ReadonlyMap<string, ProviderParse>): boolean {
  return a.size === b.size && [...a.keys()].every((node) => b.has(node));
}
