/**
 * The benchmark's three upstream simulators, in a process of their own: started by
 * {@link UpstreamProcess}, it builds the same model from the same seed, keeps it in step with the
 * parent's by the edits the parent sends, and writes a state when the parent says which kinds and
 * under which sequence. Its own event loop, so that writing a state of megabytes never holds up
 * the fleet's reads, as a real upstream on a machine of its own would not. It runs where the
 * parent runs: a pinned parent's child inherits its core.
 */
import { MeshModel } from './fixtures.js';
import {
  fromWire,
  kindOf,
  toMonotonic,
  type FromUpstreams,
  type ToUpstreams,
  type UpstreamArgs,
} from './upstream-process.js';
import { UpstreamSimulator } from './upstream-simulator.js';

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2] ?? '{}') as UpstreamArgs;
  const model = new MeshModel(args.shape, args.seed);
  const simulators = model.upstreams.map((u) => new UpstreamSimulator(u.index, model));
  const send = (message: FromUpstreams): void => void process.send?.(message);
  for (const sim of simulators) {
    sim.onFlush = (f) =>
      send({ type: 'flushed', upstream: f.upstream, seq: f.seq, sentAt: toMonotonic(f.sentAt) });
    sim.onStatus = () =>
      send({
        type: 'status',
        upstream: sim.index,
        seq: sim.nextSeq - 1,
        streams: sim.streams,
        answeredTypes: sim.answeredTypes,
        bytesSent: sim.bytesSent,
      });
  }
  const addresses = await Promise.all(simulators.map((s) => s.listen()));
  process.on('message', (message: ToUpstreams) => {
    switch (message.type) {
      case 'edit':
        model.applyEdit(fromWire(message.edit));
        return;
      case 'flush':
        simulators[message.upstream]?.sendState(message.kinds.map(kindOf), message.seq);
        return;
      case 'drop':
        simulators[message.upstream]?.dropStreams(message.seq);
        return;
      case 'usage': {
        const { user, system } = process.cpuUsage();
        send({ type: 'usage', cpuMs: (user + system) / 1000 });
        return;
      }
      case 'close':
        void Promise.all(simulators.map((s) => s.close())).then(() => process.exit(0));
        return;
    }
  });
  // A parent gone (killed, or crashed) leaves no one to serve.
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', addresses });
}

await main();
