import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import path from 'node:path';
import { describe, it } from 'node:test';
import { CLI } from '../support/meshmux-cli.js';
import { IstiodClient } from '../support/istiod-client.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess, type LogLine } from '../support/meshmux-process.js';
import { SE } from '../support/type-urls.js';

/** A configuration serving ./mesh to loopback clients; `extra` is appended under `sources:`. */
function config(cidr = '127.0.0.0/8', extra = ''): string {
  return [
    'policies:',
    '  - name: loopback',
    '    match:',
    `      peerCidrs: [${JSON.stringify(cidr)}]`,
    'sources:',
    '  - name: local',
    '    type: file',
    '    path: ./mesh',
    extra,
  ].join('\n');
}

/** Each kind of invalid edit, with the field (or reason) the error must name. */
const INVALID: ReadonlyArray<readonly [string, string, RegExp]> = [
  [
    'a CIDR prefix out of range',
    config('10.0.0.0/99'),
    /policies\[0\]\.match\.peerCidrs\[0\]: prefix length/,
  ],
  [
    'a port out of range',
    config(undefined, '  - name: up\n    type: xds\n    address: 127.0.0.1:99999'),
    /sources\[1\]\.address: port must be a number from 1 to 65535/,
  ],
  [
    'a glob that matches nothing',
    config(undefined, "  - name: g\n    type: git\n    url: file:///srv/mesh.git\n    paths: ['**/*.{yaml']"),
    /sources\[1\]\.paths\[0\]: not a valid glob/,
  ],
  ['a YAML syntax error', `${config()}\n  - name: broken\n   type: [file\n`, /not valid YAML/],
  [
    'TLS files that do not exist',
    `server: {xdsTls: 127.0.0.1:0, tls: {cert: ./certs/tls.crt, key: ./certs/tls.key}}\n${config()}`,
    /server\.tls\.cert: cannot read the server certificate[^]*server\.tls\.key: cannot read the server private key/,
  ],
  [
    'an unknown source type',
    config(undefined, '  - name: other\n    type: consul'),
    /sources\[1\]\.type: unknown source type .{1,6}consul/,
  ],
];

describe('configuration reloads', () => {
  it('keeps serving through every kind of invalid edit: no stream dropped, reload metric 0 and a banner, then 1 after a valid edit', async () => {
    const { dir, dispose } = await tempDir('meshmux-config-reload-');
    const configFile = path.join(dir, 'meshmux.yaml');
    /** Replaces the file in one step, as a ConfigMap update does. */
    const edit = async (text: string): Promise<void> => {
      await writeFile(`${configFile}.tmp`, text);
      await rename(`${configFile}.tmp`, configFile);
    };
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'a.yaml'), plainServiceEntry('cart'));
    await writeFile(configFile, config());
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir });
    const client = new IstiodClient({ address: meshmux.xds }).start();
    try {
      await client.waitFor(
        (c) => c.configs(SE).has('shop/cart'),
        20_000,
        () => 'cart',
      );
      assert.equal(await meshmux.metric('meshmux_config_last_reload_successful'), 1);
      const startedAt = await meshmux.metric('meshmux_config_last_reload_success_timestamp_seconds');

      for (const [what, text, named] of INVALID) {
        const from = meshmux.logs.length;
        await edit(text);
        const refused = await meshmux.waitForLog(
          (l) => l.msg === 'configuration not reloaded; the running one stays',
          from,
          15_000,
          `the refusal of ${what}`,
        );
        assert.match((refused.errors as string[]).join('\n'), named, what);
        assert.ok(meshmux.alive, `alive after ${what}`);
        assert.equal(await meshmux.metric('meshmux_config_last_reload_successful'), 0, what);
        assert.equal(
          await meshmux.metric('meshmux_config_last_reload_success_timestamp_seconds'),
          startedAt,
          `${what}: the running configuration is still the one from the start`,
        );
        const page = await meshmux.statusPage();
        assert.match(page, /id="config-reload-error"/, `${what}: banner shown`);
        assert.match(page, named, `${what}: the banner names the problem`);
      }

      // The stream never ended and still receives changes.
      await writeFile(path.join(dir, 'mesh', 'b.yaml'), plainServiceEntry('ledger'));
      await client.waitFor(
        (c) => c.configs(SE).has('shop/ledger'),
        20_000,
        () => 'ledger after the invalid edits',
      );
      assert.equal(client.streamEnds.length, 0, 'no stream ended');
      assert.equal(client.streams, 1, 'the first stream is still the only one');
      console.log(
        `# ${INVALID.length} invalid reloads: ${client.streamEnds.length} streams dropped, process alive`,
      );

      // A valid edit is applied and clears the banner.
      const from = meshmux.logs.length;
      await edit(config('127.0.0.1/32'));
      await meshmux.waitForLog((l) => l.msg === 'configuration reloaded', from, 15_000, 'the valid reload');
      assert.equal(await meshmux.metric('meshmux_config_last_reload_successful'), 1);
      const reloadedAt = await meshmux.metric('meshmux_config_last_reload_success_timestamp_seconds');
      assert.ok(reloadedAt !== undefined && startedAt !== undefined && reloadedAt >= startedAt);
      assert.equal(
        await meshmux.metric('meshmux_config_last_reload_timestamp_seconds'),
        reloadedAt,
        'the last attempt is the successful one',
      );
      assert.doesNotMatch(await meshmux.statusPage(), /id="config-reload-error"/);
      await writeFile(path.join(dir, 'mesh', 'c.yaml'), plainServiceEntry('checkout'));
      await client.waitFor(
        (c) => c.configs(SE).has('shop/checkout'),
        20_000,
        () => 'checkout after the valid edit',
      );
      assert.equal(client.streamEnds.length, 0, 'the policy still admits the client: no stream ended');
    } finally {
      client.close();
      await meshmux.stop();
      await dispose();
    }
  });

  it('applies an edit written while it starts, before the file is watched', async () => {
    const { dir, dispose } = await tempDir('meshmux-config-reload-');
    const configFile = path.join(dir, 'meshmux.yaml');
    await mkdir(path.join(dir, 'mesh'));
    await mkdir(path.join(dir, 'extra'));
    await writeFile(path.join(dir, 'mesh', 'a.yaml'), plainServiceEntry('cart'));
    await writeFile(path.join(dir, 'extra', 'b.yaml'), plainServiceEntry('ledger'));
    // An etcd endpoint that takes connections and never answers holds the start (meshmux reads
    // the shared state first) for its request timeout: a window to edit the file in.
    const held: Socket[] = [];
    const silent = createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as AddressInfo).port;
    const state = `state: {dir: none, etcd: {endpoints: ["http://127.0.0.1:${port}"]}}\n`;
    await writeFile(configFile, `${state}${config()}`);
    const dialled = new Promise((resolve) => silent.once('connection', resolve));
    const starting = MeshmuxProcess.start(configFile, { cwd: dir });
    let meshmux: MeshmuxProcess | undefined;
    let client: IstiodClient | undefined;
    try {
      await dialled;
      await writeFile(
        `${configFile}.tmp`,
        `${state}${config(undefined, '  - {name: extra, type: file, path: ./extra}')}`,
      );
      await rename(`${configFile}.tmp`, configFile);
      meshmux = await starting;
      await meshmux.waitForLog((l) => l.msg === 'configuration reloaded', 0, 20_000, 'the reload');
      client = new IstiodClient({ address: meshmux.xds }).start();
      await client.waitFor(
        (c) => c.configs(SE).has('shop/ledger') && c.configs(SE).has('shop/cart'),
        20_000,
        () => 'the source the edit added',
      );
    } finally {
      client?.close();
      await (meshmux ?? (await starting.catch(() => undefined)))?.stop();
      for (const socket of held) socket.destroy();
      silent.close();
      await dispose();
    }
  });

  it('applies an edit of a file mounted as Kubernetes mounts a ConfigMap, and reloads nothing when an update leaves it alone', async () => {
    const { dir, dispose } = await tempDir('meshmux-config-reload-');
    await mkdir(path.join(dir, 'mesh'));
    await mkdir(path.join(dir, 'extra'));
    await writeFile(path.join(dir, 'mesh', 'a.yaml'), plainServiceEntry('cart'));
    await writeFile(path.join(dir, 'extra', 'b.yaml'), plainServiceEntry('ledger'));
    // The volume as the kubelet writes it: the key is a link through `..data`, itself a link to the
    // folder of the current version. An update writes a new version folder, points a new link at
    // it, renames that link over `..data` and removes the old folder; the key's own entry never
    // changes. Paths in the file resolve against the volume.
    const volume = path.join(dir, 'config');
    const one = 'sources:\n  - {name: local, type: file, path: ../mesh}\n';
    const two = `${one}  - {name: extra, type: file, path: ../extra}\n`;
    let current = '';
    const update = async (version: string, text: string): Promise<void> => {
      await mkdir(path.join(volume, version), { recursive: true });
      await writeFile(path.join(volume, version, 'meshmux.yaml'), text);
      await symlink(version, path.join(volume, '..data_tmp'));
      await rename(path.join(volume, '..data_tmp'), path.join(volume, '..data'));
      if (current !== '') await rm(path.join(volume, current), { recursive: true });
      current = version;
    };
    await update('..2026_01_05_10_00_00.000000001', one);
    await symlink('..data/meshmux.yaml', path.join(volume, 'meshmux.yaml'));
    // At debug level it says when a change in the folder left the file as it was.
    const meshmux = await MeshmuxProcess.start(path.join(volume, 'meshmux.yaml'), {
      cwd: dir,
      env: { MESHMUX_LOG_LEVEL: 'debug' },
    });
    const client = new IstiodClient({ address: meshmux.xds }).start();
    try {
      await client.waitFor(
        (c) => c.configs(SE).has('shop/cart'),
        20_000,
        () => 'cart',
      );
      const from = meshmux.logs.length;
      const swapped = performance.now();
      await update('..2026_01_05_10_01_00.000000002', two);
      await client.waitFor(
        (c) => c.configs(SE).has('shop/ledger'),
        20_000,
        () => 'the object of the source the update added',
      );
      const ms = performance.now() - swapped;

      const later = meshmux.logs.length;
      await update('..2026_01_05_10_02_00.000000003', two);
      await meshmux.waitForLog(
        (l) => l.msg === 'configuration file unchanged; not reloaded',
        later,
        15_000,
        'the update that leaves the file alone looked at',
      );
      const reloads = meshmux.logs.slice(from).filter((l) => l.msg === 'reloading configuration');
      assert.deepEqual(
        reloads.map((l) => l['why']),
        ['file changed'],
        'one reload, for the update that changed the file',
      );
      assert.equal(client.streamEnds.length, 0);
      console.log(
        `# ConfigMap update adding a source: its object at the istiod ${ms.toFixed(0)} ms after the swap`,
      );
    } finally {
      client.close();
      await meshmux.stop();
      await dispose();
    }
  });

  it('names every changed setting that applies only on restart, in the log and on the status page, and applies the sources now', async () => {
    const { dir, dispose } = await tempDir('meshmux-config-reload-');
    const configFile = path.join(dir, 'meshmux.yaml');
    await mkdir(path.join(dir, 'mesh'));
    await mkdir(path.join(dir, 'extra'));
    await writeFile(path.join(dir, 'mesh', 'a.yaml'), plainServiceEntry('cart'));
    await writeFile(path.join(dir, 'extra', 'b.yaml'), plainServiceEntry('ledger'));
    const startOnly = 'state: {dir: none}\nmerge: {semanticConflicts: serve-all}\nsyncTimeout: 30s\n';
    const changed = 'state: {dir: ./state}\nmerge: {semanticConflicts: highest-priority}\nsyncTimeout: 10s\n';
    const extra = '  - {name: extra, type: file, path: ./extra}\n';
    const edit = async (text: string): Promise<void> => {
      await writeFile(`${configFile}.tmp`, text);
      await rename(`${configFile}.tmp`, configFile);
    };
    await writeFile(configFile, `${startOnly}${config()}\n`);
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir });
    const client = new IstiodClient({ address: meshmux.xds }).start();
    const restartWarning =
      'settings that apply only on restart changed; they keep their running values, sources and policies are applied now';
    try {
      await client.waitFor(
        (c) => c.configs(SE).has('shop/cart'),
        20_000,
        () => 'cart',
      );
      let from = meshmux.logs.length;
      await edit(`${changed}${config()}\n${extra}`);
      await meshmux.waitForLog((l) => l.msg === 'configuration reloaded', from, 15_000, 'the reload');
      const warned = meshmux.logs.slice(from).filter((l) => l.msg === restartWarning);
      assert.deepEqual(
        warned.map((l) => l['restartOnly']),
        [['syncTimeout', 'state', 'merge']],
      );
      await client.waitFor(
        (c) => c.configs(SE).has('shop/ledger'),
        20_000,
        () => 'the object of the source the edit added',
      );
      assert.equal(
        (await meshmux.debug<{ dir: string }>('state')).dir,
        'none',
        'state.dir waits for a restart',
      );
      const page = await meshmux.statusPage();
      assert.match(
        page,
        /id="config-restart-pending"[^]*<code>syncTimeout<\/code>, <code>state<\/code>, <code>merge<\/code>/,
      );

      // Taken back by a later edit: nothing waits for a restart any more.
      from = meshmux.logs.length;
      await edit(`${startOnly}${config()}\n${extra}`);
      await meshmux.waitForLog((l) => l.msg === 'configuration reloaded', from, 15_000, 'the reload');
      assert.deepEqual(
        meshmux.logs.slice(from).filter((l) => l.msg === restartWarning),
        [],
      );
      assert.doesNotMatch(await meshmux.statusPage(), /id="config-restart-pending"/);
    } finally {
      client.close();
      await meshmux.stop();
      await dispose();
    }
  });

  it('warns of each field of the mesh section MeshConfig does not have, naming file and field, at start and on a reload', async () => {
    const { dir, dispose } = await tempDir('meshmux-config-reload-');
    const configFile = path.join(dir, 'meshmux.yaml');
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'a.yaml'), plainServiceEntry('cart'));
    const mesh = 'mesh: {discoveryAdress: istiod.istio-system.svc:15012}\n';
    await writeFile(configFile, `${mesh}${config()}\n`);
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir });
    const ignored = (l: LogLine): boolean =>
      l.msg === 'ignored: no such field in MeshConfig, or a second spelling of one';
    try {
      assert.deepEqual(
        meshmux.logs.filter(ignored).map((l) => [l['file'], l['field']]),
        [[configFile, 'mesh.discoveryAdress']],
        'at start',
      );
      const from = meshmux.logs.length;
      await writeFile(`${configFile}.tmp`, `${mesh}${config('127.0.0.1/32')}\n`);
      await rename(`${configFile}.tmp`, configFile);
      await meshmux.waitForLog((l) => l.msg === 'configuration reloaded', from, 15_000, 'the reload');
      assert.deepEqual(
        meshmux.logs
          .slice(from)
          .filter(ignored)
          .map((l) => [l['file'], l['field']]),
        [[configFile, 'mesh.discoveryAdress']],
        'on the reload',
      );
    } finally {
      await meshmux.stop();
      await dispose();
    }
  });

  it('refuses to start on an invalid configuration with one line per problem and exit code 1, never a stack trace', async () => {
    const { dir, dispose } = await tempDir('meshmux-config-start-');
    const configFile = path.join(dir, 'meshmux.yaml');
    await writeFile(
      configFile,
      config('10.0.0.0/99', '  - name: up\n    type: xds\n    address: 127.0.0.1:99999'),
    );
    try {
      const run = spawnSync(process.execPath, [CLI, 'serve', '--config', configFile], {
        cwd: dir,
        encoding: 'utf8',
      });
      assert.equal(run.status, 1);
      const lines = run.stderr.trim().split('\n');
      assert.deepEqual(lines, [
        `meshmux: ${configFile} line 4 field policies[0].match.peerCidrs[0]: prefix length must be 0 to 32 for an IPv4 address, got /99`,
        `meshmux: ${configFile} line 11 field sources[1].address: port must be a number from 1 to 65535, got "99999"`,
      ]);
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    } finally {
      await dispose();
    }
  });
});
