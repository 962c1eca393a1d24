import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { FakeGalley } from '../support/fake-galley.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';

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
