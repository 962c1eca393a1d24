import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { frameWriterFor, sharesBuffers } from '../../src/downstream/frame-writer.js';
import { rawBidiMethod } from '../support/raw-grpc-method.js';

const METHOD = '/meshmux.test.Frames/Stream';
const GRPC_JS_VERSION = (
  JSON.parse(readFileSync(createRequire(import.meta.url).resolve('@grpc/grpc-js/package.json'), 'utf8')) as {
    version: string;
  }
).version;

/** A call whose grpc-js internals are hidden, as they would be in a grpc-js that moved them. */
function withoutInternals(
  call: grpc.ServerDuplexStream<Uint8Array, Buffer>,
): grpc.ServerDuplexStream<Uint8Array, Buffer> {
  return new Proxy(call, {
    get: (target, key) => {
      if (key === 'call') return undefined;
      const value = Reflect.get(target, key, target) as unknown;
      // Methods run on the real call: only the writer's view of it lacks the internals.
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('the frame writer over a real grpc-js server', () => {
  let server: grpc.Server;
  let address: string;
  const seen: boolean[] = [];
  let hideInternals = false;
  const parts = [Buffer.from('istio.mcp'), Buffer.alloc(70_000, 7), Buffer.from('.end')];

  before(async () => {
    server = new grpc.Server();
    server.addService(
      { Stream: rawBidiMethod(METHOD) },
      {
        Stream: (call: grpc.ServerDuplexStream<Uint8Array, Buffer>) => {
          const target = hideInternals ? withoutInternals(call) : call;
          seen.push(sharesBuffers(target));
          const write = frameWriterFor(target);
          const length = parts.reduce((n, p) => n + p.length, 0);
          write(parts, length, () => call.end());
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err === null ? resolve(p) : reject(err),
      ),
    );
    address = `127.0.0.1:${port}`;
  });
  after(() => server.forceShutdown());

  /** Opens the stream and resolves to the one message the server sends. */
  function receive(): Promise<Buffer> {
    const client = new grpc.Client(address, grpc.credentials.createInsecure());
    const method = rawBidiMethod(METHOD);
    const call = client.makeBidiStreamRequest(METHOD, method.requestSerialize, method.responseDeserialize);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no message within 10 s')), 10_000);
      call.on('data', (b: Buffer) => {
        clearTimeout(timer);
        resolve(b);
        call.cancel();
        client.close();
      });
      call.on('error', () => undefined);
    });
  }

  it(`finds the HTTP/2 stream under a server call of the pinned grpc-js (${GRPC_JS_VERSION}) and sends the shared buffers as one message`, async () => {
    hideInternals = false;
    const message = await receive();
    assert.equal(
      seen.at(-1),
      true,
      `@grpc/grpc-js ${GRPC_JS_VERSION} no longer exposes a server call's HTTP/2 stream where frame-writer.ts reads it: every push is copied again (about 2× server CPU); update http2StreamOf for this version`,
    );
    assert.deepEqual(message, Buffer.concat(parts));
  });

  it('falls back to grpc-js writing the same bytes when the internals are not there', async () => {
    hideInternals = true;
    const message = await receive();
    assert.equal(seen.at(-1), false, 'the fallback was taken');
    assert.deepEqual(message, Buffer.concat(parts));
  });
});
