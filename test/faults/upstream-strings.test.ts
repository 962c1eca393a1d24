import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { FakeGalley } from '../support/fake-galley.js';
import { connectIstiod } from '../support/fault-kit.js';
import { fakeServiceEntry, kindNamed } from '../support/fake-objects.js';
import { discoveryResponse, mcpAny, type RawAny } from '../support/faulty-responses.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess, type LogLine } from '../support/meshmux-process.js';
import { deltaResponse, ScriptedDeltaUpstream } from '../support/scripted-delta-upstream.js';
import { SE } from '../support/type-urls.js';

const VS_COLLECTION = 'istio/networking/v1alpha3/virtualservices';
const MIB = 1024 * 1024;

/** `istio.mcp.v1alpha1.Resources` with no objects. */
function resources(collection: string, nonce: string, version = ''): Uint8Array {
  const w = protobuf.Writer.create();
  if (version !== '') w.uint32((1 << 3) | 2).string(version);
  w.uint32((2 << 3) | 2).string(collection);
  w.uint32((5 << 3) | 2).string(nonce);
  return w.finish();
}

describe('what a legacy MCP upstream sends is bounded in the log (meshmux in a child process)', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let galley: FakeGalley;
  let meshmux: MeshmuxProcess;

  /** The answer to the message of `nonce`, once the scripted Galley has it. */
  const answerTo = async (nonce: string): Promise<{ code?: number; message?: string } | null> => {
    await galley.waitFor(
      () => galley.requests.some((r) => r.nonce === nonce),
      20_000,
      `the answer to ${nonce}`,
    );
    return galley.requests.find((r) => r.nonce === nonce)?.errorDetail ?? null;
  };
  const logged = (msg: string): { lines: number; longest: number } => {
    const lines = meshmux.lines(msg);
    return { lines: lines.length, longest: Math.max(0, ...lines.map((l) => JSON.stringify(l).length)) };
  };

  before(async () => {
    ({ dir, dispose } = await tempDir());
    galley = await FakeGalley.start({ scripted: true });
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      `sources: [{name: galley, type: mcp, address: ${galley.address}, kinds: [VirtualService]}]\n`,
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    await galley.waitFor(() => galley.requests.length >= 1, 20_000, 'the first request');
  });
  after(async () => {
    await meshmux.kill();
    await galley.stop();
    await dispose();
  });

  it('logs a 1 MiB version truncated when it syncs', async () => {
    galley.sendRaw(resources(VS_COLLECTION, 'first', 'v'.repeat(MIB)));
    assert.equal(await answerTo('first'), null, 'an ACK');
    await meshmux.waitForLog((l) => l.msg === 'synced with upstream', 0, 20_000, 'the sync');
    const synced = logged('synced with upstream');
    assert.ok(synced.longest < 2_000, `a synced line of ${synced.longest} bytes`);
  });

  it('NACKs a 2 MiB collection it did not ask for with the name cut in the message, within 4 MiB', async () => {
    galley.sendRaw(resources(`big${'x'.repeat(2 * MIB)}`, 'big'));
    const nack = await answerTo('big');
    assert.equal(nack?.code, 12, 'UNIMPLEMENTED');
    assert.match(nack?.message ?? '', /^unsupported collection "bigx+… \(\d+ more characters\)"$/);
    const refused = logged('refused a collection not asked for');
    assert.ok(refused.longest < 2_000, `a refusal line of ${refused.longest} bytes`);
  });

  it('warns once per stream however many collections it was not asked for arrive', async () => {
    for (let i = 0; i < 5_000; i++) galley.sendRaw(resources(`unknown/${i}`, `u${i}`));
    // An answer to a later message: every message before it was read.
    galley.sendRaw(resources(VS_COLLECTION, 'last', 'v2'));
    assert.equal(await answerTo('last'), null, 'an ACK');
    assert.equal(galley.requests.filter((r) => r.nonce.startsWith('u')).length, 5_000, 'each one NACKed');
    assert.equal(logged('refused a collection not asked for').lines, 1);
  });
});

describe('what an xds upstream sends is bounded in the log and in NACKs (meshmux in a child process)', () => {
  const SE_KIND = kindNamed('ServiceEntry');
  /** Longer than any line the log keeps whole, within what a response may carry. */
  const LONG = 12 * 1024;
  const entries = (names: readonly string[]): RawAny[] =>
    names.map((n) => mcpAny(SE_KIND, fakeServiceEntry(n, `${n}.example.com`)));
  let dir: string;
  let dispose: () => Promise<void>;
  let upstream: FakeAdsServer;
  let delta: ScriptedDeltaUpstream;
  let meshmux: MeshmuxProcess;

  const longest = (lines: readonly unknown[]): number =>
    Math.max(0, ...lines.map((l) => JSON.stringify(l).length));
  /** The lines of one source warning that its upstream sent a type it did not subscribe. */
  const unsubscribed = (source: string): LogLine[] =>
    meshmux.logs.filter((l) => l['source'] === source && /which it did not subscribe/.test(l.msg ?? ''));

  before(async () => {
    ({ dir, dispose } = await tempDir());
    upstream = await FakeAdsServer.start({ peer: 'istiod' });
    upstream.set('ServiceEntry', [fakeServiceEntry('s0', 's0.example.com')]);
    delta = await ScriptedDeltaUpstream.start();
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      [
        'sources:',
        `  - {name: sotw, type: xds, address: ${upstream.address}, kinds: [ServiceEntry], apiVersions: current}`,
        `  - {name: delta, type: xds, delta: true, address: ${delta.address}, kinds: [ServiceEntry], apiVersions: current}`,
        '',
      ].join('\n'),
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    await upstream.waitFor(
      () => upstream.requestsFor(SE).some((r) => r.nonce !== ''),
      20_000,
      'the first ACK',
    );
    await delta.waitFor(() => delta.subscriptions(SE) === 1, 20_000, 'the delta subscription');
    // Both sources synced: the istiod is served their kind.
    delta.send(deltaResponse(SE, [{ name: 'payments/d0', any: entries(['d0'])[0] as RawAny }], 'first'));
  });
  after(async () => {
    await meshmux.kill();
    await upstream.stop();
    delta.stop();
    await dispose();
  });

  it('NACKs responses for a long type URL it did not subscribe with the name cut, warning once per stream', async () => {
    const typeUrl = `type.googleapis.com/x.${'y'.repeat(LONG)}`;
    for (let i = 0; i < 200; i++) upstream.sendRaw(discoveryResponse(typeUrl, [], `u${i}`));
    // An answer to a later response: every one before it was read.
    upstream.sendRaw(discoveryResponse(SE, entries(['s0', 's1']), 'after-unknown'));
    await upstream.waitFor(
      () => upstream.requests.some((r) => r.nonce === 'after-unknown'),
      20_000,
      'the ACK of a later response',
    );
    // Answers the upstream has not taken yet are replaced by the next of their type URL.
    const nacks = upstream.requests.filter((r) => r.nonce.startsWith('u'));
    assert.ok(
      nacks.some((r) => r.nonce === 'u199'),
      'the last one NACKed',
    );
    assert.ok(
      nacks.every((r) => r.typeUrl === typeUrl),
      'each NACK names the type URL whole',
    );
    const text = Math.max(...nacks.map((r) => r.errorDetail?.message?.length ?? 0));
    assert.ok(text < 1_000, `a NACK text of ${text} characters`);
    const lines = unsubscribed('sotw');
    assert.equal(lines.length, 1, 'one warning');
    assert.ok(longest(lines) < 2_000, `a warning of ${longest(lines)} bytes`);
  });

  it('logs the NACK of a response with a refused object and a long version cut', async () => {
    const version = 'v'.repeat(LONG);
    upstream.sendRaw(discoveryResponse(SE, entries(['s0', 'NOT A VALID NAME!!']), 'refused', version));
    await upstream.waitFor(
      () => upstream.requests.some((r) => r.nonce === 'refused'),
      20_000,
      'the NACK of the response',
    );
    const nack = upstream.requests.find((r) => r.nonce === 'refused');
    assert.match(nack?.errorDetail?.message ?? '', /NOT A VALID NAME!!/);
    // The line may reach the child's output after the NACK reaches the upstream.
    const nackLine = (l: (typeof meshmux.logs)[number]): boolean =>
      l['source'] === 'sotw' && /dropped 1 of 2/.test(l.msg ?? '');
    await meshmux.waitForLog(nackLine, 0, 20_000, 'the line of the NACK');
    const lines = meshmux.logs.filter(nackLine);
    assert.equal(lines.length, 1);
    assert.ok(longest(lines) < 2_000, `a NACK line of ${longest(lines)} bytes`);
  });

  it('refuses a response whose version is absurdly long, naming the source, and keeps what it serves', async () => {
    const istiod = connectIstiod(meshmux.xds);
    try {
      upstream.sendRaw(discoveryResponse(SE, entries(['s0', 's1']), 'held'));
      await istiod.waitFor(
        (c) => c.configs(SE).has('payments/s1'),
        20_000,
        () => 'the held state',
      );
      upstream.sendRaw(discoveryResponse(SE, entries(['s0', 'swapped']), 'long-version', 'v'.repeat(MIB)));
      await upstream.waitFor(
        () => upstream.requests.some((r) => r.nonce === 'long-version'),
        20_000,
        'the NACK of the long version',
      );
      const nack = upstream.requests.find((r) => r.nonce === 'long-version');
      assert.match(
        nack?.errorDetail?.message ?? '',
        /version_info of 1048576 characters is longer than the limit/,
      );
      assert.ok((nack?.versionInfo.length ?? 0) < 100, 'the NACK carries the version last accepted');
      const refusedLine = (l: (typeof meshmux.logs)[number]): boolean =>
        l['source'] === 'sotw' && /longer than the limit/.test(l.msg ?? '');
      await meshmux.waitForLog(refusedLine, 0, 20_000, 'the line of the refusal');
      const refused = meshmux.logs.filter(refusedLine);
      assert.equal(refused.length, 1, 'one line naming the source');
      // A later change arrived: the refused response was not applied before it.
      upstream.sendRaw(discoveryResponse(SE, entries(['s0', 's1', 's2']), 'marker'));
      await istiod.waitFor(
        (c) => c.configs(SE).has('payments/s2'),
        20_000,
        () => 'the marker',
      );
      assert.ok(!istiod.configs(SE).has('payments/swapped'), 'the refused response was applied');
    } finally {
      istiod.close();
    }
  });

  it('ends the stream on a nonce too long to echo, keeping what it serves, and subscribes again', async () => {
    const istiod = connectIstiod(meshmux.xds);
    try {
      await istiod.waitFor(
        (c) => c.configs(SE).has('payments/s2'),
        20_000,
        () => 'the served state',
      );
      const streams = upstream.streams;
      // What a new stream is answered with: the state served now.
      upstream.set(
        'ServiceEntry',
        ['s0', 's1', 's2'].map((n) => fakeServiceEntry(n, `${n}.example.com`)),
      );
      upstream.sendRaw(discoveryResponse(SE, entries(['s0']), 'n'.repeat(MIB), 'v-long-nonce'));
      await upstream.waitFor(() => upstream.streams > streams, 20_000, 'a new stream');
      assert.ok(
        upstream.requests.every((r) => r.nonce.length < 100),
        'no request echoed the long nonce',
      );
      await meshmux.waitForLog(
        (l) =>
          l['source'] === 'sotw' &&
          typeof l['err'] === 'string' &&
          /nonce of 1048576 characters/.test(l['err']),
        0,
        20_000,
        'the stream ended, naming the nonce',
      );
      upstream.set(
        'ServiceEntry',
        ['s0', 's1', 's2', 's3'].map((n) => fakeServiceEntry(n, `${n}.example.com`)),
      );
      upstream.push();
      await istiod.waitFor(
        (c) => c.configs(SE).has('payments/s3'),
        20_000,
        () => 'the next state',
      );
      assert.deepEqual(
        [...istiod.configs(SE).keys()].sort(),
        ['d0', 's0', 's1', 's2', 's3'].map((n) => `payments/${n}`),
      );
    } finally {
      istiod.close();
    }
  });

  it('NACKs delta responses for a long type URL it did not subscribe with the name cut, warning once', async () => {
    const typeUrl = `type.googleapis.com/x.${'y'.repeat(LONG)}`;
    for (let i = 0; i < 50; i++) delta.send(deltaResponse(typeUrl, [], `d${i}`));
    delta.send(deltaResponse(SE, [{ name: 'payments/d0', any: entries(['d0'])[0] as RawAny }], 'after'));
    await delta.waitFor(() => delta.requests.some((r) => r.nonce === 'after'), 20_000, 'the later ACK');
    const nacks = delta.requests.filter((r) => r.nonce.startsWith('d'));
    assert.equal(nacks.length, 50, 'each one NACKed');
    const text = Math.max(...nacks.map((r) => r.errorDetail?.message?.length ?? 0));
    assert.ok(text < 1_000, `a NACK text of ${text} characters`);
    const lines = unsubscribed('delta');
    assert.equal(lines.length, 1, 'one warning');
    assert.ok(longest(lines) < 2_000, `a warning of ${longest(lines)} bytes`);
  });
});
