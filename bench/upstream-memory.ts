/**
 * What reading one upstream response costs meshmux in memory, measured, per response size:
 *
 *   npm run build && node dist/bench/upstream-memory.js [--sizes 5000,20000,50000] [--large 8]
 *
 * A real gRPC upstream (in this process) serves state-of-the-world responses of N ServiceEntries
 * (and one case of a few VirtualServices of about 1 MB each) to a real meshmux in a child process
 * of its own, started with `--expose-gc` and no downstream client. For each case it prints:
 *
 * - `bytes`: the DiscoveryResponse as sent;
 * - `peak`: the highest resident set size while meshmux read and applied it, above the resident
 *   size after a full collection just before (Linux peak RSS, reset through `/proc/self/clear_refs`);
 * - `kept`: heap and external memory retained after a full collection, above the same figure before;
 * - each as a multiple of the response.
 *
 * Steps per case: the first full state (`first`), twice the same state with one object changed
 * (`change`: what steady state costs, the previous state being held too), the same with one
 * istiod subscribed (`+istiod`: what serving it holds is printed apart, and included in `held`),
 * then, the istiod gone, a full state keeping a tenth of the objects (`shrink`: what is held must
 * shrink with the state). A step ends once the process is idle again.
 *
 * Each case is measured a second time with a bare grpc-js client in meshmux's place (rows
 * `grpc-js`: same channel options, the last response of each type kept, as meshmux keeps one):
 * the transport's own cost, so what meshmux adds to it shows apart.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { writeHeapSnapshot } from 'node:v8';
import * as grpc from '@grpc/grpc-js';
import { startMeshmux } from '../src/app.js';
import { KINDS, typeUrlOf, type KindDescriptor } from '../src/schema/kinds.js';
import { anyTypeUrl, messageType } from '../src/schema/proto-root.js';
import { parseMeshmuxConfig } from '../src/settings/meshmux-config.js';
import { peakRssBytes } from '../src/telemetry/process-counters.js';
import { DEFAULT_MAX_RECEIVE_BYTES } from '../src/upstream/streaming/dial-settings.js';
import {
  assembleResponse,
  encodeNode,
  encodeRequest,
  lengthDelimited,
  RAW_SOTW_ADS,
  scanResponse,
  stringField,
} from './wire-scan.js';

const SE = KINDS.get('networking.istio.io/ServiceEntry') as KindDescriptor;
const VS = KINDS.get('networking.istio.io/VirtualService') as KindDescriptor;
const MCP_RESOURCE = messageType('istio.mcp.v1alpha1.Resource');
const MCP_RESOURCE_URL = anyTypeUrl('istio.mcp.v1alpha1.Resource');
const MB = 1024 * 1024;

/** Memory of the meshmux process: after a full collection, and its peak RSS since the last reset. */
interface MemoryReading {
  readonly heapUsed: number;
  readonly external: number;
  readonly rss: number;
  /** Peak RSS since the last reset, bytes; undefined where the kernel does not report it. */
  readonly peakRss?: number;
}

type ParentMessage =
  | { readonly type: 'arm'; readonly kind: string }
  | { readonly type: 'settle'; readonly kind: string; readonly version: string }
  | { readonly type: 'read' }
  | { readonly type: 'stop' };

type ChildMessage =
  | { readonly type: 'ready'; readonly xdsPort: number }
  | { readonly type: 'armed'; readonly before: MemoryReading; readonly version: string }
  | { readonly type: 'settled'; readonly peakRss?: number; readonly after: MemoryReading }
  | { readonly type: 'read'; readonly now: MemoryReading };

// ---------------------------------------------------------------------------------------------
// The meshmux side (child process).

/**
 * Full collections until what is retained settles. V8 frees the memory of dead array buffers on a
 * background thread after a collection, and counts it as external until then: read at once, a
 * response just dropped still shows.
 */
async function collect(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('the meshmux process needs --expose-gc');
  let last = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 10; round++) {
    gc();
    await new Promise((r) => setTimeout(r, 20));
    const { heapUsed, external } = process.memoryUsage();
    if (heapUsed + external >= last) return;
    last = heapUsed + external;
  }
}

function resetPeak(): void {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
  } catch {
    // Not Linux, or not allowed: the peak is then the process's lifetime peak.
  }
}

function reading(peak?: number): MemoryReading {
  const m = process.memoryUsage();
  return {
    heapUsed: m.heapUsed,
    external: m.external,
    rss: m.rss,
    ...(peak === undefined ? {} : { peakRss: peak }),
  };
}

/** Resolves once the process has used under 5 ms of CPU in 200 ms (at most a minute from now). */
async function quiet(): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const start = process.cpuUsage();
    await new Promise((r) => setTimeout(r, 200));
    const used = process.cpuUsage(start);
    if ((used.user + used.system) / 1000 < 5 || Date.now() > deadline) return;
  }
}

let snapshotCount = 0;

async function child(upstream: string): Promise<void> {
  const config = parseMeshmuxConfig(
    [
      'server:',
      '  xds: 127.0.0.1:0',
      '  http: 127.0.0.1:0',
      'state: { dir: "none" }',
      'sources:',
      '  - name: up',
      '    type: xds',
      `    address: ${upstream}`,
      '    kinds: [ServiceEntry, VirtualService]',
      '    apiVersions: current',
      // The shrink step removes most objects at once, which the default guard would hold back.
      '    maxDeleteRatio: 1',
    ].join('\n'),
    'upstream-memory',
    process.cwd(),
  );
  const running = await startMeshmux(config);
  while (!running.engine.current().ready) await new Promise((r) => setTimeout(r, 20));
  serveParent(
    running.xdsPort,
    (kind) => running.engine.current().kinds.get(kind)?.version ?? '',
    () => running.stop(),
  );
}

/**
 * The calibration: a bare grpc-js client with meshmux's receive limit and windows, subscribed to the same
 * type URLs, which keeps the last response of each type as it arrived (as meshmux keeps one) and
 * ACKs it. Its peak is what the transport alone costs to read a response, in a process like
 * meshmux's.
 */
async function transportChild(upstream: string): Promise<void> {
  const client = new grpc.Client(upstream, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': DEFAULT_MAX_RECEIVE_BYTES,
    'grpc-node.flow_control_window': 1024 * 1024,
  });
  const asIs = (b: Buffer): Buffer => b;
  const call = client.makeBidiStreamRequest(
    '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources',
    asIs,
    asIs,
  );
  const last = new Map<string, { version: string; bytes: Buffer }>();
  call.on('data', (bytes: Buffer) => {
    const r = scanResponse(bytes);
    last.set(r.typeUrl, { version: r.versionInfo, bytes });
    call.write(encodeRequest({ typeUrl: r.typeUrl, versionInfo: r.versionInfo, responseNonce: r.nonce }));
  });
  call.on('error', () => undefined);
  const typeUrls = [SE, VS].map((k) => typeUrlOf(k, k.currentVersion));
  typeUrls.forEach((typeUrl, i) =>
    call.write(
      encodeRequest({ typeUrl, ...(i === 0 ? { node: encodeNode('transport~0~calibration~x', {}) } : {}) }),
    ),
  );
  // Ready, as meshmux is, once every subscribed type has answered.
  while (typeUrls.some((t) => !last.has(t))) await new Promise((r) => setTimeout(r, 20));
  serveParent(
    0,
    (kind) => {
      const descriptor = KINDS.get(kind) as KindDescriptor;
      return last.get(typeUrlOf(descriptor, descriptor.currentVersion))?.version ?? '';
    },
    () => {
      call.cancel();
      client.close();
      return Promise.resolve();
    },
  );
}

/** Answers the parent's arm / settle / read / stop messages for a reader whose versions it can tell. */
function serveParent(xdsPort: number, versionOf: (kind: string) => string, stop: () => Promise<void>): void {
  const send = (m: ChildMessage): void => void process.send?.(m);
  process.on('message', (m: ParentMessage) => {
    if (m.type === 'arm') {
      void collect().then(() => {
        const before = reading();
        resetPeak();
        send({ type: 'armed', before, version: versionOf(m.kind) });
      });
    } else if (m.type === 'settle') {
      void (async () => {
        const deadline = Date.now() + 120_000;
        while (versionOf(m.kind) === m.version) {
          if (Date.now() > deadline) throw new Error(`meshmux did not apply the ${m.kind} response in 120 s`);
          await new Promise((r) => setTimeout(r, 5));
        }
        // Whatever the snapshot sets off (views, encodes ahead of istiods) runs in the turns that
        // follow: the step ends once the process is idle, so none of it lands in the next step.
        await quiet();
        const peak = peakRssBytes();
        await collect();
        // BENCH_HEAP_SNAPSHOT=<folder> writes a heap snapshot after each step there (development aid).
        const snapshots = process.env['BENCH_HEAP_SNAPSHOT'];
        if (snapshots !== undefined)
          writeHeapSnapshot(`${snapshots}/upstream-memory-${process.pid}-${++snapshotCount}.heapsnapshot`);
        send({ type: 'settled', peakRss: peak, after: reading() });
      })();
    } else if (m.type === 'read') {
      void collect().then(() => send({ type: 'read', now: reading() }));
    } else {
      void stop().then(() => process.exit(0));
    }
  });
  send({ type: 'ready', xdsPort });
}

// ---------------------------------------------------------------------------------------------
// The upstream and the istiod (this process).

/** One `resources` entry: an Any holding an `istio.mcp.v1alpha1.Resource`. */
function frame(kind: KindDescriptor, name: string, spec: Record<string, unknown>): Uint8Array {
  const body = messageType(kind.bodyType);
  const resource = MCP_RESOURCE.encode(
    MCP_RESOURCE.fromObject({
      metadata: {
        name,
        create_time: { seconds: 1_700_000_000 },
        labels: { app: name.slice(name.indexOf('/') + 1) },
      },
      body: { type_url: anyTypeUrl(kind.bodyType), value: body.encode(body.fromObject(spec)).finish() },
    }),
  ).finish();
  return lengthDelimited(2, Buffer.concat([stringField(1, MCP_RESOURCE_URL), lengthDelimited(2, resource)]));
}

function serviceEntry(i: number, generation: number): Uint8Array {
  return frame(SE, `ns-${i % 50}/svc-${i}`, {
    hosts: [`svc-${i}.ns-${i % 50}.example.internal`],
    ports: [{ number: 8080, name: 'http', protocol: 'HTTP' }],
    resolution: 'STATIC',
    location: 'MESH_INTERNAL',
    endpoints: [0, 1, 2].map((e) => ({
      address: `10.${(i >> 8) & 255}.${i & 255}.${e + 10 + generation}`,
      labels: { zone: `z${e}` },
    })),
  });
}

function largeVirtualService(i: number, generation: number): Uint8Array {
  const routes = Array.from({ length: 6000 }, (_, r) => ({
    name: `r-${r}`,
    match: [{ uri: { prefix: `/api/v${generation}/service-${i}/path-${r}` } }],
    route: [{ destination: { host: `svc-${r % 97}.ns-${i}.example.internal`, port: { number: 8080 } } }],
  }));
  return frame(VS, `big-${i}/routes`, { hosts: [`big-${i}.example.internal`], http: routes });
}

interface Case {
  readonly label: string;
  readonly kind: KindDescriptor;
  /** The state at `generation`; `share` of the objects (1: all), one of them changed per generation. */
  readonly objects: (generation: number, share: number) => Uint8Array[];
}

/** A state-of-the-world upstream whose state per type URL the bench sets and pushes. */
class Upstream {
  private readonly server = new grpc.Server({ 'grpc.max_send_message_length': -1 });
  private readonly calls = new Set<grpc.ServerDuplexStream<Buffer, Buffer>>();
  private readonly state = new Map<string, { version: string; frames: Uint8Array[] }>();
  private nonce = 0;

  constructor() {
    this.server.addService(RAW_SOTW_ADS, {
      StreamAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
        this.calls.add(call);
        const answered = new Set<string>();
        call.on('data', (bytes: Buffer) => {
          const { typeUrl } = scanResponse(bytes);
          if (answered.has(typeUrl)) return;
          answered.add(typeUrl);
          this.write(call, typeUrl);
        });
        const drop = (): void => void this.calls.delete(call);
        call.on('error', drop);
        call.on('end', () => {
          drop();
          call.end();
        });
      },
    });
  }

  async listen(): Promise<string> {
    const port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    return `127.0.0.1:${port}`;
  }

  /** Sets the state of `typeUrl` and pushes it to every stream; returns the response's size. */
  push(typeUrl: string, version: string, frames: Uint8Array[]): number {
    this.state.set(typeUrl, { version, frames });
    let size = 0;
    for (const call of this.calls) size = this.write(call, typeUrl);
    return size;
  }

  private write(call: grpc.ServerDuplexStream<Buffer, Buffer>, typeUrl: string): number {
    const s = this.state.get(typeUrl) ?? { version: 'empty', frames: [] };
    const response = assembleResponse(s.version, s.frames, typeUrl, `n${++this.nonce}`);
    call.write(response);
    return response.byteLength;
  }

  close(): void {
    this.server.forceShutdown();
  }
}

/** An istiod stand-in on raw bytes: subscribes one type URL and ACKs every response. */
class Istiod {
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<Buffer, Buffer>;
  private waiters: Array<{ until: (responses: number) => boolean; resolve: () => void }> = [];
  /** Responses received. */
  responses = 0;

  constructor(address: string, typeUrl: string) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': -1,
    });
    const asIs = (b: Buffer): Buffer => b;
    this.call = this.client.makeBidiStreamRequest(
      '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources',
      asIs,
      asIs,
    );
    this.call.on('data', (bytes: Buffer) => {
      const r = scanResponse(bytes);
      if (r.typeUrl !== typeUrl) return;
      if (r.resources === 0) return;
      this.responses++;
      this.call.write(encodeRequest({ typeUrl, versionInfo: r.versionInfo, responseNonce: r.nonce }));
      this.waiters = this.waiters.filter((w) => (w.until(this.responses) ? (w.resolve(), false) : true));
    });
    this.call.on('error', () => undefined);
    const node = encodeNode('sidecar~10.0.0.1~istiod-bench.istio-system~istio-system.svc.cluster.local', {
      ISTIO_VERSION: '1.24.0',
    });
    this.call.write(encodeRequest({ typeUrl, node }));
  }

  /** Resolves once a response satisfies `until` (checked on the last one too). */
  waitFor(until: (responses: number) => boolean, what: string): Promise<void> {
    if (until(this.responses)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the istiod did not receive ${what} in 120 s`)),
        120_000,
      );
      this.waiters.push({
        until,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

/** What reads the upstream in the child: meshmux, or grpc-js alone (the calibration). */
type Reader = 'meshmux' | 'grpc-js';

class MeshmuxChild {
  private readonly replies: Array<{ resolve: (m: ChildMessage) => void; reject: (e: Error) => void }> = [];
  constructor(private readonly process: ChildProcess) {
    process.on('message', (m: ChildMessage) => this.replies.shift()?.resolve(m));
    process.on('exit', (code) => {
      for (const r of this.replies.splice(0)) r.reject(new Error(`meshmux exited with ${String(code)}`));
    });
  }

  static async start(upstream: string, reader: Reader): Promise<{ child: MeshmuxChild; xdsPort: number }> {
    const script = fileURLToPath(import.meta.url);
    const proc = fork(script, [reader === 'meshmux' ? 'child' : 'transport', upstream], {
      execArgv: ['--expose-gc'],
      env: { ...process.env, MESHMUX_LOG_LEVEL: 'silent', MESHMUX_STATE_DIR: 'none' },
    });
    const child = new MeshmuxChild(proc);
    const ready = await child.next();
    if (ready.type !== 'ready') throw new Error('meshmux did not start');
    return { child, xdsPort: ready.xdsPort };
  }

  next(): Promise<ChildMessage> {
    return new Promise((resolve, reject) => this.replies.push({ resolve, reject }));
  }

  async ask<T extends ChildMessage['type']>(
    m: ParentMessage,
    type: T,
  ): Promise<Extract<ChildMessage, { type: T }>> {
    const reply = this.next();
    this.process.send(m);
    const r = await reply;
    if (r.type !== type) throw new Error(`expected ${type}, got ${r.type}`);
    return r as Extract<ChildMessage, { type: T }>;
  }

  async stop(): Promise<void> {
    const exited = new Promise((r) => this.process.once('exit', r));
    this.process.send({ type: 'stop' });
    await exited;
  }
}

interface Step {
  readonly case: string;
  readonly reader: Reader;
  readonly step: string;
  readonly bytes: number;
  readonly peakMb: number | undefined;
  readonly keptMb: number;
  readonly peakRatio: number | undefined;
  readonly keptRatio: number;
}

async function measure(c: Case, reader: Reader): Promise<Step[]> {
  const upstream = new Upstream();
  const address = await upstream.listen();
  const { child, xdsPort } = await MeshmuxChild.start(address, reader);
  const typeUrl = typeUrlOf(c.kind, c.kind.currentVersion);
  const steps: Step[] = [];
  const retained = (m: MemoryReading): number => m.heapUsed + m.external;
  const empty = retained((await child.ask({ type: 'read' }, 'read')).now);
  const step = async (name: string, generation: number, istiod?: Istiod, share = 1): Promise<void> => {
    const armed = await child.ask({ type: 'arm', kind: c.kind.key }, 'armed');
    const frames = c.objects(generation, share);
    const seen = istiod?.responses ?? 0;
    const bytes = upstream.push(typeUrl, `v${generation}`, frames);
    await istiod?.waitFor((n) => n > seen, `the state of v${generation}`);
    const settled = await child.ask({ type: 'settle', kind: c.kind.key, version: armed.version }, 'settled');
    const held = retained(settled.after) - empty;
    const peak = settled.peakRss === undefined ? undefined : settled.peakRss - armed.before.rss;
    steps.push({
      case: c.label,
      reader,
      step: name,
      bytes,
      peakMb: peak === undefined ? undefined : peak / MB,
      keptMb: held / MB,
      peakRatio: peak === undefined ? undefined : peak / bytes,
      keptRatio: held / bytes,
    });
  };
  try {
    await step('first', 1);
    await step('change', 2);
    await step('change', 3);
    if (reader === 'grpc-js') {
      await step('shrink', 5, undefined, 0.1);
      return steps;
    }
    // One istiod: what serving holds on top (encoded responses, the view) is measured apart.
    const before = retained((await child.ask({ type: 'read' }, 'read')).now);
    const istiod = new Istiod(`127.0.0.1:${xdsPort}`, typeUrl);
    await istiod.waitFor((n) => n > 0, 'the state held');
    const serving = retained((await child.ask({ type: 'read' }, 'read')).now) - before;
    await step('+istiod', 4, istiod);
    console.log(`  serving one istiod holds ${(serving / MB).toFixed(1)} MB more`);
    istiod.close();
    // A full state that removes most objects: what is held must shrink with it.
    await step('shrink', 5, undefined, 0.1);
  } finally {
    await child.stop();
    upstream.close();
  }
  return steps;
}

function parseList(flag: string, fallback: number[]): number[] {
  const i = process.argv.indexOf(flag);
  if (i < 0) return fallback;
  return (process.argv[i + 1] ?? '').split(',').map(Number);
}

async function main(): Promise<void> {
  if (process.argv[2] === 'child') {
    await child(process.argv[3] as string);
    return;
  }
  if (process.argv[2] === 'transport') {
    await transportChild(process.argv[3] as string);
    return;
  }
  const sizes = parseList('--sizes', [5000, 20000, 50000]);
  const [large = 8] = parseList('--large', [8]);
  const cases: Case[] = [
    ...sizes.map((n) => ({
      label: `${n} ServiceEntries`,
      kind: SE,
      objects: (g: number, share: number) =>
        Array.from({ length: Math.ceil(n * share) }, (_, i) => serviceEntry(i, i === 7 ? g : 1)),
    })),
    {
      label: `${large} large VirtualServices`,
      kind: VS,
      objects: (g: number, share: number) =>
        Array.from({ length: Math.ceil(large * share) }, (_, i) => largeVirtualService(i, i === 0 ? g : 1)),
    },
  ];
  const rows: Step[] = [];
  for (const c of cases) {
    console.log(`measuring ${c.label} ...`);
    rows.push(...(await measure(c, 'meshmux')), ...(await measure(c, 'grpc-js')));
  }
  const pad = (s: string, n: number): string => s.padStart(n);
  const fmt = (v: number | undefined, d = 1): string => (v === undefined ? 'n/a' : v.toFixed(d));
  console.log(
    `\n${'case'.padEnd(26)}${pad('reader', 9)}${pad('step', 9)}${pad('bytes MB', 10)}${pad('peak MB', 9)}${pad('peak ×', 8)}${pad('held MB', 9)}${pad('held ×', 8)}`,
  );
  for (const r of rows) {
    console.log(
      `${r.case.padEnd(26)}${pad(r.reader, 9)}${pad(r.step, 9)}${pad(fmt(r.bytes / MB), 10)}${pad(fmt(r.peakMb), 9)}${pad(fmt(r.peakRatio, 2), 8)}${pad(fmt(r.keptMb), 9)}${pad(fmt(r.keptRatio, 2), 8)}`,
    );
  }
  console.log(
    '\npeak: highest RSS while the response was read and applied, above RSS after a full GC before it;' +
      '\nheld: heap + external retained after a full GC, above the reader with no objects (the +istiod row adds what serving one istiod holds);' +
      '\ngrpc-js: a bare client reading the same responses, for the transport floor.',
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
