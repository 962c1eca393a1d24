/**
 * 200 istiod-like clients in 3 policies against a meshmux child process: memory per connected
 * client (server RSS and heap, read from /proc and the counters page) and the number of responses
 * assembled and objects encoded after one change. Prints figures; asserts nothing.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KINDS } from '../src/schema/kinds.js';
import { PACKAGE_ROOT } from '../src/core/paths.js';
import { RawAdsStream } from '../test/support/raw-ads-stream.js';

const CLIENTS = 200;
const TEAMS = ['a', 'b', 'c'];

function objects(version: number): string {
  const docs: string[] = [];
  for (const team of TEAMS) {
    for (let i = 0; i < 50; i++) {
      docs.push(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-${i}, namespace: team-${team}}
spec: {hosts: [svc-${i}.team-${team}.example.com], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS${
        team === 'a' && i === 0 ? `, endpoints: [{address: 10.0.0.${version}}]` : ''
      }}
`);
    }
  }
  return docs.join('---\n');
}

async function rssKb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

async function counters(http: string): Promise<{ encodes: number; assemblies: number; streams: number }> {
  return (await (await fetch(`${http}/debug/counters`)).json()) as {
    encodes: number;
    assemblies: number;
    streams: number;
  };
}

const dir = await mkdtemp(path.join(tmpdir(), 'meshmux-bench-'));
await writeFile(path.join(dir, 'mesh.yaml'), objects(1));
const policies = TEAMS.map(
  (t) => `  - {name: team-${t}, match: {metadata: {TEAM: ${t}}}, allow: {namespaces: [team-${t}]}}`,
).join('\n');
await writeFile(
  path.join(dir, 'meshmux.yaml'),
  `server: {xds: 127.0.0.1:25010, http: 127.0.0.1:25014, admin: {address: 127.0.0.1:25015}}\nsources: [{name: local, type: file, path: ./mesh.yaml}]\npolicies:\n${policies}\n`,
);
const server = spawn(
  process.execPath,
  [path.join(PACKAGE_ROOT, 'dist', 'bundle', 'cli.js'), 'serve', '--config', 'meshmux.yaml'],
  {
    cwd: dir,
    env: { ...process.env, MESHMUX_LOG_LEVEL: 'warn' },
    stdio: 'inherit',
  },
);
const http = 'http://127.0.0.1:25015';
for (let i = 0; i < 100; i++) {
  try {
    if ((await fetch(`${http}/ready`)).ok) break;
  } catch {
    // not listening yet
  }
  await new Promise((r) => setTimeout(r, 100));
}
const pid = server.pid ?? 0;
const idleRss = await rssKb(pid);
const typeUrls = KINDS.currentTypeUrls();
const clients: RawAdsStream[] = [];
for (let i = 0; i < CLIENTS; i++) {
  const c = new RawAdsStream('127.0.0.1:25010');
  c.send({
    type_url: typeUrls[0] ?? '',
    node: {
      id: `sidecar~10.0.${i >> 8}.${i & 255}~istiod-${i}.istio-system~istio-system.svc.cluster.local`,
      metadata: { fields: { TEAM: { stringValue: TEAMS[i % 3] ?? 'a' } } },
    },
  });
  for (const t of typeUrls.slice(1)) c.send({ type_url: t });
  clients.push(c);
}
// Every client gets one response per type; ACK each so later pushes can go out.
await Promise.all(
  clients.map(async (c) => {
    for (let k = 0; k < typeUrls.length; k++) {
      const r = await c.next(60_000);
      c.send({ type_url: r.type_url, response_nonce: r.nonce, version_info: r.version_info });
    }
  }),
);
const synced = await counters(http);
const busyRss = await rssKb(pid);
await writeFile(path.join(dir, 'mesh.yaml'), objects(2));
await Promise.all(clients.filter((_, i) => i % 3 === 0).map((c) => c.next(60_000)));
await new Promise((r) => setTimeout(r, 500));
const after = await counters(http);
const untouched = clients.filter((_, i) => i % 3 !== 0).reduce((n, c) => n + c.pending(), 0);
console.log(`${CLIENTS} clients in ${TEAMS.length} policies, ${TEAMS.length * 50} ServiceEntries`);
console.log(
  `  server RSS idle ${(idleRss / 1024).toFixed(1)} MB, with ${CLIENTS} synced clients ${(busyRss / 1024).toFixed(1)} MB`,
);
console.log(`  memory per connected client: ${((busyRss - idleRss) / CLIENTS).toFixed(1)} KB (RSS)`);
console.log(
  `  initial sync: ${synced.assemblies} responses assembled, ${synced.encodes} objects encoded for ${CLIENTS * typeUrls.length} responses sent`,
);
console.log(
  `  after one change: ${after.assemblies - synced.assemblies} response(s) assembled, ${after.encodes - synced.encodes} object(s) encoded; responses to clients of other policies: ${untouched}`,
);
for (const c of clients) c.close();
server.kill('SIGTERM');
await new Promise((r) => server.once('exit', r));
await rm(dir, { recursive: true, force: true });
