/**
 * The client libraries only some configurations need (the Kubernetes client, the ZooKeeper
 * client, etcd's) are loaded by the processes whose configuration has them, at start or on a
 * reload, and never otherwise: the Kubernetes client alone is about 28 MB of heap and 80 MB of
 * resident memory. Real `meshmux serve` processes, with every module they load recorded (a
 * preloaded hook, see module-load-log.ts). No server is needed: the sources and etcd point at a
 * closed port and keep retrying.
 */
import assert from 'node:assert/strict';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { CLI } from '../support/meshmux-cli.js';
import { loadedFiles, loadedPackages, MODULE_LOAD_LOG } from '../support/module-load-log.js';

const OPTIONAL = ['@kubernetes/client-node', 'node-zookeeper-client', 'etcd3', 'cockatiel'] as const;
const PRELOAD = pathToFileURL(path.join(import.meta.dirname, '..', 'support', 'module-load-log.js')).href;

const KUBECONFIG = `apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: reader, user: {token: not-a-token}}]
contexts: [{name: nowhere, context: {cluster: nowhere, user: reader}}]
current-context: nowhere
`;

const FILE_SOURCE = '  - {name: files, type: file, path: ./mesh}\n';
const OPTIONAL_SOURCES =
  '  - {name: cluster, type: kubernetes, kubeconfig: ./cluster.kubeconfig, kinds: [VirtualService]}\n' +
  '  - {name: dubbo, type: zookeeper, servers: "127.0.0.1:1", namespace: dubbo}\n';

describe('client libraries only some configurations need', () => {
  let dir: string;
  let dispose: () => Promise<void>;

  before(async () => {
    ({ dir, dispose } = await tempDir('optional-libraries'));
    await writeFile(path.join(dir, 'cluster.kubeconfig'), KUBECONFIG);
    await mkdir(path.join(dir, 'mesh'));
  });
  after(() => dispose());

  /**
   * Runs `meshmux serve` on `config` until `during` is done, then stops it; returns the packages
   * and the files it loaded.
   */
  const packagesOf = async (
    name: string,
    config: string,
    during: (meshmux: MeshmuxProcess, edit: (text: string) => Promise<void>) => Promise<void>,
  ): Promise<{ loaded: ReadonlySet<string>; files: readonly string[] }> => {
    const configFile = path.join(dir, `${name}.yaml`);
    const log = path.join(dir, `${name}.modules`);
    await writeFile(configFile, config);
    const meshmux = await MeshmuxProcess.start(configFile, {
      cwd: dir,
      env: {
        NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --import=${PRELOAD}`.trim(),
        [MODULE_LOAD_LOG]: log,
      },
    });
    try {
      await during(meshmux, async (text) => {
        await writeFile(`${configFile}.tmp`, text);
        await rename(`${configFile}.tmp`, configFile);
      });
      const stopped = await meshmux.stop();
      assert.equal(stopped.code, 0, `${name}: a clean exit, so the exit hook wrote its list`);
    } finally {
      await meshmux.kill();
    }
    return { loaded: loadedPackages(log), files: loadedFiles(log) };
  };

  it('a configuration without them never loads them', async () => {
    const { loaded, files } = await packagesOf(
      'plain',
      `state: {dir: none}\nsources:\n${FILE_SOURCE}`,
      async () => {},
    );
    // The record works: the bundle's entry is in it (the libraries every process uses are inside
    // the bundle; the other test sees ES and CommonJS modules of node_modules recorded).
    assert.ok(files.includes(CLI), `the entry recorded: ${files.join(', ')}`);
    for (const p of OPTIONAL) assert.ok(!loaded.has(p), `${p} is not loaded`);
  });

  it('a configuration that gains them on a reload, or starts with etcd, loads each', async () => {
    const start = `state:\n  dir: none\n  etcd: {endpoints: ["http://127.0.0.1:1"]}\nsources:\n${FILE_SOURCE}`;
    const { loaded } = await packagesOf('gains', start, async (meshmux, edit) => {
      const from = meshmux.logs.length;
      await edit(`${start}${OPTIONAL_SOURCES}`);
      await meshmux.waitForLog((l) => l.msg === 'configuration reloaded', from, 20_000, 'the reload');
    });
    for (const p of OPTIONAL) assert.ok(loaded.has(p), `${p} is loaded: ${[...loaded].join(', ')}`);
  });
});
