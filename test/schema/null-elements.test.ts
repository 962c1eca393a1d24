import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readYamlDocuments } from '../../src/schema/yaml-reader.js';

function requestAuthentication(rules: string): string {
  return [
    'apiVersion: security.istio.io/v1',
    'kind: RequestAuthentication',
    'metadata:',
    '  name: jwt',
    '  namespace: shop',
    'spec:',
    '  jwtRules:',
    rules,
    '',
  ].join('\n');
}

describe('null elements in lists of messages', () => {
  test('refuses `jwtRules: [null]` in a file, naming the field, instead of reading an empty rule', () => {
    const { resources, errors } = readYamlDocuments(requestAuthentication('  - null'), {
      file: 'auth.yaml',
      defaultNamespace: 'default',
    });
    assert.deepEqual(resources, []);
    assert.equal(errors.length, 1);
    assert.equal(errors[0]?.code, 'SCHEMA');
    assert.equal(errors[0]?.location.field, 'spec.jwtRules[0]');
    assert.match(
      errors[0]?.describe() ?? '',
      /auth\.yaml doc 0 line 1 field spec\.jwtRules\[0\]: .*got null/,
    );
  });

  test('refuses an entry left empty (`-` alone) after a good one, and keeps the other documents', () => {
    const text = `${requestAuthentication('  - issuer: https://issuer.example\n  -')}---\n${requestAuthentication(
      '  - issuer: https://other.example',
    ).replace('name: jwt', 'name: other')}`;
    const { resources, errors } = readYamlDocuments(text, { file: 'auth.yaml', defaultNamespace: 'default' });
    assert.deepEqual(
      resources.map((r) => r.name),
      ['other'],
    );
    assert.equal(errors[0]?.location.field, 'spec.jwtRules[1]');
  });
});
