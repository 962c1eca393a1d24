import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { after, before, describe, it } from 'node:test';
import { pacedServerReads } from '../../src/upstream/streaming/paced-server-reads.js';
import { ReadPacer } from '../../src/upstream/streaming/read-pacer.js';
import { until } from '../support/deadline.js';
import { rawBidiMethod, rawBytes, toBuffer } from '../support/raw-grpc-method.js';

const METHOD = '/meshmux.test.Push/Push';
/** Larger than any flow-control window on the way: it cannot all be sent before it is read. */
const LARGE = 4 * 1024 * 1024;

type Call = grpc.ServerDuplexStream<Buffer, Uint8Array>;

/** A grpc-js server whose one bidi method records every message of every call, in order. */
class PushServer {
  readonly received: string[] = [];
  readonly calls: Call[] = [];
  private readonly server: grpc.Server;
  address = '';

  /** `paced`: the server reads under `pacer`, and handling "first" costs it a second (`charge`). */
  constructor(private readonly paced?: { pacer: ReadPacer; charge: (ms: number) => void }) {
    this.server = new grpc.Server(
      paced === undefined ? {} : { interceptors: [pacedServerReads(paced.pacer)] },
    );
  }

  async start(): Promise<void> {
    this.server.addService({ Push: rawBidiMethod(METHOD) }, { Push: (call: Call) => this.onCall(call) });
    const port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    this.address = `127.0.0.1:${port}`;
  }

  stop(): void {
    this.server.forceShutdown();
  }

  private onCall(call: Call): void {
    this.calls.push(call);
    call.on('error', () => undefined);
    call.on('data', (message: Buffer) => {
      const handle = (): void => {
        const text = message.byteLength > 100 ? `${message.byteLength} bytes` : message.toString();
        this.received.push(text);
        if (text === 'first') this.paced?.charge(1_000);
        // Answered at once, however long reading waits after.
        call.write(Buffer.from(`ack ${text}`));
      };
      if (this.paced === undefined) handle();
      else this.paced.pacer.run(handle);
    });
  }
}

/** A client's stream to `address`: what it was answered, and which of its writes were taken. */
function pusher(address: string): {
  client: grpc.Client;
  call: grpc.ClientDuplexStream<Uint8Array, Buffer>;
  answers: string[];
  taken: string[];
  send: (name: string, message?: Uint8Array) => void;
} {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const call = client.makeBidiStreamRequest<Uint8Array, Buffer>(METHOD, toBuffer, rawBytes);
  const answers: string[] = [];
  const taken: string[] = [];
  call.on('data', (m: Buffer) => answers.push(m.toString()));
  call.on('error', () => undefined);
  const send = (name: string, message: Uint8Array = Buffer.from(name)): void => {
    call.write(message, () => taken.push(name));
  };
  return { client, call, answers, taken, send };
}

describe(
  'pacedServerReads: a server reads a call no faster than its pacer allows',
  { timeout: 30_000 },
  () => {
    // Time the test moves by hand; the waits the pacer asks for are recorded, not timed.
    let now = 0;
    const waits: Array<{ resume: () => void; cancelled: boolean }> = [];
    const pacer = new ReadPacer(
      {
        now: () => now,
        after: (_ms, resume) => {
          const wait = { resume, cancelled: false };
          waits.push(wait);
          return () => (wait.cancelled = true);
        },
      },
      { share: 0.5, burstMs: 0, maxWaitMs: 2_000 },
    );
    const paced = new PushServer({ pacer, charge: (ms) => (now += ms) });
    // The same messages to a server that reads as they come: once it has one, so could the other.
    const twin = new PushServer();
    before(async () => {
      await paced.start();
      await twin.start();
    });
    after(() => {
      paced.stop();
      twin.stop();
    });

    it('reads nothing more of a call after a message that took more than its share, until the pacer lets it, and still answers it', async () => {
      const a = pusher(paced.address);
      const b = pusher(twin.address);
      for (const p of [a, b]) p.send('first');
      await until(
        () => paced.received.length === 1 && twin.received.length === 1,
        5_000,
        'the first message at both servers',
      );
      assert.equal(waits.length, 1, 'reading waits');
      await until(() => a.answers.length === 1, 5_000, 'the answer to the first message');
      assert.deepEqual(a.answers, ['ack first'], 'the answer is not held by the wait');
      const large = Buffer.alloc(LARGE, 1);
      for (const p of [a, b]) {
        p.send('second');
        p.send('large', large);
        p.send('third');
      }
      await until(
        () => twin.received.length === 4 && b.taken.length === 4,
        5_000,
        'the later messages at the twin',
      );
      assert.deepEqual(paced.received, ['first'], 'the paced server read nothing while it waited');
      assert.ok(!a.taken.includes('large'), 'the large message waits in the flow-control window');
      now += 1_000;
      waits[0]?.resume();
      await until(() => paced.received.length === 4, 5_000, 'the later messages once the wait is over');
      assert.deepEqual(paced.received, ['first', 'second', `${LARGE} bytes`, 'third']);
      await until(() => a.answers.length === 4, 5_000, 'the answers to the later messages');
      assert.equal(waits.length, 1, 'the later messages took no time: no other wait');
      for (const p of [a, b]) p.client.close();
    });

    it('ends the wait of a call that ends while it waits, and reads a new call under the same account', async () => {
      paced.received.length = 0;
      const from = waits.length;
      const a = pusher(paced.address);
      a.send('first');
      await until(() => waits.length === from + 1, 5_000, 'reading waiting after the first message');
      a.call.cancel();
      await until(() => waits[from]?.cancelled === true, 5_000, 'the wait cancelled with the call');
      // A new call reads its first message only once the account is paid back.
      const b = pusher(paced.address);
      b.send('again');
      await until(() => waits.length === from + 2, 5_000, 'the new call waiting for its first read');
      assert.deepEqual(paced.received, ['first'], 'the new call is not read while the account is in debt');
      now += 1_000;
      waits[from + 1]?.resume();
      await until(() => paced.received.length === 2, 5_000, 'the new call read once paid back');
      assert.deepEqual(paced.received, ['first', 'again']);
      a.client.close();
      b.client.close();
    });
  },
);
