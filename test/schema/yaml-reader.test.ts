import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import type { Timestamp } from '../../src/core/resource.js';
import {
  decodeBody,
  encodeSpec,
  MAX_DOCUMENTS_WITH_PROBLEMS_LISTED,
  MAX_REJECTED_DOCUMENTS,
  readYamlDocuments,
  type ReadYamlResult,
} from '../../src/schema/yaml-reader.js';

const VS = 'networking.istio.io/VirtualService';

function read(
  text: string,
  createTimeFor?: (kind: string, ns: string, name: string) => Timestamp,
): ReadYamlResult {
  return readYamlDocuments(text, {
    file: 'test.yaml',
    defaultNamespace: 'default',
    ...(createTimeFor === undefined ? {} : { createTimeFor }),
  });
}

function virtualService(name: string, spec = 'hosts: [reviews]', extraMeta = ''): string {
  return `apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: ${name}\n${extraMeta}spec:\n  ${spec}\n`;
}

describe('readYamlDocuments', () => {
  test('lists the errors of the first rejected documents of a file, counts the rest in one, and reads on', () => {
    const bad = MAX_DOCUMENTS_WITH_PROBLEMS_LISTED + 50;
    const result = read(`${'x\n---\n'.repeat(bad)}${virtualService('after')}`);
    assert.deepEqual(
      result.resources.map((r) => r.name),
      ['after'],
    );
    assert.equal(result.errors.length, MAX_DOCUMENTS_WITH_PROBLEMS_LISTED + 1);
    assert.equal(result.errors.at(-2)?.location.doc, MAX_DOCUMENTS_WITH_PROBLEMS_LISTED - 1);
    assert.equal(
      result.errors.at(-1)?.describe(),
      `test.yaml: 50 more documents rejected; the first ${MAX_DOCUMENTS_WITH_PROBLEMS_LISTED} with errors are listed`,
    );
  });

  test('stops reading a file at its last rejected document allowed, saying where', () => {
    const result = read(`${'x\n---\n'.repeat(MAX_REJECTED_DOCUMENTS + 10)}${virtualService('after')}`);
    assert.deepEqual(result.resources, []);
    assert.match(
      result.errors.at(-1)?.describe() ?? '',
      new RegExp(
        `nothing after document ${MAX_REJECTED_DOCUMENTS - 1} is read once ${MAX_REJECTED_DOCUMENTS} are rejected$`,
      ),
    );
  });

  test('reads every document of a stream, numbering them from 0 and recording their first line', () => {
    const text = `# leading comment\n${virtualService('a')}---\n---\n# only a comment\n---\n${virtualService('b')}`;
    const { resources, errors, warnings } = read(text);
    assert.deepEqual(errors, []);
    assert.deepEqual(warnings, []);
    assert.deepEqual(
      resources.map((r) => [r.name, r.origin.file, r.origin.doc, r.origin.line]),
      [
        ['a', 'test.yaml', 0, 2],
        ['b', 'test.yaml', 3, 12],
      ],
    );
  });

  test('builds resources with the registry key, the default namespace, labels, annotations and body', () => {
    const meta =
      '  labels:\n    app: reviews\n    app.kubernetes.io/version: "1.0"\n  annotations:\n    note: "yes"\n';
    const [r] = read(virtualService('reviews', 'hosts: [reviews]', meta)).resources;
    assert.ok(r);
    assert.equal(r.kind, VS);
    assert.equal(r.namespace, 'default');
    assert.deepEqual(r.labels, { app: 'reviews', 'app.kubernetes.io/version': '1.0' });
    assert.deepEqual(r.annotations, { note: 'yes' });
    assert.deepEqual(decodeBody(VS, r.body), { hosts: ['reviews'] });
  });

  test('accepts every served version of a kind and maps them to one registry key', () => {
    for (const version of ['v1', 'v1beta1', 'v1alpha3']) {
      const text = `apiVersion: networking.istio.io/${version}\nkind: Gateway\nmetadata: {name: gw}\nspec: {}\n`;
      assert.equal(read(text).resources[0]?.kind, 'networking.istio.io/Gateway');
    }
  });

  test('skips non-Istio kinds with an UNKNOWN_KIND warning and never an error', () => {
    const text = [
      'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: .nan}',
      'apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}',
    ].join('\n---\n');
    const { resources, errors, warnings } = read(text);
    assert.deepEqual(errors, []);
    assert.deepEqual(resources, []);
    assert.deepEqual(
      warnings.map((w) => [w.code, w.location.doc]),
      [
        ['UNKNOWN_KIND', 0],
        ['UNKNOWN_KIND', 1],
      ],
    );
  });

  test('rejects a served group with an unknown kind or version, naming what is served, and skips other Istio groups', () => {
    const text = [
      'apiVersion: networking.istio.io/v2\nkind: VirtualService\nmetadata: {name: a}',
      'apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nmetadata: {name: b}',
      'kind: VirtualService\nmetadata: {name: c}',
      'apiVersion: networking.istio.io/v1\nkind: VirtualThing\nmetadata: {name: d}',
    ].join('\n---\n');
    const { errors, warnings } = read(text);
    assert.deepEqual(
      errors.map((e) => [e.code, e.location.doc, e.location.field]),
      [
        ['UNKNOWN_KIND', 0, 'apiVersion'],
        ['UNKNOWN_KIND', 2, 'apiVersion'],
        ['UNKNOWN_KIND', 3, 'kind'],
      ],
    );
    assert.ok(
      warnings.some((w) => w.code === 'UNKNOWN_KIND' && w.location.doc === 1),
      'IstioOperator is skipped with a warning',
    );
    assert.match(errors[0]?.reason ?? '', /VirtualService is served in versions v1, v1beta1, v1alpha3/);
  });

  test('validates metadata like Kubernetes: name, namespace, label keys and values, string-only maps', () => {
    const cases: [string, string, RegExp][] = [
      ['  name: a_b\n', 'metadata.name', /DNS-1123 subdomain/],
      ['  name: a\n  namespace: Shop\n', 'metadata.namespace', /DNS-1123 label/],
      ['  name: a\n  namespace: a.b\n', 'metadata.namespace', /DNS-1123 label/],
      ['  name: a\n  labels: {version: 1.0}\n', 'metadata.labels.version', /expected a string, got a number/],
      ['  name: a\n  labels: {enabled: on}\n', 'metadata.labels.enabled', /got a boolean \(true\)/],
      ['  name: a\n  labels: {"-bad": x}\n', 'metadata.labels["-bad"]', /name part/],
      ['  name: a\n  labels: {ok: "-bad"}\n', 'metadata.labels.ok', /value "-bad"/],
      ['  name: a\n  annotations: {"a/b/c": x}\n', 'metadata.annotations["a/b/c"]', /more than one/],
      ['  name: a\n  creationTimestamp: yesterday\n', 'metadata.creationTimestamp', /not an RFC 3339/],
      ['  namespace: x\n', 'metadata.name', /required/],
    ];
    for (const [meta, field, reason] of cases) {
      const text = `apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata:\n${meta}spec: {}\n`;
      const { errors, resources } = read(text);
      assert.deepEqual(resources, [], meta);
      assert.equal(errors[0]?.code, 'METADATA', meta);
      assert.equal(errors[0]?.location.field, field, meta);
      assert.match(errors[0]?.reason ?? '', reason, meta);
    }
  });

  test('accepts upper-case names, which Istio itself reads from files, with a warning', () => {
    const { resources, warnings } = read(virtualService('BACKEND'));
    assert.equal(resources[0]?.name, 'BACKEND');
    assert.equal(warnings[0]?.code, 'METADATA');
  });

  test('uses creationTimestamp when present, else asks createTimeFor with the registry key', () => {
    const calls: string[] = [];
    const createTimeFor = (kind: string, ns: string, name: string): Timestamp => {
      calls.push(`${kind}|${ns}/${name}`);
      return { seconds: 42, nanos: 0 };
    };
    const text = `${virtualService('a', 'hosts: [x]', '  creationTimestamp: 2024-05-01T12:00:00Z\n')}---\n${virtualService('b')}`;
    const { resources } = read(text, createTimeFor);
    assert.deepEqual(resources[0]?.createTime, { seconds: 1_714_564_800, nanos: 0 });
    assert.deepEqual(resources[1]?.createTime, { seconds: 42, nanos: 0 });
    assert.deepEqual(calls, [`${VS}|default/b`]);
  });

  test('treats creationTimestamp: null (as kubectl prints it) as absent', () => {
    const { resources, errors } = read(virtualService('a', 'hosts: [x]', '  creationTimestamp: null\n'));
    assert.deepEqual(errors, []);
    assert.ok((resources[0]?.createTime.seconds ?? 0) > 1_700_000_000);
  });

  test('prunes unknown spec fields with a warning naming the field, and still serves the resource', () => {
    const { resources, warnings } = read(
      virtualService('a', 'hosts: [x]\n  http: [{websocketUpgrade: true}]'),
    );
    assert.equal(resources.length, 1);
    assert.deepEqual(
      warnings.map((w) => [w.code, w.location.field]),
      [['SCHEMA', 'spec.http[0].websocketUpgrade']],
    );
  });

  test('reports every spec error of a document with file, document, line and field', () => {
    const text = `${virtualService('ok')}---\n${virtualService('bad', 'hosts: x\n  gateways: [1]')}`;
    const { resources, errors } = read(text);
    assert.deepEqual(
      resources.map((r) => r.name),
      ['ok'],
    );
    assert.deepEqual(
      errors.map((e) => e.describe()),
      [
        'test.yaml doc 1 line 8 field spec.hosts: expected a list, got a string ("x")',
        'test.yaml doc 1 line 8 field spec.gateways[0]: expected a string, got a number (1)',
      ],
    );
  });

  test('reads unquoted yes/on as booleans, like Istio: wrong in a string field, true in a Struct', () => {
    const bad = read(virtualService('a', 'hosts: [yes]'));
    assert.match(bad.errors[0]?.reason ?? '', /expected a string, got a boolean \(true\)/);
    const ok = read(virtualService('a', 'hosts: ["yes"]'));
    assert.deepEqual(decodeBody(VS, ok.resources[0]?.body ?? new Uint8Array()), { hosts: ['yes'] });

    const filter = [
      'apiVersion: networking.istio.io/v1alpha3',
      'kind: EnvoyFilter',
      'metadata: {name: f}',
      'spec:',
      '  configPatches:',
      '  - applyTo: HTTP_FILTER',
      '    patch: {operation: MERGE, value: {enabled: on, mode: 0755, when: 2024-05-01}}',
    ].join('\n');
    const [r] = read(filter).resources;
    assert.ok(r);
    assert.deepEqual(decodeBody('networking.istio.io/EnvoyFilter', r.body), {
      configPatches: [
        {
          applyTo: 'HTTP_FILTER',
          patch: { operation: 'MERGE', value: { enabled: true, mode: 493, when: '2024-05-01' } },
        },
      ],
    });
  });

  test('lets the documents after a syntax error through', () => {
    const text = `${virtualService('a')}---\nmetadata: {name: [x\n---\n${virtualService('c')}`;
    const { resources, errors } = read(text);
    assert.deepEqual(
      resources.map((r) => [r.name, r.origin.doc]),
      [
        ['a', 0],
        ['c', 2],
      ],
    );
    assert.equal(errors[0]?.code, 'YAML_SYNTAX');
    assert.equal(errors[0]?.location.doc, 1);
  });

  test('refuses a document nested past what protobuf encodes, alone, and reads one within it', () => {
    const envoyFilter = (name: string, levels: number): string => {
      let value: unknown = { leaf: 'x' };
      for (let i = 0; i < levels; i++) value = { nested: value };
      const patch = { operation: 'MERGE', value };
      return JSON.stringify({
        apiVersion: 'networking.istio.io/v1alpha3',
        kind: 'EnvoyFilter',
        metadata: { name },
        spec: { configPatches: [{ applyTo: 'HTTP_FILTER', patch }] },
      });
    };
    // Each level of a Struct is two messages (Struct, Value): 48 fit in protobufjs's 100, 49 not.
    const text = [
      virtualService('a'),
      envoyFilter('within', 48),
      envoyFilter('past', 49),
      virtualService('c'),
    ];
    const { resources, errors } = read(text.join('\n---\n'));
    assert.deepEqual(
      resources.map((r) => [r.name, r.origin.doc]),
      [
        ['a', 0],
        ['within', 1],
        ['c', 3],
      ],
    );
    assert.deepEqual(
      errors.map((e) => [e.code, e.location.doc, e.location.field]),
      [['LIMIT', 2, 'spec']],
    );
    assert.match(errors[0]?.reason ?? '', /nested more than 100 messages deep once encoded/);
  });

  test('rejects a document that is not a map', () => {
    const { errors } = read('- a\n- b\n');
    assert.equal(errors[0]?.code, 'SCHEMA');
    assert.match(errors[0]?.reason ?? '', /must be a map/);
  });

  test('warns about duplicate keys and applies the last one, as Istio does', () => {
    const { resources, warnings } = read(virtualService('a', 'hosts: [first]\n  hosts: [last]'));
    assert.deepEqual(decodeBody(VS, resources[0]?.body ?? new Uint8Array()), { hosts: ['last'] });
    assert.deepEqual(
      warnings.map((w) => [w.code, w.location.field]),
      [['YAML_SYNTAX', 'spec.hosts']],
    );
  });

  test('gives equal content the same version regardless of key order, and different content another', () => {
    const one = read(virtualService('a', 'hosts: [x]\n  exportTo: ["."]', '  labels: {b: "2", a: "1"}\n'));
    const two = read(virtualService('a', 'exportTo: ["."]\n  hosts: [x]', '  labels: {a: "1", b: "2"}\n'));
    const other = read(virtualService('a', 'hosts: [z]'));
    assert.equal(one.resources[0]?.version, two.resources[0]?.version);
    assert.notEqual(one.resources[0]?.version, other.resources[0]?.version);
  });

  test('never throws, whatever the text', () => {
    for (const text of ['', '---', ':', '[', '{a: 1', '\t- x', '%YAML 9.9\n---\na: 1', '*x', '\u0000']) {
      assert.doesNotThrow(() => read(text), JSON.stringify(text));
    }
  });
});

describe('encodeSpec', () => {
  test('returns the body and the pruned paths relative to spec', () => {
    const { body, pruned } = encodeSpec(VS, { hosts: ['a'], http: [{ websocketUpgrade: true }] });
    assert.deepEqual(pruned, ['http[0].websocketUpgrade']);
    assert.deepEqual(decodeBody(VS, body), { hosts: ['a'], http: [{}] });
  });

  test('throws the first SCHEMA error with the given location and the spec field path', () => {
    assert.throws(
      () => encodeSpec(VS, { hosts: 'a' }, { file: 'f.yaml', doc: 2, line: 9 }),
      (err: unknown) =>
        err instanceof MeshmuxError &&
        err.code === 'SCHEMA' &&
        err.describe() === 'f.yaml doc 2 line 9 field spec.hosts: expected a list, got a string ("a")',
    );
  });

  test('refuses a kind that is not in the registry', () => {
    assert.throws(
      () => encodeSpec('example.com/Thing', {}),
      (err: unknown) => err instanceof MeshmuxError && err.code === 'UNKNOWN_KIND',
    );
  });
});

describe('decodeBody', () => {
  test('prints a body as canonical proto3 JSON and rejects bytes that are not one', () => {
    const { body } = encodeSpec(VS, { hosts: ['a'], http: [{ timeout: '90s' }] });
    assert.deepEqual(decodeBody(VS, body), { hosts: ['a'], http: [{ timeout: '90s' }] });
    assert.throws(
      () => decodeBody(VS, Uint8Array.from([0x0a, 0x05, 0x61])),
      (err: unknown) => err instanceof MeshmuxError && err.code === 'DECODE',
    );
  });
});
