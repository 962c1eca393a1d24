import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { createServer as createHttp2Server, type Http2Server, type ServerHttp2Stream } from 'node:http2';
import { createServer as createTcpServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { getDefaultHighWaterMark } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import {
  GrpcHttp2Stream,
  type GrpcHttp2StreamOptions,
  type GrpcStatus,
} from '../../src/upstream/streaming/grpc-http2-stream.js';
import { YoungCollections } from '../../src/core/young-collections.js';
import { ReadPacer } from '../../src/upstream/streaming/read-pacer.js';
import { rawBidiMethod } from '../support/raw-grpc-method.js';
import { until, within } from '../support/deadline.js';

const METHOD = '/meshmux.test.Chat/Talk';
type Call = grpc.ServerDuplexStream<Buffer, Uint8Array>;

/** A grpc-js server whose one bidi method is handled by whatever the test sets. */
class ChatServer {
  handler: (call: Call) => void = () => undefined;
  private readonly server = new grpc.Server();
  address = '';

  async start(): Promise<void> {
    this.server.addService({ Talk: rawBidiMethod(METHOD) }, { Talk: (call: Call) => this.handler(call) });
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
}

interface Opened {
  readonly stream: GrpcHttp2Stream;
  readonly messages: Buffer[];
  readonly ended: Promise<GrpcStatus>;
}

function open(
  address: string,
  extra: Partial<GrpcHttp2StreamOptions> = {},
  onMessage: (message: Buffer) => void = () => undefined,
): Opened {
  const messages: Buffer[] = [];
  let resolve: (s: GrpcStatus) => void = () => undefined;
  const ended = new Promise<GrpcStatus>((r) => (resolve = r));
  const stream = new GrpcHttp2Stream(
    {
      address,
      method: METHOD,
      maxReceiveBytes: 64 * 1024 * 1024,
      windowBytes: 1024 * 1024,
      keepalive: { timeMs: 30_000, timeoutMs: 10_000 },
      lendMessages: true,
      ...extra,
    },
    {
      // A lent message lives for the call only: copied here.
      onMessage: (m) => {
        messages.push(Buffer.from(m));
        onMessage(Buffer.from(m));
      },
      onEnd: (s) => resolve(s),
    },
  );
  return { stream, messages, ended };
}

describe('GrpcHttp2Stream against a grpc-js server', { timeout: 30_000 }, () => {
  const server = new ChatServer();
  before(() => server.start());
  after(() => server.stop());

  it('carries messages both ways, a response of several megabytes whole across many DATA frames', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < big.byteLength; i++) big[i] = (i * 31) & 0xff;
    server.handler = (call) => {
      call.on('data', (m: Buffer) => {
        if (m.toString() === 'big') call.write(big);
        else call.write(Buffer.from(`echo ${m.toString()}`));
        if (m.toString() === 'done') call.end();
      });
    };
    const { stream, messages, ended } = open(server.address);
    for (const m of ['one', 'big', 'two', 'done']) stream.write(Buffer.from(m));
    const end = await ended;
    assert.deepEqual(end, { code: grpc.status.OK, details: 'OK' });
    assert.equal(messages.length, 4);
    assert.equal(messages[0]?.toString(), 'echo one');
    assert.ok(messages[1]?.equals(big), 'the large message arrived byte for byte');
    assert.equal(messages[2]?.toString(), 'echo two');
    assert.equal(messages[3]?.toString(), 'echo done');
  });

  it('runs a young collection after a message once 4 MiB were read, inside one once 8 MiB were', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024, 7);
    const huge = Buffer.alloc(40 * 1024 * 1024, 9);
    server.handler = (call) => {
      call.on('data', (m: Buffer) => {
        if (m.toString() === 'done') call.end();
        else call.write(m.toString() === 'huge' ? huge : big);
      });
    };
    let runs = 0;
    const opened = open(server.address, {
      youngCollections: new YoungCollections(() => runs++, 4 * 1024 * 1024),
    });
    for (const m of ['a', 'b', 'c', 'done']) opened.stream.write(Buffer.from(m));
    assert.deepEqual(await opened.ended, { code: grpc.status.OK, details: 'OK' });
    assert.equal(opened.messages.length, 3);
    assert.ok(opened.messages.every((m) => m.equals(big)));
    // 15 MiB in three messages: one collection after each, none per chunk.
    assert.equal(runs, 3);

    runs = 0;
    const second = open(server.address, {
      youngCollections: new YoungCollections(() => runs++, 4 * 1024 * 1024),
    });
    for (const m of ['huge', 'done']) second.stream.write(Buffer.from(m));
    assert.deepEqual(await second.ended, { code: grpc.status.OK, details: 'OK' });
    assert.ok(second.messages[0]?.equals(huge));
    // 40 MiB in one message: four collections inside it (every 8 MiB), one after it.
    assert.equal(runs, 5);
  });

  it('ends with the status and the percent-decoded message the server sent, after messages or alone', async () => {
    for (const first of [true, false]) {
      server.handler = (call) => {
        if (first) call.write(Buffer.from('hello'));
        call.emit('error', { code: grpc.status.NOT_FOUND, details: 'no such thing: 100% gone, ünïcode' });
      };
      const { messages, ended } = open(server.address);
      const end = await ended;
      assert.equal(end.code, grpc.status.NOT_FOUND);
      assert.equal(end.details, 'no such thing: 100% gone, ünïcode');
      assert.equal(messages.length, first ? 1 : 0);
    }
    // What the upstream says is cut before it reaches a log line.
    server.handler = (call) =>
      call.emit('error', { code: grpc.status.INTERNAL, details: 'y'.repeat(20_000) });
    const long = await open(server.address).ended;
    assert.equal(long.code, grpc.status.INTERNAL);
    assert.match(long.details, /^y{1024}… \(18976 more characters\)$/);
  });

  it('ends a message over maxReceiveBytes with RESOURCE_EXHAUSTED and cancels the call', async () => {
    let cancelled: () => void = () => undefined;
    const serverSawCancel = new Promise<void>((r) => (cancelled = r));
    server.handler = (call) => {
      call.on('cancelled', () => cancelled());
      call.on('error', () => undefined);
      call.write(Buffer.from('small'));
      call.write(Buffer.alloc(2048, 1));
    };
    const { messages, ended } = open(server.address, { maxReceiveBytes: 1024 });
    const end = await ended;
    assert.equal(end.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(end.details, /2048 bytes, over maxReceiveSize \(1024 bytes\)/);
    assert.deepEqual(
      messages.map((m) => m.toString()),
      ['small'],
    );
    await serverSawCancel;
  });

  it('reports an ended stream once, and nothing after cancel()', async () => {
    server.handler = (call) => call.on('data', () => call.end());
    let ends = 0;
    const stream = new GrpcHttp2Stream(
      {
        address: server.address,
        method: METHOD,
        maxReceiveBytes: 1024,
        windowBytes: 65_536,
        keepalive: { timeMs: 30_000, timeoutMs: 10_000 },
        lendMessages: false,
      },
      { onMessage: () => undefined, onEnd: () => ends++ },
    );
    stream.write(Buffer.from('x'));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(ends, 1);
    const quiet = open(server.address);
    quiet.stream.cancel();
    const race = await Promise.race([quiet.ended, new Promise((r) => setTimeout(() => r('none'), 200))]);
    assert.equal(race, 'none');
  });
});

describe('GrpcHttp2Stream read under a pacer', { timeout: 30_000 }, () => {
  const server = new ChatServer();
  before(() => server.start());
  after(() => server.stop());

  it('reads nothing more after a message that took more than its share, until the pacer lets it', async () => {
    // Time the test moves by hand: handling "first" takes a second of it.
    let now = 0;
    const resumes: Array<() => void> = [];
    const pacer = new ReadPacer(
      {
        now: () => now,
        after: (_ms, resume) => {
          resumes.push(resume);
          return () => undefined;
        },
      },
      { share: 0.5, burstMs: 0, maxWaitMs: 2_000 },
    );
    const calls = new Map<string, Call>();
    server.handler = (call) => call.once('data', (m: Buffer) => calls.set(m.toString(), call));
    const paced = open(server.address, { pacer }, (m) => {
      if (m.toString() === 'first') now += 1_000;
    });
    // The same messages to a stream read as they come: once it has one, so would the paced stream.
    const twin = open(server.address);
    paced.stream.write(Buffer.from('paced'));
    twin.stream.write(Buffer.from('twin'));
    await until(() => calls.size === 2, 5_000, 'both streams at the server');
    const both = (m: string): void => {
      for (const call of calls.values()) call.write(Buffer.from(m));
    };
    both('first');
    await until(() => paced.messages.length === 1 && twin.messages.length === 1, 5_000, 'the first message');
    assert.equal(resumes.length, 1, 'reading waits');
    both('second');
    both('third');
    await until(() => twin.messages.length === 3, 5_000, 'the later messages on the twin');
    assert.deepEqual(paced.messages.map(String), ['first'], 'the paced stream read nothing while it waited');
    now += 1_000;
    resumes[0]?.();
    await until(() => paced.messages.length === 3, 5_000, 'the later messages once the wait is over');
    assert.deepEqual(paced.messages.map(String), ['first', 'second', 'third']);
    assert.equal(resumes.length, 1, 'the later messages took no time: no other wait');
    paced.stream.cancel();
    twin.stream.cancel();
  });
});

describe('GrpcHttp2Stream against what is not a gRPC server', { timeout: 30_000 }, () => {
  let plain: Http2Server;
  let address = '';
  before(async () => {
    plain = createHttp2Server((req, res) => {
      if (req.url === '/html') {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<p>hello</p>');
        return;
      }
      res.writeHead(404);
      res.end();
    });
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
    const bound = plain.address();
    assert.ok(bound !== null && typeof bound === 'object');
    address = `127.0.0.1:${bound.port}`;
  });
  after(() => new Promise<void>((r) => plain.close(() => r())));

  it('maps an HTTP error to gRPC status as gRPC clients do, and a page that is not gRPC to UNKNOWN', async () => {
    const missing = await open(address).ended;
    assert.equal(missing.code, grpc.status.UNIMPLEMENTED);
    assert.match(missing.details, /HTTP status 404/);
    const page = await open(address, { method: '/html' }).ended;
    assert.equal(page.code, grpc.status.UNKNOWN);
    assert.match(page.details, /content-type "text\/html", not gRPC/);
  });

  it('ends with UNAVAILABLE naming the cause when nothing listens', async () => {
    const probe = createTcpServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const end = await open(`127.0.0.1:${port}`).ended;
    assert.equal(end.code, grpc.status.UNAVAILABLE);
    assert.match(end.details, /ECONNREFUSED/);
  });
});

describe('GrpcHttp2Stream keepalive', { timeout: 30_000 }, () => {
  const server = new ChatServer();
  let proxy: Server;
  let proxyAddress = '';
  const sockets: Socket[] = [];
  /** While frozen, the proxy passes nothing either way: a connection that died without a word. */
  let frozen = false;
  before(async () => {
    await server.start();
    const [host, port] = server.address.split(':') as [string, string];
    proxy = createTcpServer((client) => {
      const upstream = tcpConnect(Number(port), host);
      sockets.push(client, upstream);
      client.on('data', (d) => {
        if (!frozen) upstream.write(d);
      });
      upstream.on('data', (d) => {
        if (!frozen) client.write(d);
      });
      client.on('error', () => undefined);
      upstream.on('error', () => undefined);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    proxyAddress = `127.0.0.1:${(proxy.address() as { port: number }).port}`;
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => proxy.close(() => r()));
    server.stop();
  });

  it('ends a stream whose connection stops answering PINGs with UNAVAILABLE, and keeps a healthy one', async () => {
    server.handler = (call) => call.on('data', (m: Buffer) => call.write(m));
    const keepalive = { timeMs: 100, timeoutMs: 300 };
    const { stream, messages, ended } = open(proxyAddress, { keepalive });
    stream.write(Buffer.from('ping me'));
    // Several PING rounds on a healthy connection end nothing.
    const early = await Promise.race([ended, new Promise((r) => setTimeout(() => r('open'), 600))]);
    assert.equal(early, 'open');
    assert.deepEqual(
      messages.map((m) => m.toString()),
      ['ping me'],
    );
    frozen = true;
    const started = performance.now();
    const end = await ended;
    frozen = false;
    assert.equal(end.code, grpc.status.UNAVAILABLE);
    assert.match(end.details, /keepalive PING went unanswered for 300 ms/);
    assert.ok(performance.now() - started < 5_000, 'within a few PING rounds');
  });
});

describe('GrpcHttp2Stream toward an upstream that does not read what it is sent', { timeout: 60_000 }, () => {
  let server: Http2Server;
  let address = '';
  const opened: ServerHttp2Stream[] = [];
  const SIZE = 16 * 1024;
  /** A message of SIZE bytes that starts with `key:round:`. */
  const message = (key: string, round: number): Buffer => {
    const m = Buffer.alloc(SIZE, 0x2e);
    m.write(`${key}:${round}:`);
    return m;
  };

  before(async () => {
    server = createHttp2Server();
    server.on('stream', (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      // Reads nothing until the test says so: its window for the client's messages stays shut.
      stream.pause();
      opened.push(stream);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    address = `127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  after(() => {
    for (const stream of opened) stream.destroy();
    server.close();
  });

  it('keeps only the latest waiting message of each key, and sends it once the upstream reads', async () => {
    const { stream } = open(address);
    let most = 0;
    const ROUNDS = 200;
    for (let round = 0; round < ROUNDS; round++) {
      for (const key of ['a', 'b', 'c']) {
        stream.write(message(key, round), key);
        most = Math.max(most, stream.queuedBytes);
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
    // 9.6 MB written; at most what the HTTP/2 stream takes before it refuses more (its high-water
    // mark, 16 KiB on Node 20 and 64 KiB on Node 22 and later, and the write past it) and one
    // waiting per key.
    assert.ok(most <= getDefaultHighWaterMark(false) + 4 * (SIZE + 5), `${most} bytes queued`);
    const upstream = opened.at(-1) as ServerHttp2Stream;
    const received: string[] = [];
    let pending = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.byteLength >= 5 && pending.byteLength >= 5 + pending.readUInt32BE(1)) {
        const length = pending.readUInt32BE(1);
        received.push(
          pending
            .subarray(5, 5 + length)
            .toString('latin1')
            .split(':', 2)
            .join(':'),
        );
        pending = pending.subarray(5 + length);
      }
    });
    upstream.resume();
    const last = ['a', 'b', 'c'].map((key) => `${key}:${ROUNDS - 1}`);
    await until(() => last.every((m) => received.includes(m)), 10_000, 'the latest message of each key');
    assert.ok(received.length < ROUNDS, `${received.length} messages of ${3 * ROUNDS} sent`);
    stream.cancel();
  });

  it('ends the stream with RESOURCE_EXHAUSTED once more than maxQueuedBytes wait unkeyed', async () => {
    const { stream, ended } = open(address, { maxQueuedBytes: 256 * 1024 });
    for (let round = 0; round < 100 && stream.queuedBytes <= 256 * 1024; round++) {
      stream.write(message('unkeyed', round));
      await new Promise((resolve) => setImmediate(resolve));
    }
    const end = await within(ended, 10_000, 'the end of the stream');
    assert.equal(end.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(end.details, /the upstream left \d+ bytes of requests unread, more than 262144/);
  });
});
