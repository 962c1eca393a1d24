import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { FakeAdsServer } from './fake-ads-server.js';
import { fakeDestinationRule, fakeVirtualService, type FakeObject } from './fake-objects.js';
import { IstiodClient } from './istiod-client.js';
import { plainServiceEntry } from './hostile-files.js';
import { tempDir } from './meshmux-harness.js';
import { MeshmuxProcess } from './meshmux-process.js';

/**
 * An istiod stand-in subscribed to `xds` that redials fast (20 ms, backing off to 200 ms), so a
 * fault test measures meshmux and not the client's backoff. The caller closes it.
 */
export function connectIstiod(xds: string): IstiodClient {
  return new IstiodClient({ address: xds, backoff: { initialMs: 20, maxMs: 200 } }).start();
}

/** Every object an istiod holds, as `<type URL> <namespace>/<name>`. */
export function inventory(client: IstiodClient): Set<string> {
  const out = new Set<string>();
  for (const [typeUrl, configs] of client.store)
    for (const name of configs.keys()) out.add(`${typeUrl} ${name}`);
  return out;
}

/** What `before` held that `now` does not. */
export function lost(before: ReadonlySet<string>, now: ReadonlySet<string>): string[] {
  return [...before].filter((x) => !now.has(x));
}

/** `/ready` of a running meshmux, with its status code. */
export async function readiness(http: string): Promise<{
  status: number;
  body: {
    ready: boolean;
    waitingFor: string[];
    sources: Array<{ name: string; state: string; restoredFrom?: string }>;
  };
}> {
  const res = await fetch(`${http}/ready`, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, body: (await res.json()) as never };
}

/** Prints a fault's figures as one `#` line of the test output, for RELIABILITY.md. */
export function report(fault: string, figures: Record<string, number | string>): void {
  const shown = Object.entries(figures)
    .map(([k, v]) => `${k}: ${typeof v === 'number' ? Math.round(v) : v}`)
    .join(', ');
  console.log(`# fault "${fault}": ${shown}`);
}

/** Resolves once `client` has been answered every type it requested on a stream after `afterStream`. */
export function answeredAfter(
  client: IstiodClient,
  afterStream: number,
  what: string,
  timeoutMs = 20_000,
): Promise<void> {
  return client.waitFor(
    (c) =>
      c.requestedTypeUrls.every((t) => c.received.some((r) => r.stream > afterStream && r.typeUrl === t)),
    timeoutMs,
    () => what,
  );
}

/** The names of what {@link meshUpstream} holds of each kind, in namespace `shop`. */
export const MESH_NAMES: readonly string[] = [0, 1, 2, 3, 4].map((i) => `svc-${i}`);

/** A ServiceEntry like the ones {@link meshUpstream} holds, named `name` in `shop`. */
export function meshServiceEntry(name: string): FakeObject {
  return {
    namespace: 'shop',
    name,
    spec: {
      hosts: [`${name}.example.com`],
      location: 'MESH_EXTERNAL',
      resolution: 'DNS',
      ports: [{ number: 443, name: 'https', protocol: 'TLS' }],
    },
  };
}

/** An istiod-like upstream holding 5 VirtualServices, 5 DestinationRules and 5 ServiceEntries. */
export async function meshUpstream(port = 0): Promise<FakeAdsServer> {
  const fake = await FakeAdsServer.start({ peer: 'istiod' }, port);
  fake
    .set(
      'VirtualService',
      MESH_NAMES.map((n) => fakeVirtualService(n)),
    )
    .set(
      'DestinationRule',
      MESH_NAMES.map((n) => fakeDestinationRule(n)),
    )
    .set('ServiceEntry', MESH_NAMES.map(meshServiceEntry));
  return fake;
}

/** A VirtualService routing to itself, as a YAML document followed by `---`. */
export function virtualServiceYaml(namespace: string, name: string): string {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${namespace}}
spec: {hosts: [${name}], http: [{route: [{destination: {host: ${name}}}]}]}
---
`;
}

/** Confirms what `source` holds, as `meshmux confirm` does. */
export async function confirm(meshmux: MeshmuxProcess, source: string): Promise<void> {
  const answer = await fetch(`${meshmux.admin}/debug/sources/${source}/confirm`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  assert.equal(answer.status, 200);
}

/**
 * A configuration of a ZooKeeper source `dubbo` (namespace `dubbo`) of `servers` under `root`,
 * beside a file source `mesh` of the folder `./mesh`.
 */
export function registryBesideFolder(servers: string, root = '/dubbo'): string {
  return [
    'sources:',
    '  - name: dubbo',
    '    type: zookeeper',
    `    servers: ${servers}`,
    `    root: ${root}`,
    '    namespace: dubbo',
    '  - { name: mesh, type: file, path: ./mesh }',
    '',
  ].join('\n');
}

/**
 * meshmux serving a new folder `mesh/` that holds one ServiceEntry (`se-0.yaml`), started with the
 * environment `env` (a collector to export to, say). The caller stops meshmux, then disposes of
 * the folder.
 */
export async function meshmuxOnFolder(
  env: Record<string, string>,
): Promise<{ meshmux: MeshmuxProcess; dir: string; dispose: () => Promise<void> }> {
  const { dir, dispose } = await tempDir();
  await mkdir(path.join(dir, 'mesh'));
  await writeFile(path.join(dir, 'mesh', 'se-0.yaml'), plainServiceEntry('se-0'));
  await writeFile(path.join(dir, 'meshmux.yaml'), 'sources: [{name: mesh, type: file, path: ./mesh}]\n');
  const meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir, env });
  return { meshmux, dir, dispose };
}
