import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  labelKey,
  labelsFromParameters,
  labelValue,
} from '../../src/upstream/zookeeper/kubernetes-labels.js';

const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

function isValidKey(key: string): boolean {
  const slash = key.lastIndexOf('/');
  const name = slash < 0 ? key : key.slice(slash + 1);
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const prefixOk =
    prefix === undefined ||
    (prefix.length <= 253 && prefix.split('.').every((l) => /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(l)));
  return prefixOk && name.length <= 63 && NAME.test(name);
}

describe('Kubernetes labels from Dubbo URL parameters', () => {
  it('keeps valid keys and values as they are', () => {
    assert.equal(labelKey('application'), 'application');
    assert.equal(labelKey('default.timeout'), 'default.timeout');
    assert.equal(labelKey('dubbo.apache.org/tag'), 'dubbo.apache.org/tag');
    assert.equal(labelValue('1.0.0'), '1.0.0');
    assert.equal(labelValue('com.foo.BarService'), 'com.foo.BarService');
    assert.equal(labelValue(''), '');
  });

  it('repairs characters a label cannot hold', () => {
    assert.equal(labelValue('sayHello,sayGoodbye'), 'sayHello-sayGoodbye');
    assert.equal(labelValue('dubbo/2.0.2'), 'dubbo-2.0.2');
    assert.equal(labelValue('-edge-'), 'edge');
    assert.equal(labelKey('bad key!'), 'bad-key');
    assert.equal(labelKey('_hidden'), 'hidden');
  });

  it('drops what cannot be repaired without changing its meaning', () => {
    assert.equal(labelValue('x'.repeat(64)), undefined, 'too long: shortening would change the value');
    assert.equal(labelKey('k'.repeat(64)), undefined);
    assert.equal(labelValue('!!!'), undefined);
    assert.equal(labelKey(''), undefined);
    assert.equal(labelKey('Bad_Prefix!/name'), undefined, 'an invalid prefix is not guessed at');
  });

  it('builds sorted labels from accepted parameters, preferring a key that was valid as given', () => {
    const labels = labelsFromParameters(
      {
        version: '1.0',
        timestamp: '1700000000000',
        'side!': 'x',
        side: 'provider',
        methods: 'a,b',
        huge: 'y'.repeat(80),
      },
      (k) => k !== 'timestamp',
    );
    assert.deepEqual(labels, { methods: 'a-b', side: 'provider', version: '1.0' });
    assert.deepEqual(Object.keys(labels), ['methods', 'side', 'version']);
  });

  it('only ever yields valid keys and values, whatever the parameters', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 80 }), fc.string({ maxLength: 80 })), (params) => {
        for (const [k, v] of Object.entries(labelsFromParameters(params, () => true))) {
          assert.ok(isValidKey(k), `key ${JSON.stringify(k)}`);
          assert.ok(v === '' || (v.length <= 63 && NAME.test(v)), `value ${JSON.stringify(v)}`);
        }
      }),
      { numRuns: 500 },
    );
  });
});
