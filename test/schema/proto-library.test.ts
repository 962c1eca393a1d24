import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { PROTO_DIR } from '../../src/core/paths.js';
import { allProtos, ProtoLibrary } from '../../src/schema/proto-root.js';

/** Every message and enum of a loaded namespace, by full name (without the leading dot). */
function definitions(ns: protobuf.NamespaceBase, out = new Map<string, protobuf.ReflectionObject>()) {
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type || nested instanceof protobuf.Enum)
      out.set(nested.fullName.slice(1), nested);
    if (nested instanceof protobuf.Namespace || nested instanceof protobuf.Type) definitions(nested, out);
  }
  return out;
}

/** What a type says on the wire: each field's number, type, label and the full name it resolves to. */
function wireShape(o: protobuf.ReflectionObject): unknown {
  if (o instanceof protobuf.Enum) return { ...o.values };
  const type = o as protobuf.Type;
  return type.fieldsArray.map((f) => [
    f.name,
    f.id,
    f.type,
    f.repeated,
    f.map,
    f.resolvedType?.fullName ?? null,
  ]);
}

describe('ProtoLibrary', () => {
  it('parses only the package asked for and the files it imports', () => {
    const library = new ProtoLibrary(PROTO_DIR);
    assert.deepEqual(library.loadedFiles, []);
    const type = library.messageType('istio.networking.v1alpha3.VirtualService');
    assert.equal(type.fullName, '.istio.networking.v1alpha3.VirtualService');
    assert.deepEqual(library.loadedFiles, ['istio/networking/v1alpha3.proto']);
    // Another package of the same root loads its own file and nothing else of the folder.
    library.messageType('istio.mcp.v1alpha1.Resource');
    assert.deepEqual(library.loadedFiles, ['istio/networking/v1alpha3.proto', 'istio/mcp/v1alpha1.proto']);
  });

  it('finds every definition of the folder, as loaded whole, when its package is the first asked for', () => {
    const whole = definitions(allProtos());
    assert.ok(whole.size > 300, `${whole.size} definitions`);
    const byPackage = new Map<string, string[]>();
    for (const name of whole.keys()) {
      const pkg = (whole.get(name)?.filename ?? '').slice(PROTO_DIR.length + 1);
      byPackage.set(pkg, [...(byPackage.get(pkg) ?? []), name]);
    }
    let checked = 0;
    for (const [file, names] of byPackage) {
      // A fresh library per file: each package is met first, as a start meets it.
      const library = new ProtoLibrary(PROTO_DIR);
      for (const name of names) {
        const found = library.lookup(name);
        assert.ok(found !== null, `${name} (${file})`);
        assert.deepEqual(wireShape(found), wireShape(whole.get(name) as protobuf.ReflectionObject), name);
        checked++;
      }
    }
    assert.equal(checked, whole.size);
  });

  it('finds a well-known type asked for alone, and names with a leading dot', () => {
    const library = new ProtoLibrary(PROTO_DIR);
    assert.ok(library.lookup('google.protobuf.Duration') instanceof protobuf.Type);
    const fresh = new ProtoLibrary(PROTO_DIR);
    assert.equal(
      fresh.lookup('.istio.mesh.v1alpha1.MeshConfig')?.fullName,
      '.istio.mesh.v1alpha1.MeshConfig',
    );
  });

  it('answers null for a name the folder does not define, and messageType names it', () => {
    const library = new ProtoLibrary(PROTO_DIR);
    assert.equal(library.lookup('istio.networking.v1alpha3.NoSuchThing'), null);
    assert.equal(library.lookup('envoy.extensions.filters.http.NoSuchFilter'), null);
    assert.throws(() => library.messageType('istio.networking.v1alpha3.NoSuchThing'), /NoSuchThing/);
    // An enum is not a message type.
    assert.throws(() => library.messageType('istio.networking.v1alpha3.ServiceEntry.Location'), /Location/);
  });
});
