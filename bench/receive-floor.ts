/**
 * What receiving an upstream's response costs a Node.js process before meshmux does anything with
 * it: the floor under the CPU a change or a resync costs when the upstream speaks state of the
 * world, and so sends a type's whole state again for any change of it.
 *
 *   npm run build && node dist/bench/receive-floor.js [--mb 17] [--rounds 12]
 *
 * A bare receiver set up as meshmux's server is (see `bare-receive.ts`) takes `--mb` MiB on one
 * HTTP/2 stream, `--rounds` times. Printed: its CPU per round, p50 and lowest, per MiB, and the
 * page faults a round took. About 10 MiB is the ServiceEntries upstream of the benchmark's shape
 * L, 8 MiB all three upstreams of shape S. `npm run bench` measures the same for the upstream
 * state its changes bring. Prints; asserts nothing.
 */
import { measureBareReceive, receiveFigures } from './bare-receive.js';
import { percentile } from './fleet.js';
import { option } from './in-process.js';

const mb = Number(option('mb', '17'));
const rounds = Number(option('rounds', '12'));
const measured = await measureBareReceive(Math.round(mb * 1024 * 1024), rounds);
const { p50Ms, lowestMs } = receiveFigures(measured);
console.log(
  `${mb} MiB on one stream: CPU p50 ${p50Ms.toFixed(1)} ms, lowest ${lowestMs.toFixed(1)} ms (${(p50Ms / mb).toFixed(2)} ms per MiB); page faults per round p50 ${percentile(measured.pageFaults, 50)}`,
);
