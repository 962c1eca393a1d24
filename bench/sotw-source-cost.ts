/**
 * CPU of an `xds` source over state-of-the-world ADS holding many objects, the source alone (no
 * merge, no ADS), when each response changes one of them:
 *
 *   npm run build && node dist/bench/sotw-source-cost.js [--objects 50000] [--changes 20] [--higress]
 *     [--upper-case] [--bad]
 *
 * An upstream in a child process pinned to the other core sends `--objects` ServiceEntries as one
 * state, then that state again with one object changed, each response encoded before any is
 * sent. `--higress`: every object carries the envelope field 100 Higress appends (meshmux prunes
 * it with a warning); `--upper-case`: every name has an upper-case letter (accepted, with a
 * warning per object, as Istio accepts them); `--bad`: one object's body does not decode, in every
 * state (dropped, its response NACKed). This process, pinned to one core, runs the source.
 * Printed: per response, the time from asking the upstream to write it to the source's snapshot
 * that carries it, and this process's CPU over it (receiving the response included). Prints
 * figures; asserts nothing.
 */
import { fork } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { FakeAdsServer } from '../test/support/fake-ads-server.js';
import { fakeServiceEntry, kindNamed, type FakeObject } from '../test/support/fake-objects.js';
import { discoveryResponse, mcpAny, type RawAny } from '../test/support/faulty-responses.js';
import { syncedXdsSource } from '../test/support/source-event-recorder.js';
import { option } from './in-process.js';
import { pinSelf } from './server-process.js';
import { SourceChangeTiming } from './source-change-timing.js';

const OBJECTS = Number(option('objects', '50000'));
const CHANGES = Number(option('changes', '20'));
const HIGRESS = process.argv.includes('--higress');
const UPPER_CASE = process.argv.includes('--upper-case');
const BAD = process.argv.includes('--bad');
/** The name of object `i`. */
const nameOf = (i: number): string => `${UPPER_CASE ? 'Svc' : 'svc'}-${i}`;
const SE = kindNamed('ServiceEntry');
const SE_V1 = 'networking.istio.io/v1/ServiceEntry';

/** Where the object changed by response `c` lies. */
const changedAt = (c: number): number => (c * 4099) % OBJECTS;

/** The child: encodes every response, then writes response `n` whenever told `n` (0: the first state). */
async function serve(): Promise<void> {
  pinSelf(1);
  const entry = (object: FakeObject): RawAny => mcpAny(SE, object, { extra100: HIGRESS });
  const state = Array.from({ length: OBJECTS }, (_, i) =>
    entry(fakeServiceEntry(nameOf(i), `svc-${i}.example.com`)),
  );
  // An object whose body does not decode, sent as it is in every state.
  if (BAD) state[1] = entry({ ...fakeServiceEntry(nameOf(1), 'x'), rawBody: Uint8Array.of(0x0a, 0x7f) });
  const responses = [discoveryResponse(SE_V1, state, 'first')];
  for (let c = 0; c < CHANGES; c++) {
    state[changedAt(c)] = entry(fakeServiceEntry(nameOf(changedAt(c)), `changed-${c}.example.com`));
    responses.push(discoveryResponse(SE_V1, state, `change-${c}`));
  }
  const upstream = await FakeAdsServer.start({ peer: 'istiod' });
  process.on('message', (n) => upstream.sendRaw(responses[n as number] as Uint8Array));
  process.on('disconnect', () => void upstream.stop());
  process.send?.(upstream.address);
}

async function measure(): Promise<void> {
  pinSelf(0);
  const child = fork(fileURLToPath(import.meta.url), ['--upstream', ...process.argv.slice(2)]);
  const address = await new Promise<string>((resolve) => child.once('message', (m) => resolve(m as string)));
  const recorder = await syncedXdsSource(address, ['ServiceEntry']);
  try {
    let from = recorder.count;
    const t = performance.now();
    child.send(0);
    const snapshot = await recorder.snapshot(from, 60_000);
    console.log(
      `${OBJECTS} ServiceEntries${HIGRESS ? ' with Higress field 100' : ''}${UPPER_CASE ? ', names in upper case' : ''}` +
        `${BAD ? ', one whose body does not decode' : ''}: ` +
        `first state in ` +
        `${(performance.now() - t).toFixed(0)} ms, ${snapshot.warnings.length} warning(s)`,
    );
    const timing = new SourceChangeTiming();
    for (let c = 0; c < CHANGES; c++) {
      from = recorder.count;
      await timing.time(
        () => child.send(c + 1),
        () => recorder.snapshot(from, 60_000),
        nameOf(changedAt(c)),
        `changed-${c}.example.com`,
      );
    }
    console.log(timing.report());
  } finally {
    recorder.close();
    child.disconnect();
  }
}

if (process.argv.includes('--upstream')) await serve();
else await measure();
