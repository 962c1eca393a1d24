import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { MeshModel, SE, SE_URL, SHAPES, type ChangeOp } from '../../bench/fixtures.js';
import { UpstreamProcess } from '../../bench/upstream-process.js';
import type { UpstreamFlush } from '../../bench/upstream-simulator.js';
import { assembleResponse, encodeRequest, scanResponse } from '../../bench/wire-scan.js';

const ADS_PATH = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';

/** One ADS stream to an upstream simulator, subscribed to ServiceEntries, its responses queued. */
class Subscription {
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<Buffer, Buffer>;
  private readonly queued: Buffer[] = [];
  private waiting: ((response: Buffer) => void) | undefined;
  ended = false;

  constructor(address: string) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure());
    this.call = this.client.makeBidiStreamRequest(
      ADS_PATH,
      (b: Buffer) => b,
      (b: Buffer) => b,
    );
    this.call.on('data', (response: Buffer) => {
      const waiting = this.waiting;
      this.waiting = undefined;
      if (waiting === undefined) this.queued.push(response);
      else waiting(response);
    });
    this.call.on('error', () => (this.ended = true));
    this.call.write(encodeRequest({ typeUrl: SE_URL }));
  }

  next(): Promise<Buffer> {
    const queued = this.queued.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve) => (this.waiting = resolve));
  }

  ack(response: Buffer): void {
    const scan = scanResponse(response);
    this.call.write(
      encodeRequest({ typeUrl: SE_URL, versionInfo: scan.versionInfo, responseNonce: scan.nonce }),
    );
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

/** The ServiceEntry state of `upstream` as the parent's model holds it, under sequence `seq`. */
function expected(model: MeshModel, upstream: number, seq: number): Buffer {
  const frames = [...model.objects(upstream, SE)].map((o) => model.encodings.upstreamFrame(o));
  const version = `u${upstream}-${seq}`;
  return assembleResponse(version, frames, SE_URL, `${version}-${SE.kind}`);
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

// Starts the benchmark's upstream simulators in a child process of their own (`upstream-main`),
// serving real gRPC on 127.0.0.1.
describe('the upstream simulators in a process of their own', () => {
  const model = new MeshModel(SHAPES.T);
  let upstreams: UpstreamProcess;
  let addresses: readonly string[];
  const flushes: UpstreamFlush[] = [];

  before(async () => {
    upstreams = new UpstreamProcess(model);
    addresses = await upstreams.addresses();
    for (const u of upstreams.upstreams) u.onFlush = (f) => flushes.push(f);
  });

  after(async () => {
    await upstreams.close();
  });

  it('serve the bytes the parent model makes, edits and all, under the sequence the parent chose', async () => {
    const stream = new Subscription(addresses[0] as string);
    const first = await stream.next();
    assert.ok(first.equals(expected(model, 0, 1)), 'the first state is the model as built');
    const remote = upstreams.upstreams[0];
    assert.ok(remote !== undefined);
    await until(() => remote.answeredTypes === 0 && remote.streams === 1, 'the stream to be reported open');

    // Every kind of edit, the blocks they fall in rebuilt and the others reused.
    const ops: ChangeOp[] = ['endpoints', 'add', 'delete', 'label', 'add', 'endpoints', 'delete'];
    let last = first;
    for (let round = 0; round < 3; round++) {
      for (const op of ops) model.change(op, 0);
      const seq = remote.nextSeq;
      const decidedAt = performance.now();
      remote.changed(SE);
      remote.flush();
      // The next state goes out once the last one is acknowledged.
      stream.ack(last);
      last = await stream.next();
      const receivedAt = performance.now();
      assert.ok(last.equals(expected(model, 0, seq)), `state ${seq} is the model after round ${round}`);
      await until(
        () => flushes.some((f) => f.upstream === 0 && f.seq === seq),
        `flush ${seq} to be reported`,
      );
      const flush = flushes.find((f) => f.upstream === 0 && f.seq === seq);
      // Written after the parent decided on it and before the client read it, on the parent's clock.
      assert.ok(
        flush !== undefined && flush.sentAt >= decidedAt && flush.sentAt <= receivedAt,
        `decided at ${decidedAt}, written at ${String(flush?.sentAt)}, received at ${receivedAt}`,
      );
    }
    stream.ack(last);
    await until(() => remote.answeredTypes === 1, 'the last state to be acknowledged');
    assert.ok(remote.bytesSent >= first.length * 3);
    // The process's own CPU, read from it: it built and wrote four states.
    assert.ok((await upstreams.cpuMs()) > 0);
    stream.close();
  });

  it('restart with the next sequence, and report nothing answered until the new streams are', async () => {
    const remote = upstreams.upstreams[1];
    assert.ok(remote !== undefined);
    const stream = new Subscription(addresses[1] as string);
    stream.ack(await stream.next());
    await until(() => remote.answeredTypes === 1, 'the first state to be acknowledged');
    model.change('endpoints', 1);
    const seq = remote.nextSeq;
    remote.dropStreams();
    assert.equal(remote.answeredTypes, 0, 'a restart answers nothing at once');
    await until(() => stream.ended, 'the stream to end');
    stream.close();
    const again = new Subscription(addresses[1] as string);
    const state = await again.next();
    assert.ok(
      state.equals(expected(model, 1, seq)),
      'the state fetched again carries the change and the next sequence',
    );
    again.ack(state);
    await until(() => remote.answeredTypes === 1, 'the new stream to be reported answered');
    await until(
      () => flushes.some((f) => f.upstream === 1 && f.seq === seq),
      'the restart state to be reported',
    );
    again.close();
  });
});
