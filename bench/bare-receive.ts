/**
 * What receiving messages of given sizes over HTTP/2 costs a bare Node.js process set up as
 * meshmux's server is (pinned to core 0, node's flags and malloc's tunables as `npm start` gives
 * them), with the windows meshmux's upstream client uses (1 MiB, as istiod's): the floor under a
 * change read from a state-of-the-world upstream, which sends a type's whole state for any change
 * of it, and, one message per upstream at once, under an identical resync, where every upstream
 * sends its whole state again on a new stream. Each message comes on a connection of its own (one
 * per upstream), opened once, and on a new stream each round. The receiver does nothing with the
 * bytes; a sender pinned to core 1 writes them.
 *
 * The receiver is a process of its own because the process that measures it runs elsewhere (the
 * benchmark's fleet is pinned to core 1), and because malloc's tunables are read only at a
 * process's start: without meshmux's (transparent huge pages on request), each round's fresh
 * chunks cost a page fault per 4 KiB, some 40 ms for 10 MiB on a machine where the process set
 * up as shipped receives them in about 5.
 */
import { fork } from 'node:child_process';
import http2 from 'node:http2';
import { fileURLToPath } from 'node:url';
import { percentile } from './fleet.js';
import { pinSelf, SHIPPED } from './server-process.js';

const WINDOW = 1024 * 1024;
const SCRIPT = fileURLToPath(import.meta.url);

/** Per round: the receiver's CPU (user and system) and the minor page faults it took. */
export interface BareReceive {
  /** Bytes of a round, every stream's. */
  readonly bytes: number;
  /** Bytes of each stream of a round. */
  readonly streams: readonly number[];
  /** Per round, the bytes the receiver read, every stream's. */
  readonly receivedBytes: readonly number[];
  readonly cpuMs: readonly number[];
  readonly pageFaults: readonly number[];
  /** How the receiver ran: malloc's tunables and node's flags, as the server's. */
  readonly setup: { readonly tunables: string; readonly execArgv: readonly string[] };
  /** The receiver's and the sender's process ids, gone once the measurement resolves. */
  readonly pids: readonly number[];
}

/** The median of a measurement's CPU and the lowest, milliseconds. */
export function receiveFigures(r: BareReceive): { readonly p50Ms: number; readonly lowestMs: number } {
  return { p50Ms: percentile(r.cpuMs, 50), lowestMs: Math.min(...r.cpuMs) };
}

/**
 * Receives `bytes` `rounds` times (after one round not counted) in a receiver set up as the server
 * is, and resolves with each round's cost: one message of that size, or with several sizes one
 * message of each at once, each on a connection of its own.
 */
export async function measureBareReceive(
  bytes: number | readonly number[],
  rounds: number,
): Promise<BareReceive> {
  const sizes = typeof bytes === 'number' ? [bytes] : bytes;
  if (sizes.length === 0) throw new Error('nothing to receive');
  const receiver = fork(SCRIPT, ['--receive', sizes.join(','), String(rounds)], {
    execArgv: [SHIPPED.semiSpaceFlag],
    env: { ...process.env, GLIBC_TUNABLES: SHIPPED.tunables },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<number | null>((resolve) => receiver.once('exit', resolve));
  try {
    return await new Promise<BareReceive>((resolve, reject) => {
      receiver.once('message', (m) => resolve(m as BareReceive));
      receiver.once('error', reject);
      void exited.then((code) => reject(new Error(`the receiver exited (${code}) before it measured`)));
    });
  } finally {
    // Let go, it ends itself and its sender; killed only if it has not within 5 s.
    if (receiver.connected) receiver.disconnect();
    const timer = setTimeout(() => receiver.kill(), 5000);
    await exited;
    clearTimeout(timer);
  }
}

async function serve(sizes: readonly number[]): Promise<void> {
  // The receiver may be killed before it kills this process: its channel closing ends this one.
  process.once('disconnect', () => process.exit(0));
  pinSelf(1);
  // Stream i of a round asks for `/i`.
  const payloads = sizes.map((size) => Buffer.alloc(size, 7));
  const server = http2.createServer({ settings: { initialWindowSize: WINDOW } });
  server.on('stream', (stream, headers) => {
    const payload = payloads[Number(String(headers[':path']).slice(1))];
    if (payload === undefined) {
      stream.respond({ ':status': 404 });
      stream.end();
      return;
    }
    stream.respond({ ':status': 200 });
    stream.end(payload);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  process.send?.(typeof address === 'object' && address !== null ? address.port : 0);
}

async function receive(sizes: readonly number[], rounds: number): Promise<void> {
  process.once('disconnect', () => process.exit(0));
  pinSelf(0);
  const sender = fork(SCRIPT, ['--serve', sizes.join(',')], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  try {
    const port = await new Promise<number>((resolve) => sender.once('message', (m) => resolve(m as number)));
    const sessions = await Promise.all(
      sizes.map(async () => {
        const session = http2.connect(`http://127.0.0.1:${port}`, {
          settings: { initialWindowSize: WINDOW },
        });
        await new Promise((resolve) => session.once('connect', resolve));
        session.setLocalWindowSize(WINDOW);
        return session;
      }),
    );
    // Bytes read in the round under way, every stream's.
    let received = 0;
    const stream = (i: number): Promise<void> => {
      let got = 0;
      return new Promise<void>((resolve, reject) => {
        const request = (sessions[i] as http2.ClientHttp2Session).request({ ':path': `/${i}` });
        request.on('data', (chunk: Buffer) => {
          got += chunk.byteLength;
        });
        request.on('end', () => {
          received += got;
          if (got === sizes[i]) resolve();
          else reject(new Error(`stream ${i} received ${got} bytes of ${sizes[i]}`));
        });
        request.on('error', reject);
      });
    };
    const once = async (): Promise<{ cpuMs: number; faults: number; bytes: number }> => {
      received = 0;
      const cpu = process.cpuUsage();
      const faults = process.resourceUsage().minorPageFault;
      await Promise.all(sizes.map((_, i) => stream(i)));
      const used = process.cpuUsage(cpu);
      return {
        cpuMs: (used.user + used.system) / 1000,
        faults: process.resourceUsage().minorPageFault - faults,
        bytes: received,
      };
    };
    await once();
    const result = {
      bytes: sizes.reduce((sum, size) => sum + size, 0),
      streams: sizes,
      cpuMs: [] as number[],
      pageFaults: [] as number[],
      receivedBytes: [] as number[],
      setup: { tunables: process.env['GLIBC_TUNABLES'] ?? '', execArgv: process.execArgv },
      pids: [process.pid, sender.pid ?? 0],
    };
    for (let i = 0; i < rounds; i++) {
      const r = await once();
      result.cpuMs.push(r.cpuMs);
      result.pageFaults.push(r.faults);
      result.receivedBytes.push(r.bytes);
    }
    for (const session of sessions) session.close();
    process.send?.(result);
  } finally {
    sender.kill();
  }
}

const [mode, sizesArg, roundsArg] = process.argv.slice(2);
const sizes = (sizesArg ?? '').split(',').map(Number);
if (mode === '--serve') await serve(sizes);
else if (mode === '--receive') await receive(sizes, Number(roundsArg));
