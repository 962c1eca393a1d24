import assert from 'node:assert/strict';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { runMeshmuxCli } from '../support/meshmux-cli.js';
import { describe, it } from 'node:test';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { configJsonSchema } from '../../src/settings/meshmux-config.js';
import { tempDir } from '../support/meshmux-harness.js';

const meshmux = (args: string[], cwd?: string, timeoutMs?: number) => runMeshmuxCli(args, cwd, timeoutMs);

describe('meshmux check-config', () => {
  it('names every problem as file:line:column with the nearest known field for a typo, and exits 1', async () => {
    const t = await tempDir();
    try {
      const file = path.join(t.dir, 'meshmux.yaml');
      await writeFile(
        file,
        'server:\n  xds: 127.0.0.1:15010\n  sendTimout: 5s\nsourcse: []\nsources:\n  - name: a\n    type: file\n    paht: ./x\n',
      );
      const { code, stdout, stderr } = await meshmux(['check-config', file]);
      assert.equal(code, 1);
      assert.equal(stdout, '');
      const lines = stderr.trim().split('\n').sort();
      assert.deepEqual(
        lines,
        [
          `${file}:3:3: server.sendTimout: unknown field "sendTimout" (did you mean "sendTimeout"?)`,
          `${file}:4:1: sourcse: unknown field "sourcse" (did you mean "sources"?)`,
          `${file}:6:5: sources[0].path: Invalid input: expected string, received undefined`,
          `${file}:8:5: sources[0].paht: unknown field "paht" (did you mean "path"?)`,
        ].sort(),
      );
    } finally {
      await t.dispose();
    }
  });

  it('checks the configuration alone: a source that cannot be reached is not dialled', async () => {
    const t = await tempDir();
    try {
      const file = path.join(t.dir, 'meshmux.yaml');
      // Port 9 (discard) refuses connections: starting the source would log a failure.
      await writeFile(file, 'sources:\n  - name: far\n    type: xds\n    address: 127.0.0.1:9\n');
      const started = performance.now();
      const { code, stdout, stderr } = await meshmux(['check-config', file]);
      assert.equal(code, 0, stderr);
      assert.equal(stdout.trim(), `${file}: valid (1 source(s), 0 policy(ies))`);
      assert.equal(stderr, '', 'no log: nothing was started');
      console.log(`# check-config of a valid file: ${(performance.now() - started).toFixed(0)} ms`);
    } finally {
      await t.dispose();
    }
  });

  it('names each TLS file of the ADS listener that cannot be read, with its field, and exits 1, as a start would', async () => {
    const t = await tempDir();
    try {
      const file = path.join(t.dir, 'meshmux.yaml');
      await writeFile(
        file,
        'server: {xdsTls: 127.0.0.1:15012, tls: {cert: ./certs/tls.crt, key: ./certs/tls.key}}\n' +
          'sources:\n  - {name: local, type: file, path: ./mesh}\n',
      );
      const { code, stdout, stderr } = await meshmux(['check-config', file]);
      assert.equal(code, 1);
      assert.equal(stdout, '');
      const [cert, key] = ['tls.crt', 'tls.key'].map((f) => path.join(t.dir, 'certs', f));
      assert.deepEqual(stderr.trim().split('\n'), [
        `${cert}: server.tls.cert: cannot read the server certificate: ENOENT: no such file or directory, open '${cert}'`,
        `${key}: server.tls.key: cannot read the server private key: ENOENT: no such file or directory, open '${key}'`,
      ]);
    } finally {
      await t.dispose();
    }
  });

  it('names a kubeconfig that cannot be read or names no cluster for its context, and exits 1, as a start does', async () => {
    const t = await tempDir();
    try {
      const file = path.join(t.dir, 'meshmux.yaml');
      const kubeconfig = path.join(t.dir, 'kubeconfig');
      await writeFile(
        kubeconfig,
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters: [{name: staging, cluster: {server: "https://127.0.0.1:1"}}]',
          'users: [{name: staging, user: {token: t}}]',
          'contexts: [{name: staging, context: {cluster: staging, user: staging}}]',
          'current-context: staging',
          '',
        ].join('\n'),
      );
      await writeFile(
        file,
        'state: {dir: none}\nsources:\n' +
          '  - {name: prod, type: kubernetes, kubeconfig: ./kubeconfig, context: prod}\n' +
          '  - {name: gone, type: kubernetes, kubeconfig: ./missing}\n',
      );
      const checked = await meshmux(['check-config', file]);
      assert.equal(checked.code, 1, checked.stderr);
      assert.equal(checked.stdout, '');
      const lines = checked.stderr.trim().split('\n');
      assert.equal(lines.length, 2, checked.stderr);
      assert.match(
        lines[0] ?? '',
        /^.*kubeconfig: sources\[0\]\.kubeconfig: source prod: .*names no cluster for its context/,
      );
      assert.match(lines[1] ?? '', /missing: sources\[1\]\.kubeconfig: .*ENOENT/);
      // A start says the same, one line each, and exits 1: not a stack trace.
      const served = await meshmux(['serve', '--config', file], t.dir, 30_000);
      assert.equal(served.code, 1, served.stderr);
      assert.match(
        served.stderr,
        /sources\[0\]\.kubeconfig: source prod: .*names no cluster for its context/,
      );
      assert.match(served.stderr, /sources\[1\]\.kubeconfig: ENOENT/);
      assert.doesNotMatch(served.stderr, /\n\s+at /, 'no stack trace');
    } finally {
      await t.dispose();
    }
  });

  it('warns of each field of the mesh section MeshConfig does not have, naming it, and still passes the file', async () => {
    const t = await tempDir();
    try {
      const file = path.join(t.dir, 'meshmux.yaml');
      await writeFile(
        file,
        'sources:\n  - {name: local, type: file, path: ./mesh}\n' +
          'mesh:\n  discoveryAdress: istiod.istio-system.svc:15012\n' +
          '  defaultConfig: {proxyMetadata: {A: b}, holdApplicationUntilProxyStart: true}\n',
      );
      const { code, stdout, stderr } = await meshmux(['check-config', file]);
      assert.equal(code, 0, stderr);
      assert.equal(stdout.trim(), `${file}: valid (1 source(s), 0 policy(ies))`);
      assert.deepEqual(stderr.trim().split('\n'), [
        `warning: ${file}: mesh.discoveryAdress: ignored: no such field in MeshConfig, or a second spelling of one`,
        `warning: ${file}: mesh.defaultConfig.holdApplicationUntilProxyStart: ignored: no such field in MeshConfig, or a second spelling of one`,
      ]);
    } finally {
      await t.dispose();
    }
  });

  it('resolves relative paths against the file, not the working directory', async () => {
    const t = await tempDir();
    try {
      await mkdir(path.join(t.dir, 'conf', 'mesh'), { recursive: true });
      const file = path.join(t.dir, 'conf', 'meshmux.yaml');
      await writeFile(file, 'sources:\n  - name: local\n    type: file\n    path: ./mesh\n');
      const { code, stdout, stderr } = await meshmux(
        ['preview', '--config', file, '--node-id', 'sidecar~10.0.0.1~a.b~b.svc.cluster.local'],
        t.dir,
      );
      assert.equal(code, 0, stderr);
      const preview = JSON.parse(stdout) as { admitted: boolean };
      assert.equal(preview.admitted, true, 'stdout is only the JSON (logs went to stderr)');
      assert.doesNotMatch(stderr, /ENOENT/, 'the folder next to the file was found');
    } finally {
      await t.dispose();
    }
  });
});

describe('meshmux schema', () => {
  it('prints the JSON Schema the published config/meshmux.schema.json holds', async () => {
    const { code, stdout } = await meshmux(['schema']);
    assert.equal(code, 0);
    const published = await readFile(path.join(PACKAGE_ROOT, 'config', 'meshmux.schema.json'), 'utf8');
    assert.equal(
      stdout,
      published,
      'regenerate with: node dist/bundle/cli.js schema > config/meshmux.schema.json',
    );
    assert.deepEqual(JSON.parse(stdout), configJsonSchema());
  });

  it('describes every top-level field of the configuration, closed to unknown ones', () => {
    const schema = configJsonSchema() as {
      properties: Record<string, unknown>;
      additionalProperties: unknown;
    };
    assert.deepEqual(Object.keys(schema.properties).sort(), [
      'merge',
      'mesh',
      'policies',
      'policyGuard',
      'server',
      'sources',
      'state',
      'syncTimeout',
    ]);
    assert.equal(schema.additionalProperties, false);
  });
});
