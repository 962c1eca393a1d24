/**
 * What receiving one message of a given size over HTTP/2 costs a bare Node.js process set up as
 * meshmux's server is (pinned to core 0, node's flags and malloc's tunables as `npm start` gives
 * them), with the windows meshmux's upstream client uses (1 MiB, as istiod's): the floor under a
 * change read from a state-of-the-world upstream, which sends a type's whole state for any change
 * of it. The receiver does nothing with the bytes; a sender pinned to core 1 writes them.
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
  readonly bytes: number;
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
 * Receives `bytes` on one stream `rounds` times (after one round not counted) in a receiver set up
 * as the server is, and resolves with each round's cost.
 */
export async function measureBareReceive(bytes: number, rounds: number): Promise<BareReceive> {
  const receiver = fork(SCRIPT, ['--receive', String(bytes), String(rounds)], {
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

async function serve(bytes: number): Promise<void> {
  // The receiver may be killed before it kills this process: its channel closing ends this one.
  process.once('disconnect', () => process.exit(0));
  pinSelf(1);
  const payload = Buffer.alloc(bytes, 7);
  const server = http2.createServer({ settings: { initialWindowSize: WINDOW } });
  server.on('stream', (stream) => {
    stream.respond({ ':status': 200 });
    stream.end(payload);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  process.send?.(typeof address === 'object' && address !== null ? address.port : 0);
}

async function receive(bytes: number, rounds: number): Promise<void> {
  process.once('disconnect', () => process.exit(0));
  pinSelf(0);
  const sender = fork(SCRIPT, ['--serve', String(bytes)], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  try {
    const port = await new Promise<number>((resolve) => sender.once('message', (m) => resolve(m as number)));
    const session = http2.connect(`http://127.0.0.1:${port}`, { settings: { initialWindowSize: WINDOW } });
    await new Promise((resolve) => session.once('connect', resolve));
    session.setLocalWindowSize(WINDOW);
    const once = async (): Promise<{ cpuMs: number; faults: number }> => {
      const cpu = process.cpuUsage();
      const faults = process.resourceUsage().minorPageFault;
      let received = 0;
      await new Promise<void>((resolve, reject) => {
        const request = session.request({ ':path': '/' });
        request.on('data', (chunk: Buffer) => {
          received += chunk.byteLength;
        });
        request.on('end', resolve);
        request.on('error', reject);
      });
      if (received !== bytes) throw new Error(`received ${received} bytes of ${bytes}`);
      const used = process.cpuUsage(cpu);
      return {
        cpuMs: (used.user + used.system) / 1000,
        faults: process.resourceUsage().minorPageFault - faults,
      };
    };
    await once();
    const result = {
      bytes,
      cpuMs: [] as number[],
      pageFaults: [] as number[],
      setup: { tunables: process.env['GLIBC_TUNABLES'] ?? '', execArgv: process.execArgv },
      pids: [process.pid, sender.pid ?? 0],
    };
    for (let i = 0; i < rounds; i++) {
      const r = await once();
      result.cpuMs.push(r.cpuMs);
      result.pageFaults.push(r.faults);
    }
    session.close();
    process.send?.(result);
  } finally {
    sender.kill();
  }
}

const [mode, bytesArg, roundsArg] = process.argv.slice(2);
if (mode === '--serve') await serve(Number(bytesArg));
else if (mode === '--receive') await receive(Number(bytesArg), Number(roundsArg));
