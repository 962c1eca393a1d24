import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigResource } from '../../src/core/resource.js';
import { messageType } from '../../src/schema/proto-root.js';
import { parseProviderNode, type ProviderParse } from '../../src/upstream/zookeeper/dubbo-provider-url.js';
import { DubboHostTemplate } from '../../src/upstream/zookeeper/dubbo-host-template.js';
import {
  DubboServiceBuilder,
  SERVICE_ENTRY_KIND,
  WORKLOAD_ENTRY_KIND,
  type DubboServiceBuilderOptions,
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

  it('lets the service that held a host keep it when a newcomer that sorts first collides', () => {
    const b = builder();
    b.build(registry([{ iface: 'com.a.Svc', ip: '10.0.0.1', version: '1.0' }]));
    // A group "1.0" without a version renders the same host as the version "1.0" without a group.
    const result = b.build(
      registry([
        { iface: 'com.a.Svc', ip: '10.0.0.1', version: '1.0' },
        { iface: 'com.a.Svc', ip: '10.0.0.2', group: '1.0' },
      ]),
    );
    assert.equal(result.errors.length, 1);
    assert.match(result.errors[0]?.message ?? '', /group "1\.0", version ""\) is not served/);
    const endpoints = decode(result.resources[0] as ConfigResource)['endpoints'] as Array<{
      address: string;
    }>;
    assert.deepEqual(
      endpoints.map((e) => e.address),
      ['10.0.0.1'],
    );
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
