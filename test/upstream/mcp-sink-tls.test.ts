/**
 * The TLS files of an `mcp-sink` source: with `ca`, a pusher must present a certificate of it
 * (as when the files were read once); and they are read while the source is subscribed, and only
 * then: a source a reload replaces or removes must not go on reading them (and saying what it
 * finds) for good.
 */
import assert from 'node:assert/strict';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ServerTlsReads } from '../../src/tls/server-tls.js';
import { McpSinkSource } from '../../src/upstream/mcp/mcp-sink-source.js';
import { within } from '../support/deadline.js';
import { tempDir } from '../support/meshmux-harness.js';
import { SourceEventRecorder } from '../support/source-event-recorder.js';
import * as grpc from '@grpc/grpc-js';
import { GalleySinkPusher } from '../support/galley-sink-pusher.js';
import { createTestCa, type TestCa } from '../support/test-pki.js';

const WAIT_MS = 10_000;
const VS_COLLECTION = 'istio/networking/v1alpha3/virtualservices';

/** What a source said of its files, in order. */
function spy(): { said: string[]; reads: ServerTlsReads; next: (word: string) => Promise<void> } {
  const said: string[] = [];
  const waiters: Array<{ word: string; resolve: () => void }> = [];
  const say = (word: string): void => {
    said.push(word);
    for (const w of waiters.filter((x) => x.word === word)) w.resolve();
  };
  return {
    said,
    reads: {
      listening: () => say('listening'),
      closed: () => say('closed'),
      failed: () => say('failed'),
      recovered: () => say('recovered'),
    },
    next: (word) => new Promise((resolve) => waiters.push({ word, resolve })),
  };
}

describe('mcp-sink source TLS files', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let ca: TestCa;

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-sink-tls-'));
    ca = await createTestCa(dir);
    const server = await ca.issue('server', 'DNS:localhost,IP:127.0.0.1');
    await copyFile(server.cert, path.join(dir, 'live.pem'));
    await copyFile(server.key, path.join(dir, 'live.key'));
  });
  after(() => dispose());

  function sink(
    name: string,
    reads: ServerTlsReads,
    clientCa?: string,
  ): { source: McpSinkSource; listening: Promise<number> } {
    let onPort: (port: number) => void = () => undefined;
    const listening = new Promise<number>((resolve) => (onPort = resolve));
    const source = new McpSinkSource({
      name,
      namespace: 'default',
      listen: '127.0.0.1:0',
      kinds: ['VirtualService'],
      tls: {
        cert: path.join(dir, 'live.pem'),
        key: path.join(dir, 'live.key'),
        ca: clientCa,
        refreshInterval: 20,
      },
      tlsReads: reads,
      onListening: (p) => onPort(p),
    });
    return { source, listening };
  }

  it('with tls.ca, refuses a pusher without a client certificate and takes one with a certificate of that CA', async () => {
    const { source, listening } = sink('mutual', {}, ca.caCert);
    const events = new SourceEventRecorder(source.events$);
    const pushers: GalleySinkPusher[] = [];
    /** Whether the sink takes a stream of a pusher dialling with `credentials`. */
    const taken = async (credentials: grpc.ChannelCredentials): Promise<boolean> => {
      const pusher = new GalleySinkPusher(`localhost:${port}`, { collections: [VS_COLLECTION], credentials });
      pushers.push(pusher);
      pusher.connect();
      await pusher.waitFor(
        () => pusher.answeredStream === 1 || pusher.failures.length > 0,
        WAIT_MS,
        'the sink to take or refuse a pusher',
      );
      return pusher.answeredStream === 1;
    };
    const port = await within(listening, WAIT_MS, 'the sink to listen');
    try {
      const trust = await ca.read(ca.caCert);
      assert.equal(await taken(grpc.credentials.createSsl(trust)), false, 'a pusher without a certificate');
      const client = await ca.issue('galley', 'DNS:galley');
      const withCert = grpc.credentials.createSsl(
        trust,
        await ca.read(client.key),
        await ca.read(client.cert),
      );
      assert.equal(await taken(withCert), true, 'a pusher with a certificate of tls.ca');
    } finally {
      for (const p of pushers) p.close();
      events.close();
    }
  });

  it('stops reading its files, and says so once, when its subscription ends', async () => {
    const stopped = spy();
    const first = sink('stopped', stopped.reads);
    const firstEvents = new SourceEventRecorder(first.source.events$);
    await within(first.listening, WAIT_MS, 'the first sink to listen');
    firstEvents.close();
    assert.deepEqual(stopped.said, ['listening', 'closed']);
    // A second sink reads the same files as often: once it has seen them broken and then whole
    // again, the first would have seen them broken too, were it still reading them.
    const running = spy();
    const second = sink('running', running.reads);
    const secondEvents = new SourceEventRecorder(second.source.events$);
    try {
      await within(second.listening, WAIT_MS, 'the second sink to listen');
      const whole = await readFile(path.join(dir, 'live.pem'));
      const failed = running.next('failed');
      await writeFile(path.join(dir, 'live.pem'), 'not a certificate');
      await within(failed, WAIT_MS, 'the second sink to find the files broken');
      const recovered = running.next('recovered');
      await writeFile(path.join(dir, 'live.pem'), whole);
      await within(recovered, WAIT_MS, 'the second sink to find the files whole again');
      assert.deepEqual(stopped.said, ['listening', 'closed'], 'the stopped sink read nothing more');
    } finally {
      secondEvents.close();
    }
    assert.deepEqual(running.said, ['listening', 'failed', 'recovered', 'closed']);
  });
});
