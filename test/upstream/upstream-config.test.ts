import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';

function parse(sources: string): ReturnType<typeof parseMeshmuxConfig> {
  return parseMeshmuxConfig(`sources:\n${sources}`, 'test', '/base');
}

describe('upstream source configuration', () => {
  it('accepts the shapes of the issue as written, with istiod’s defaults', () => {
    const config = parse(
      '  - name: mesh-a\n    type: xds\n    address: 127.0.0.1:15011\n' +
        '  - name: galley\n    type: mcp\n    address: 127.0.0.1:9901\n',
    );
    const [xds, mcp] = config.sources;
    assert.equal(xds?.type, 'xds');
    assert.ok(xds?.type === 'xds' && xds.apiVersions === 'auto' && xds.delta === false);
    assert.ok(mcp?.type === 'mcp' && mcp.incremental === false && mcp.kinds === undefined);
  });

  it('reads every field, resolving TLS paths against the configuration folder', () => {
    const config = parse(`  - name: nacos
    type: xds
    address: nacos.example:18848
    delta: true
    kinds: [ServiceEntry, networking.istio.io/VirtualService]
    apiVersions: {ServiceEntry: v1alpha3, default: current}
    node: {id: meshmux~1, metadata: {CLUSTER_ID: east}, revision: canary}
    tls: {ca: certs/ca.pem, cert: certs/client.pem, key: certs/client.key, serverName: istiod.istio-system.svc}
    keepalive: {time: 20s, timeout: 5s}
    maxReceiveSize: 104857600
    syncTimeout: 3s
    reconnect: {initialDelay: 250ms, maxDelay: 30s}
  - name: pushed
    type: mcp-sink
    listen: 0.0.0.0:9902
    kinds: [VirtualService]
    incremental: true
    sinkNode: {id: meshmux}
`);
    const [xds, sink] = config.sources;
    assert.ok(xds?.type === 'xds');
    assert.deepEqual(xds.kinds, ['ServiceEntry', 'networking.istio.io/VirtualService']);
    assert.equal(xds.tls?.ca, '/base/certs/ca.pem');
    assert.deepEqual(xds.keepalive, { time: 20_000, timeout: 5_000 });
    assert.deepEqual(xds.reconnect, { initialDelay: 250, maxDelay: 30_000 });
    assert.equal(xds.syncTimeout, 3_000);
    assert.ok(sink?.type === 'mcp-sink' && sink.listen === '0.0.0.0:9902' && sink.incremental);
  });

  it('reads a file source’s rescan period and its grace for files that vanish', () => {
    const [file] = parse(
      '  - name: local\n    type: file\n    path: ./mesh\n    rescanInterval: 2s\n    vanishGrace: 1500ms\n',
    ).sources;
    assert.ok(file?.type === 'file');
    assert.equal(file.rescanInterval, 2_000);
    assert.equal(file.vanishGrace, 1_500);
    assert.throws(
      () => parse('  - name: local\n    type: file\n    path: ./mesh\n    vanishGrace: soon\n'),
      /vanishGrace/,
    );
  });

  for (const [what, yaml, message] of [
    ['an unknown kind', 'kinds: [Deployment]', /sources\[0\]\.kinds\[0\]: unknown kind "Deployment"/],
    [
      'a version the kind does not have',
      'apiVersions: {EnvoyFilter: v1}',
      /apiVersions\.EnvoyFilter: one of current, legacy, auto, v1alpha3/,
    ],
    ['a mode that does not exist', 'apiVersions: newest', /apiVersions/],
    ['a field that does not exist', 'adress: 127.0.0.1:1', /adress/],
  ] as const) {
    it(`refuses ${what}, naming the field`, () => {
      assert.throws(
        () => parse(`  - name: up\n    type: xds\n    address: 127.0.0.1:15010\n    ${yaml}\n`),
        (err: Error) => message.test(err.message),
      );
    });
  }

  it('refuses a Galley kind that never had a collection', () => {
    assert.throws(
      () => parse('  - name: galley\n    type: mcp\n    address: 127.0.0.1:9901\n    kinds: [Telemetry]\n'),
      /Telemetry has no Galley-era MCP collection/,
    );
  });
});
