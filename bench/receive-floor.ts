/**
 * What receiving an upstream's response costs a Node.js process before meshmux does anything with
 * it: the floor under the CPU a change or a resync costs when the upstream speaks state of the
 * world, and so sends a type's whole state again for any change of it.
 *
 *   npm run build && node dist/bench/receive-floor.js [--mb 17] [--rounds 12]
 *
 * A server in a child process pinned to the other core sends `--mb` MiB on one HTTP/2 stream; this
 * process, pinned to one core, receives it with the windows meshmux's upstream client uses (1 MiB,
 * as istiod's) and does nothing with the bytes, then copies each chunk into one buffer the size of
 * the message, kept from round to round (what the stream's reassembly does). Printed: CPU per round, p50 and lowest, and per
 * MiB. 17 MiB is the ServiceEntries upstream of the benchmark's shape L, 8 MiB all three upstreams of
 * shape S. Prints; asserts nothing.
 */
import { fork } from 'node:child_process';
import http2 from 'node:http2';
import { fileURLToPath } from 'node:url';
import { option } from './in-process.js';
import { pinSelf } from './server-process.js';

const MIB = 1024 * 1024;
const WINDOW = MIB;
const mb = Number(option('mb', '17'));
const rounds = Number(option('rounds', '12'));

if (process.argv.includes('--serve')) {
  pinSelf(1);
  const payload = Buffer.alloc(mb * MIB, 7);
  const server = http2.createServer({ settings: { initialWindowSize: WINDOW } });
  server.on('stream', (stream) => {
    stream.respond({ ':status': 200 });
    stream.end(payload);
  });
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    process.send?.(typeof address === 'object' && address !== null ? address.port : 0);
  });
} else {
  pinSelf(0);
  const child = fork(fileURLToPath(import.meta.url), ['--serve', '--mb', String(mb)]);
  try {
    const port = await new Promise<number>((resolve) => child.once('message', (m) => resolve(m as number)));
    const session = http2.connect(`http://127.0.0.1:${port}`, { settings: { initialWindowSize: WINDOW } });
    await new Promise((resolve) => session.once('connect', resolve));
    session.setLocalWindowSize(WINDOW);
    // One buffer for every round, as the stream's reassembly buffer is kept from message to message:
    // a fresh one would count the first touch of every page.
    const reassembly = Buffer.allocUnsafeSlow(mb * MIB);
    const receive = async (copy: boolean): Promise<number> => {
      const into = copy ? reassembly : undefined;
      const before = process.cpuUsage();
      await new Promise<void>((resolve, reject) => {
        const request = session.request({ ':path': '/' });
        let at = 0;
        request.on('data', (chunk: Buffer) => {
          if (into !== undefined) into.set(chunk, at);
          at += chunk.byteLength;
        });
        request.on('end', resolve);
        request.on('error', reject);
      });
      const used = process.cpuUsage(before);
      return (used.user + used.system) / 1000;
    };
    for (const copy of [false, true]) {
      await receive(copy);
      const cpu: number[] = [];
      for (let i = 0; i < rounds; i++) cpu.push(await receive(copy));
      cpu.sort((a, b) => a - b);
      const p50 = cpu[Math.floor(cpu.length / 2)] ?? Number.NaN;
      console.log(
        `${mb} MiB on one stream, ${copy ? 'copied into one buffer' : 'bytes left alone'}: CPU p50 ${p50.toFixed(1)} ms, lowest ${(cpu[0] ?? Number.NaN).toFixed(1)} ms (${(p50 / mb).toFixed(2)} ms per MiB)`,
      );
    }
    session.close();
  } finally {
    child.kill();
  }
}
