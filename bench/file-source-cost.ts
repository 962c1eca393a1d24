/**
 * CPU of a file source holding many objects, the source alone (no merge, no ADS):
 *
 *   npm run build && node dist/bench/file-source-cost.js [--objects 50000] [--files 500] [--edits 10] [--meshmux]
 *
 * Writes `--objects` ServiceEntries spread over `--files` YAML files and starts a file source on
 * them. Then, in this process: its CPU per rescan while no file changes (the safety-net scan that
 * stats every file every few seconds), and per one-file edit (one object's host changed) from the
 * write to the snapshot that carries it. With `--meshmux`, meshmux itself runs on the files (its
 * merge, no istiod connected) and an edit ends at the merged snapshot that carries it. Prints
 * figures; asserts nothing.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { SourceSnapshotEvent } from '../src/core/source-event.js';
import { FileSource } from '../src/upstream/file/file-source.js';
import { tempDir } from '../test/support/meshmux-harness.js';
import { SourceEventRecorder } from '../test/support/source-event-recorder.js';
import { option, startInProcess, until } from './in-process.js';

const OBJECTS = Number(option('objects', '50000'));
const FILES = Number(option('files', '500'));
const EDITS = Number(option('edits', '10'));
const THROUGH_MESHMUX = process.argv.includes('--meshmux');
const SERVICE_ENTRY = 'networking.istio.io/ServiceEntry';
/** Rescans while idle: often, so that a few seconds hold many of them. */
const RESCAN_MS = 250;
const IDLE_MS = 5_000;

function serviceEntry(i: number, host: string): string {
  return [
    'apiVersion: networking.istio.io/v1',
    'kind: ServiceEntry',
    `metadata: {name: se-${i}, namespace: ns-${i % 50}, labels: {app: se-${i}}}`,
    `spec: {hosts: [${host}], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}`,
  ].join('\n');
}

function fileText(f: number, edited?: { index: number; host: string }): string {
  const perFile = Math.ceil(OBJECTS / FILES);
  const docs: string[] = [];
  for (let i = f * perFile; i < Math.min(OBJECTS, (f + 1) * perFile); i++) {
    docs.push(serviceEntry(i, edited?.index === i ? edited.host : `se-${i}.example.com`));
  }
  return `${docs.join('\n---\n')}\n`;
}

const fileName = (f: number): string => `team-${String(f).padStart(5, '0')}.yaml`;

function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const { dir, dispose } = await tempDir('meshmux-file-cost-');
const root = path.join(dir, 'mesh');
await mkdir(root);
for (let f = 0; f < FILES; f++) await writeFile(path.join(root, fileName(f)), fileText(f));

/**
 * What an edit is waited on through: the version of object `name` where the change lands (the
 * source's last snapshot, or meshmux's merged one), and a promise of the next change of it.
 */
interface Probe {
  readonly objects: number;
  versionOf(name: string): string | undefined;
  changed(name: string, before: string | undefined): Promise<void>;
  close(): Promise<void>;
}

async function sourceAlone(): Promise<Probe> {
  const source = new FileSource({
    name: 'bench',
    path: root,
    defaultNamespace: 'default',
    rescanMs: RESCAN_MS,
  });
  const events = new SourceEventRecorder(source.events$);
  let current = await events.snapshot(0, 300_000);
  return {
    objects: current.resources.length,
    versionOf: (name) => [...current.resources].find((r) => r.name === name)?.version,
    changed: async (name, before) => {
      current = (await events.next(
        (ev) =>
          ev.type === 'snapshot' && [...ev.resources].some((r) => r.name === name && r.version !== before),
        events.count,
        60_000,
      )) as SourceSnapshotEvent;
    },
    close: () => {
      events.close();
      return Promise.resolve();
    },
  };
}

async function throughMeshmux(): Promise<Probe> {
  const config = [
    'sources:',
    '  - name: files',
    '    type: file',
    `    path: ${JSON.stringify(root)}`,
    `    rescanInterval: ${RESCAN_MS}ms`,
  ].join('\n');
  const meshmux = await startInProcess(config);
  const served = (): readonly { name: string; version: string }[] =>
    meshmux.engine.current().kinds.get(SERVICE_ENTRY)?.resources ?? [];
  await until(() => served().length >= OBJECTS, 300_000, 'merged first state');
  return {
    objects: served().length,
    versionOf: (name) => served().find((r) => r.name === name)?.version,
    changed: (name, before) =>
      until(() => served().find((r) => r.name === name)?.version !== before, 60_000, 'merged edit'),
    close: () => meshmux.stop(),
  };
}

const t0 = performance.now();
const probe = THROUGH_MESHMUX ? await throughMeshmux() : await sourceAlone();
try {
  console.log(
    `${probe.objects} objects in ${FILES} files${THROUGH_MESHMUX ? ', through meshmux' : ''}: first state in ${(performance.now() - t0).toFixed(0)} ms`,
  );
  // Idle: whatever the rescans cost, over a window of several of them.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const idleFrom = cpuMs();
  const idleStart = performance.now();
  await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
  const idleCpu = cpuMs() - idleFrom;
  const rescans = (performance.now() - idleStart) / RESCAN_MS;
  console.log(
    `idle: ${idleCpu.toFixed(0)} ms of CPU over ${rescans.toFixed(0)} rescans, ${(idleCpu / rescans).toFixed(1)} ms per rescan (${FILES} files stat'ed each)`,
  );

  const cpu: number[] = [];
  const wall: number[] = [];
  for (let e = 0; e < EDITS; e++) {
    const f = (e * 37) % FILES;
    const index = f * Math.ceil(OBJECTS / FILES);
    const name = `se-${index}`;
    const before = probe.versionOf(name);
    const c = cpuMs();
    const t = performance.now();
    const landed = probe.changed(name, before);
    await writeFile(path.join(root, fileName(f)), fileText(f, { index, host: `edit-${e}.example.com` }));
    await landed;
    wall.push(performance.now() - t);
    cpu.push(cpuMs() - c);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  console.log(
    `one-file edit to its ${THROUGH_MESHMUX ? 'merged ' : ''}snapshot: CPU p50 ${median(cpu).toFixed(1)} ms (max ${Math.max(...cpu).toFixed(1)}), wall p50 ${median(wall).toFixed(1)} ms`,
  );
} finally {
  await probe.close();
  await dispose();
}
