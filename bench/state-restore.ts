/**
 * How fast a restarted meshmux serves from its persisted state while its upstream is down:
 * a state file of N ServiceEntries and N/25 VirtualServices (default 50,000; `node
 * dist/bench/state-restore.js 100000` for more) is written as meshmux writes it, then `meshmux
 * serve` starts as its own process with the upstream unreachable and an istiod client connected.
 * Prints the write and read costs and the time from spawn to the istiod holding every object.
 * Asserts nothing.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFile } from 'node:fs/promises';
import { pino } from 'pino';
import { makeResource, type ConfigResource } from '../src/core/resource.js';
import type { SourceRecord } from '../src/merge/source-record.js';
import { FileRecordStore } from '../src/state/file-record-store.js';
import { decodeStateFile } from '../src/state/state-file.js';
import { encodeBody, kindNamed } from '../test/support/fake-objects.js';
import { freePort } from '../test/support/free-port.js';
import { IstiodClient } from '../test/support/istiod-client.js';
import { MeshmuxProcess } from '../test/support/meshmux-process.js';
import { tempDir } from '../test/support/meshmux-harness.js';

const SERVICE_ENTRIES = Number(process.argv[2] ?? 50_000);
const VIRTUAL_SERVICES = Math.ceil(SERVICE_ENTRIES / 25);
const SE_URL = 'networking.istio.io/v1/ServiceEntry';
const VS_URL = 'networking.istio.io/v1/VirtualService';

function resources(): ConfigResource[] {
  const se = kindNamed('ServiceEntry');
  const vs = kindNamed('VirtualService');
  const out: ConfigResource[] = [];
  const make = (kind: string, namespace: string, name: string, body: Uint8Array): ConfigResource =>
    makeResource({
      kind,
      namespace,
      name,
      labels: { app: name },
      annotations: {},
      createTime: { seconds: 1_700_000_000, nanos: 0 },
      body,
      origin: { upstreamVersion: '1' },
    });
  for (let i = 0; i < SERVICE_ENTRIES; i++) {
    const host = `svc-${i}.ns-${i % 200}.example.com`;
    const body = encodeBody(se, {
      hosts: [host],
      location: 'MESH_INTERNAL',
      resolution: 'STATIC',
      ports: [{ number: 8080, name: 'http', protocol: 'HTTP' }],
      endpoints: [{ address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` }],
    });
    out.push(make(se.key, `ns-${i % 200}`, `svc-${i}`, body));
  }
  for (let i = 0; i < VIRTUAL_SERVICES; i++) {
    const host = `svc-${i}.ns-${i % 200}.example.com`;
    const body = encodeBody(vs, {
      hosts: [host],
      http: [{ route: [{ destination: { host } }], timeout: { seconds: 5 } }],
    });
    out.push(make(vs.key, `ns-${i % 200}`, `route-${i}`, body));
  }
  return out;
}

async function main(): Promise<void> {
  const dir = await tempDir('meshmux-bench-restore-');
  try {
    const objects = resources();
    const record: SourceRecord = {
      source: 'mesh',
      type: 'xds',
      revision: 'bench',
      lastSyncMs: Date.now(),
      savedMs: Date.now(),
      complete: true,
      answeredKinds: [],
      resources: objects,
    };
    const stateDir = path.join(dir.dir, 'state');
    const log = pino({ level: 'silent' });
    const { store } = await FileRecordStore.open({ dir: stateDir, log, delayMs: 1 });
    let written = { bytes: 0, ms: 0 };
    const writeStore = await FileRecordStore.open({
      dir: path.join(dir.dir, 'timing'),
      log,
      delayMs: 1,
      hooks: { onWrite: (_s, bytes, ms) => (written = { bytes, ms }) },
    });
    void writeStore.store.changed('mesh', () => record);
    await writeStore.store.close();
    void store.changed('mesh', () => record);
    await store.close();
    const file = path.join(stateDir, 'mesh.state');
    const bytes = await readFile(file);
    const decodeStart = performance.now();
    decodeStateFile(bytes, file);
    const decodeMs = performance.now() - decodeStart;

    const down = await freePort();
    const configFile = path.join(dir.dir, 'meshmux.yaml');
    await writeFile(
      configFile,
      [
        'state: { dir: state }',
        'sources:',
        '  - name: mesh',
        '    type: xds',
        `    address: 127.0.0.1:${down}`,
        '    kinds: [ServiceEntry, VirtualService]',
        '',
      ].join('\n'),
    );
    const xds = `127.0.0.1:${await freePort()}`;
    const client = new IstiodClient({ address: xds, backoff: { initialMs: 20, maxMs: 100 } }).start();
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds, timeoutMs: 60_000 });
    try {
      await client.waitFor(
        (c) => c.configs(SE_URL).size === SERVICE_ENTRIES && c.configs(VS_URL).size === VIRTUAL_SERVICES,
        120_000,
        () => 'every persisted object at the istiod',
      );
      const servedMs = performance.now() - meshmux.spawnedAt;
      const started = meshmux.logs.find((e) => e['msg'] === 'meshmux started');
      const restored = meshmux.logs.find(
        (e) => e['msg'] === 'serving the persisted state until the source syncs',
      );
      const first = Number(meshmux.logs[0]?.['time']);
      const at = (msg: string): number =>
        Number(meshmux.logs.find((e) => e['msg'] === msg)?.['time']) - first;
      const spawnToStarted = Number(started?.['time']) - first;
      // Log times are wall clock; the spawn time is on the performance clock of this process.
      const spawnedAtMs = performance.timeOrigin + meshmux.spawnedAt;
      const ready = await fetch(`${meshmux.http}/ready`);
      const figures = {
        objects: objects.length,
        'state file MB': (bytes.byteLength / 1e6).toFixed(1),
        'write ms (encode, write, fsync, rename)': written.ms.toFixed(0),
        'read and check ms (in process)': decodeMs.toFixed(0),
        'restored log line present': restored !== undefined,
        'ms from first log line to the state folder read': at('state folder opened'),
        'ms from first log line to the state restored': at(
          'serving the persisted state until the source syncs',
        ),
        'ms from first log line to "meshmux started"': spawnToStarted,
        'ms from spawn to "meshmux started" (listening, every restored kind answerable)': (
          Number(started?.['time']) - spawnedAtMs
        ).toFixed(0),
        '/ready status once served': ready.status,
        'ms from spawn to every object at the istiod': servedMs.toFixed(0),
      };
      for (const [k, v] of Object.entries(figures)) console.log(`${k}: ${String(v)}`);
    } finally {
      client.close();
      await meshmux.kill();
    }
  } finally {
    await dir.dispose();
  }
}

await main();
