import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import { istioHostProblem } from '../../src/upstream/zookeeper/dns-names.js';
import { DubboHostTemplate, type HostFields } from '../../src/upstream/zookeeper/dubbo-host-template.js';

const BASE: HostFields = {
  interface: 'com.foo.BarService',
  group: '',
  version: '',
  application: 'shop',
  protocol: 'dubbo',
};

function host(template: DubboHostTemplate, fields: Partial<HostFields> = {}): string {
  const r = template.render({ ...BASE, ...fields });
  assert.ok('host' in r, 'error' in r ? r.error : '');
  return r.host;
}

describe('ServiceEntry hosts from a host template', () => {
  const byDefault = new DubboHostTemplate();

  it('by default is the lower-cased interface, with version and group labels in front when set', () => {
    assert.equal(host(byDefault), 'com.foo.barservice');
    assert.equal(host(byDefault, { version: '1.0.0' }), '1-0-0.com.foo.barservice');
    assert.equal(host(byDefault, { group: 'sales' }), 'sales.com.foo.barservice');
    assert.equal(
      host(byDefault, { group: 'Sales_EU', version: '1.0.0' }),
      '1-0-0.sales-eu.com.foo.barservice',
    );
  });

  it('never contains a colon, unlike the providers:<interface>:<version>:<group> scheme', () => {
    assert.doesNotMatch(host(byDefault, { group: 'a:b', version: 'v:1' }), /:/);
  });

  it('turns inner classes and odd characters into valid labels', () => {
    assert.equal(host(byDefault, { interface: 'com.foo.Outer$Inner' }), 'com.foo.outer-inner');
    assert.equal(host(byDefault, { interface: 'com..foo._Bar_' }), 'com.foo.bar');
  });

  it('shortens a label longer than 63 characters and keeps it distinct with a hash', () => {
    const long = `com.foo.${'VeryLong'.repeat(10)}Service`;
    const h = host(byDefault, { interface: long });
    assert.equal(istioHostProblem(h), undefined);
    assert.ok(h.split('.').every((l) => l.length <= 63));
    assert.notEqual(h, host(byDefault, { interface: `${long}2` }));
  });

  it('fills every placeholder, and literal text', () => {
    const t = new DubboHostTemplate('{application}.{protocol}.[{group}.]{interface}.svc.dubbo');
    assert.equal(host(t), 'shop.dubbo.com.foo.barservice.svc.dubbo');
  });

  it('fails for a service that lacks a placeholder outside optional segments', () => {
    const t = new DubboHostTemplate('{group}.{interface}');
    const r = t.render(BASE);
    assert.ok('error' in r && /needs \{group\}/.test(r.error));
  });

  it('fails when the result is no valid Istio host', () => {
    const t = new DubboHostTemplate('{interface}.{version}');
    const r = t.render({ ...BASE, version: '2' });
    assert.ok('error' in r && /all-numeric top-level label/.test(r.error), JSON.stringify(r));
  });

  for (const [bad, why] of [
    ['{iface}', /unknown placeholder/],
    ['[{version}.{interface}', /without "\]"/],
    ['{version}].{interface}', /without "\["/],
    ['[[{version}.]]{interface}', /cannot nest/],
    ['[.]{interface}', /needs a placeholder/],
    ['{interface}:{version}', /may only hold/],
    ['[{interface}]', /must contain \{interface\}/],
    ['{version}', /must contain \{interface\}/],
  ] as const) {
    it(`rejects the template "${bad}" as a configuration error`, () => {
      assert.throws(
        () => new DubboHostTemplate(bad),
        (err: unknown) => err instanceof MeshmuxError && err.code === 'CONFIG' && why.test(err.message),
      );
    });
  }
});

describe('Istio host validation', () => {
  for (const [h, ok] of [
    ['com.foo.barservice', true],
    ['a', true],
    ['providers:com.foo.BarService:1.0.0:g.zookeeper', false],
    ['Com.foo', false],
    ['foo.123', false],
    ['-foo.bar', false],
    ['foo..bar', false],
    [`${'a'.repeat(64)}.com`, false],
    ['*.foo.com', false],
    ['', false],
  ] as const) {
    it(`${ok ? 'accepts' : 'rejects'} "${h.length > 40 ? `${h.slice(0, 40)}…` : h}"`, () => {
      assert.equal(istioHostProblem(h) === undefined, ok);
    });
  }
});
