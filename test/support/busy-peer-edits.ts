import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { BusyAnswer } from './busy-sotw-upstream.js';
import { report, virtualServiceYaml } from './fault-kit.js';
import type { IstiodClient } from './istiod-client.js';
import { VS } from './type-urls.js';
import type { Waitable } from './waitable.js';

/** A peer sending meshmux a large changed state on each ACK, which the test holds and lets go. */
export interface BusyPeer extends Waitable {
  readonly answers: readonly BusyAnswer[];
  hold(): void;
  resume(): void;
}

/** How the edits of a file fared beside a busy peer. */
export interface EditsBesideBusy {
  /** Each edit's time from its write to the istiod holding it, ms. */
  readonly latencies: number[];
  /** Per edit, the busy states meshmux answered between its write and its arrival. */
  readonly handledMeanwhile: number[];
  /** The busy states meshmux answered per second over the whole run. */
  readonly perSecond: number;
}

/**
 * Lets `peer` go, waits until meshmux answered `warmUp` of its states (the burst its reading saved
 * while syncing spent), then writes `edits` versions of `routes.yaml` in `folder`, each as meshmux
 * answers a busy state (the next one already on its way), and waits for each at `istiod` as the
 * VirtualService `shop/edit-<n>`. Holds the peer again at the end.
 */
export async function editsBesideBusyPeer(
  peer: BusyPeer,
  istiod: IstiodClient,
  folder: string,
  counts: { readonly warmUp: number; readonly edits: number },
): Promise<EditsBesideBusy> {
  peer.resume();
  const resumedAt = performance.now();
  const fromAnswers = peer.answers.length;
  await peer.waitFor(
    () => peer.answers.length >= fromAnswers + counts.warmUp,
    120_000,
    `${counts.warmUp} answers to busy states`,
  );
  const handledMeanwhile: number[] = [];
  const latencies: number[] = [];
  for (let i = 1; i <= counts.edits; i++) {
    const before = peer.answers.length;
    await peer.waitFor(() => peer.answers.length > before, 30_000, 'the answer to the next busy state');
    const answered = peer.answers.length;
    const started = performance.now();
    await writeFile(path.join(folder, 'routes.yaml'), virtualServiceYaml('shop', `edit-${i}`));
    await istiod.waitFor(
      (c) => c.configs(VS).has(`shop/edit-${i}`),
      60_000,
      () => `edit ${i} at the istiod`,
    );
    latencies.push(performance.now() - started);
    handledMeanwhile.push(peer.answers.length - answered);
  }
  const seconds = (performance.now() - resumedAt) / 1000;
  peer.hold();
  return { latencies, handledMeanwhile, perSecond: (peer.answers.length - fromAnswers) / seconds };
}

/**
 * Runs {@link editsBesideBusyPeer}, reports its figures as `fault`, and checks that no edit waited
 * for more than one busy state (`unit`: what the peer sends) and at most one waited at all, that
 * the istiod holds the last edit alone, and that every busy state was ACKed.
 */
export async function expectEditsNotBehindBusyPeer(
  peer: BusyPeer,
  istiod: IstiodClient,
  folder: string,
  run: { readonly fault: string; readonly unit: string; readonly warmUp: number; readonly edits: number },
): Promise<void> {
  const { latencies, handledMeanwhile, perSecond } = await editsBesideBusyPeer(peer, istiod, folder, run);
  const handled = handledMeanwhile.join(' ');
  report(run.fault, {
    'edit latencies ms': latencies.map(Math.round).join(' '),
    [`busy ${run.unit} handled before the edit arrived`]: handled,
    [`busy ${run.unit} per second`]: perSecond.toFixed(2),
  });
  // Before pacing, the edit's every step (the file's settle timer, its reading, its YAML worker,
  // the push) waited for a busy state to be handled, one to two of them per edit.
  assert.ok(
    handledMeanwhile.every((n) => n <= 1),
    `busy ${run.unit} handled between an edit and its arrival: ${handled}`,
  );
  assert.ok(
    handledMeanwhile.filter((n) => n === 0).length >= run.edits - 1,
    `edits that waited for busy ${run.unit}: ${handled}`,
  );
  assert.deepEqual([...istiod.configs(VS).keys()], [`shop/edit-${run.edits}`]);
  assert.ok(
    peer.answers.every((a) => a.ack),
    `every busy ${run.unit} was ACKed`,
  );
}
