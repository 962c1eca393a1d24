/**
 * What one object change costs between two tiers of meshmux, in bytes on the wire:
 *
 *   npm run build && MESHMUX_LOG_LEVEL=silent MESHMUX_STATE_DIR=none node dist/bench/delta-tier.js [--objects 10000] [--changes 20]
 *
 * A central meshmux reads N ServiceEntries from a file; a regional meshmux subscribes to it with an
 * `xds` source, once over delta ADS (`delta: true`) and once over state of the world, each alone.
 * Each change rewrites the file with one object's host changed and waits until the regional
 * meshmux holds it. Printed per protocol: the bytes the central sent for the first state and per
 * change (median and max), and the ratio between the two protocols. Everything runs in this
 * process on loopback; bytes do not depend on the machine's load, so the figures are exact.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { RunningMeshmux } from '../src/app.js';
import { option, startInProcess as start, until } from './in-process.js';

const OBJECTS = Number(option('objects', '10000'));
const CHANGES = Number(option('changes', '20'));

function serviceEntries(count: number, changed: number, round: number): string {
  const docs: string[] = [];
  for (let i = 0; i < count; i++) {
    const host = i === changed ? `svc-${i}.round-${round}.example.com` : `svc-${i}.fleet.example.com`;
    docs.push(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-${i}, namespace: fleet, labels: {app: svc-${i}}}
spec: {hosts: [${host}], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}
`);
  }
  return docs.join('---\n');
}

/** The body of a ServiceEntry the regional tier holds, as text: enough to find a host name in it. */
function bodyText(meshmux: RunningMeshmux, name: string): string | undefined {
  const kind = meshmux.engine.current().kinds.get('networking.istio.io/ServiceEntry');
  const found = kind?.resources.find((r) => r.name === name);
  return found === undefined ? undefined : Buffer.from(found.body).toString('latin1');
}

interface TierFigures {
  readonly firstStateBytes: number;
  readonly perChangeMedianBytes: number;
  readonly perChangeMaxBytes: number;
}

async function measure(delta: boolean): Promise<TierFigures> {
  const dir = await mkdtemp(path.join(tmpdir(), 'meshmux-delta-tier-'));
  const file = path.join(dir, 'fleet.yaml');
  await writeFile(file, serviceEntries(OBJECTS, -1, 0));
  const central = await start('sources: [{name: fleet, type: file, path: ./fleet.yaml}]\n', dir);
  const regional = await start(
    `sources: [{name: central, type: xds, address: '127.0.0.1:${central.xdsPort}', delta: ${delta}, apiVersions: current}]\n`,
    dir,
  );
  try {
    const count = (): number =>
      regional.engine.current().kinds.get('networking.istio.io/ServiceEntry')?.resources.length ?? 0;
    await until(() => count() === OBJECTS, 120_000, `${OBJECTS} objects at the regional tier`);
    const firstStateBytes = central.ads.counters().bytesSent;
    const perChange: number[] = [];
    for (let round = 1; round <= CHANGES; round++) {
      const before = central.ads.counters().bytesSent;
      const changed = (round * 7919) % OBJECTS;
      await writeFile(file, serviceEntries(OBJECTS, changed, round));
      const marker = `round-${round}.example.com`;
      await until(
        () => bodyText(regional, `svc-${changed}`)?.includes(marker) === true,
        120_000,
        `change ${round}`,
      );
      perChange.push(central.ads.counters().bytesSent - before);
    }
    perChange.sort((a, b) => a - b);
    return {
      firstStateBytes,
      perChangeMedianBytes: perChange[Math.floor(perChange.length / 2)] ?? 0,
      perChangeMaxBytes: perChange[perChange.length - 1] ?? 0,
    };
  } finally {
    await regional.stop();
    await central.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

const delta = await measure(true);
const sotw = await measure(false);
console.log(`delta tier, ${OBJECTS} ServiceEntries, ${CHANGES} one-object changes (bytes the central sent)`);
console.log(
  `  delta ADS: first state ${delta.firstStateBytes}, per change median ${delta.perChangeMedianBytes}, max ${delta.perChangeMaxBytes}`,
);
console.log(
  `  SotW ADS:  first state ${sotw.firstStateBytes}, per change median ${sotw.perChangeMedianBytes}, max ${sotw.perChangeMaxBytes}`,
);
console.log(
  `  per change, SotW / delta: ${(sotw.perChangeMedianBytes / Math.max(1, delta.perChangeMedianBytes)).toFixed(0)}×`,
);
console.log(
  JSON.stringify({
    delta: {
      bytesPerChangeAcrossTier: delta.perChangeMedianBytes,
      sotwBytesPerChange: sotw.perChangeMedianBytes,
      objects: OBJECTS,
    },
  }),
);
