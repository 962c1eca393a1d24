/**
 * The program ships bundled (`bundle.mjs`, run by `npm run build`): the package's `bin`, `npm
 * start` and the image run `dist/bundle/cli.js`, and a served start reads its code from the bundle's
 * few files, not from the hundreds of modules that tsc writes and node_modules holds. A real
 * process serves a folder while node reports every file it loads (`module-load-log.ts`); with
 * tracing on, the OpenTelemetry SDK it leaves out is loaded from node_modules and its spans still
 * nest under those the bundled API began.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { SPAN_MERGE, SPAN_PUSH, SPAN_RECEIVE } from '../../src/telemetry/tracing.js';
import { npmStartScript } from '../support/image-env.js';
import { IstiodClient } from '../support/istiod-client.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import { CLI } from '../support/meshmux-cli.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { loadedFiles, MODULE_LOAD_LOG } from '../support/module-load-log.js';
import { OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { SE } from '../support/type-urls.js';

const PRELOAD = pathToFileURL(path.join(import.meta.dirname, '..', 'support', 'module-load-log.js')).href;

describe('the bundled program', () => {
  it('is what the package installs and npm start runs', async () => {
    const pkg = JSON.parse(await readFile(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
      files: string[];
    };
    assert.equal(path.join(PACKAGE_ROOT, pkg.bin['meshmux'] ?? ''), CLI);
    assert.ok(pkg.files.includes('dist/bundle'), 'the package ships dist/bundle');
    assert.ok(!pkg.files.includes('dist/src'), 'and not the unbundled modules');
    assert.match(await npmStartScript(), / dist\/bundle\/cli\.js serve /);
  });

  it('serves a start from the files of dist/bundle alone', async () => {
    const { dir, dispose } = await tempDir('meshmux-bundle-');
    try {
      await servedFromBundle(dir);
    } finally {
      await dispose();
    }
  });

  it('exports traces with the OpenTelemetry SDK it loads from node_modules', async () => {
    const { dir, dispose } = await tempDir('meshmux-bundle-');
    const receiver = await OtlpReceiver.start();
    try {
      const env = {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_SERVICE_NAME: 'meshmux-bundle',
        OTEL_BSP_SCHEDULE_DELAY: '50',
      };
      await whileServed(dir, env, async (istiod) => {
        await writeFile(path.join(dir, 'mesh', 'ledger.yaml'), plainServiceEntry('ledger'));
        await istiod.waitFor(
          (c) => c.configs(SE).has('shop/ledger'),
          20_000,
          () => 'ledger',
        );
        // The span a change is received in (the bundle's API) is the parent of its merge and
        // push spans (the SDK's): a context made by one is read by the other.
        await receiver.waitFor((spans) => pushOfReceive(spans) !== undefined, 30_000);
        const push = pushOfReceive(receiver.spans);
        assert.equal(push?.resource['service.name'], 'meshmux-bundle');
        assert.equal(push?.status.code, 1, 'ended by the ACK');
      });
    } finally {
      await receiver.close();
      await dispose();
    }
  });
});

/** Starts meshmux on a folder of one object, waits until a client holds it, and checks what it loaded. */
async function servedFromBundle(dir: string): Promise<void> {
  const log = path.join(dir, 'loaded.modules');
  // Served: the start loaded whatever a start loads, the YAML worker included.
  await whileServed(dir, { NODE_OPTIONS: `--import=${PRELOAD}`, [MODULE_LOAD_LOG]: log }, async () => {});
  const files = loadedFiles(log).map((f) => path.relative(PACKAGE_ROOT, f));
  const bundled = files.filter((f) => f.startsWith('dist/bundle/'));
  assert.ok(bundled.includes('dist/bundle/cli.js'), files.join('\n'));
  assert.ok(bundled.length >= 2, `the entry and its chunks: ${bundled.join(', ')}`);
  const elsewhere = files.filter((f) => !f.startsWith('dist/bundle/'));
  assert.deepEqual(elsewhere, [], `loaded from outside the bundle:\n${elsewhere.join('\n')}`);
}

/**
 * Writes a folder of one ServiceEntry and a configuration serving it to loopback, starts the
 * bundled CLI on it with `env`, runs `during` once a client holds the object, and stops it (a clean
 * exit, so the process's exit hooks ran).
 */
async function whileServed(
  dir: string,
  env: Readonly<Record<string, string>>,
  during: (istiod: IstiodClient) => Promise<void>,
): Promise<void> {
  await mkdir(path.join(dir, 'mesh'));
  await writeFile(path.join(dir, 'mesh', 'cart.yaml'), plainServiceEntry('cart'));
  const config = path.join(dir, 'meshmux.yaml');
  await writeFile(
    config,
    [
      'policies:',
      '  - name: loopback',
      '    match:',
      "      peerCidrs: ['127.0.0.0/8']",
      'sources:',
      '  - name: local',
      '    type: file',
      '    path: ./mesh',
      '    rescanInterval: 200ms',
    ].join('\n') + '\n',
  );
  const meshmux = await MeshmuxProcess.start(config, { cwd: dir, env });
  const istiod = new IstiodClient({ address: meshmux.xds }).start();
  try {
    await istiod.waitFor(
      (c) => c.configs(SE).has('shop/cart'),
      20_000,
      () => 'cart',
    );
    await during(istiod);
  } finally {
    istiod.close();
    assert.equal((await meshmux.stop()).code, 0);
  }
}

/** A push span whose parent is a merge span whose parent is a receive span, all of one trace. */
function pushOfReceive(spans: readonly ReceivedSpan[]): ReceivedSpan | undefined {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  return spans.find((push) => {
    if (push.name !== SPAN_PUSH) return false;
    const merge = byId.get(push.parentSpanId);
    const receive = merge === undefined ? undefined : byId.get(merge.parentSpanId);
    return (
      merge?.name === SPAN_MERGE &&
      receive?.name === SPAN_RECEIVE &&
      receive.traceId === push.traceId &&
      merge.traceId === push.traceId
    );
  });
}
