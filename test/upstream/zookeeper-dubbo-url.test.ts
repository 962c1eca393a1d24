import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseProviderNode, type DubboProvider } from '../../src/upstream/zookeeper/dubbo-provider-url.js';
import { encodeLikeJava } from '../support/dubbo-registry.js';

/** The example node name of spec §6.5, byte for byte. */
const SPEC_NODE =
  'dubbo%3A%2F%2F10.0.0.1%3A20880%2Fcom.foo.BarService%3Fanyhost%3Dtrue%26application%3Ddemo%26group%3Dg%26interface%3Dcom.foo.BarService%26methods%3Da%2Cb%26side%3Dprovider%26version%3D1.0.0';

function parsed(node: string, iface = 'com.foo.BarService'): DubboProvider {
  const result = parseProviderNode(node, iface);
  assert.ok(result.ok, result.ok ? '' : result.reason);
  return result.provider;
}

function reason(node: string, iface = 'com.foo.BarService'): string {
  const result = parseProviderNode(node, iface);
  assert.ok(!result.ok, 'expected a rejection');
  return result.reason;
}

describe('parsing a Dubbo provider znode name', () => {
  it('decodes the example registration of the spec into its parts', () => {
    const p = parsed(SPEC_NODE);
    assert.equal(p.node, SPEC_NODE);
    assert.equal(p.protocol, 'dubbo');
    assert.equal(p.address, '10.0.0.1');
    assert.equal(p.port, 20880);
    assert.equal(p.interface, 'com.foo.BarService');
    assert.equal(p.group, 'g');
    assert.equal(p.version, '1.0.0');
    assert.equal(p.application, 'demo');
    assert.equal(p.parameters['methods'], 'a,b');
    assert.equal(p.parameters['anyhost'], 'true');
    assert.equal(p.weight, undefined);
  });

  it('reads what Java URLEncoder writes, `+` for a space included', () => {
    const url = 'tri://10.0.0.2:50051/com.foo.BarService?application=my app&weight=30&side=provider';
    const p = parsed(encodeLikeJava(url));
    assert.equal(p.protocol, 'tri');
    assert.equal(p.application, 'my app');
    assert.equal(p.weight, 30);
  });

  it('takes the interface from the path when the URL has no interface parameter', () => {
    assert.equal(
      parsed(encodeURIComponent('dubbo://10.0.0.1:20880/com.foo.BarService?side=provider')).interface,
      'com.foo.BarService',
    );
  });

  it('falls back to Dubbo 2 `default.` parameters for group and version', () => {
    const p = parsed(
      encodeURIComponent('dubbo://10.0.0.1:20880/com.foo.BarService?default.group=g2&default.version=2.0'),
    );
    assert.equal(p.group, 'g2');
    assert.equal(p.version, '2.0');
  });

  it('accepts IPv6 providers in brackets and keeps the last of a repeated parameter', () => {
    const p = parsed(encodeURIComponent('dubbo://[fd00::7]:20880/com.foo.BarService?group=a&group=b'));
    assert.equal(p.address, 'fd00::7');
    assert.equal(p.group, 'b');
  });

  it('ignores user information before the host', () => {
    assert.equal(
      parsed(encodeURIComponent('dubbo://admin:secret@10.0.0.1:20880/com.foo.BarService')).address,
      '10.0.0.1',
    );
  });

  for (const [what, url, why] of [
    [
      'a name that is not percent-encoded correctly',
      'dubbo%3A%2F%2F10.0.0.1%ZZ',
      /not a validly percent-encoded/,
    ],
    ['text that is not a URL', 'hello-world', /not a URL/],
    [
      'a host name instead of an IP',
      encodeURIComponent('dubbo://provider.local:20880/com.foo.BarService'),
      /not an IP address/,
    ],
    [
      'the unspecified address',
      encodeURIComponent('dubbo://0.0.0.0:20880/com.foo.BarService'),
      /unspecified/,
    ],
    ['a missing port', encodeURIComponent('dubbo://10.0.0.1/com.foo.BarService'), /not ip:port/],
    ['port 0', encodeURIComponent('dubbo://10.0.0.1:0/com.foo.BarService'), /not in 1\.\.65535/],
    ['port 65536', encodeURIComponent('dubbo://10.0.0.1:65536/com.foo.BarService'), /not in 1\.\.65535/],
    [
      'no interface at all',
      encodeURIComponent('dubbo://10.0.0.1:20880/?side=provider'),
      /names no interface/,
    ],
    [
      'another interface than its folder',
      encodeURIComponent('dubbo://10.0.0.1:20880/com.foo.Other'),
      /registered under com\.foo\.BarService/,
    ],
    [
      'a consumer registration',
      encodeURIComponent('consumer://10.0.0.1:20880/com.foo.BarService?side=consumer'),
      /side=consumer/,
    ],
  ] as const) {
    it(`rejects ${what}, saying why`, () => {
      assert.match(reason(url), why);
    });
  }

  it('drops a weight that is not a positive integer', () => {
    assert.equal(
      parsed(encodeURIComponent('dubbo://10.0.0.1:20880/com.foo.BarService?weight=-3')).weight,
      undefined,
    );
    assert.equal(
      parsed(encodeURIComponent('dubbo://10.0.0.1:20880/com.foo.BarService?weight=0')).weight,
      undefined,
    );
  });
});
