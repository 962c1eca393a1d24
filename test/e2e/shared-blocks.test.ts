import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RunningMeshmux } from '../../src/app.js';
import type { AdsCounters } from '../../src/downstream/ads-server.js';
import { SE, SHAPES, type Zone } from '../../bench/fixtures.js';
import { Fleet } from '../../bench/fleet.js';
import type { ShapeRig } from '../../bench/phases.js';
import { benchMeshmux } from '../support/bench-meshmux.js';
import { quietCounters } from '../support/debug-counters.js';

// The benchmark's upstreams, istiods and policies: the east view's objects lie scattered among
// the core view's, which serves them too, and the two views share the blocks of the objects both
// serve (the part of the kind both policies admit). Real gRPC over 127.0.0.1 from the upstreams
// through meshmux to the istiods.
describe('views that serve the same objects share their framed bytes', () => {
  const shape = SHAPES.T;
  let rig: ShapeRig;
  let meshmux: RunningMeshmux;
  let core: Fleet;
  let east: Fleet;

  type Counters = Pick<AdsCounters, 'pushes' | 'blockBytesCopied'>;
  /** The counters once the server has nothing left to do; fails after 15 s. */
  const quiet = (): Promise<Counters> => quietCounters<Counters>(meshmux.adminPort, ['blockBytesCopied']);
  /** Both istiods hold what the model says, within 20 s. */
  const holdTheModel = async (what: string): Promise<void> => {
    for (const fleet of [core, east])
      await fleet.until(() => fleet.mismatches(rig.model.expectedDigests()).length === 0, 20_000, what);
  };
  /** Bytes copied into blocks for one changed ServiceEntry of `zone`, once both istiods hold it. */
  const copiedFor = async (zone: Zone): Promise<number> => {
    const before = await quiet();
    const pick = rig.model.servedInZone(zone);
    const change = rig.model.change('endpoints', pick.upstream, pick);
    const sim = rig.simulators[change.upstream];
    assert.ok(sim !== undefined);
    sim.changed(SE);
    sim.flush();
    await holdTheModel(`the change of a ${zone} object`);
    return (await quiet()).blockBytesCopied - before.blockBytesCopied;
  };

  before(async () => {
    ({ rig, meshmux } = await benchMeshmux(shape));
    core = new Fleet(`127.0.0.1:${meshmux.xdsPort}`, 1, { first: 0, policy: 'core' });
    east = new Fleet(`127.0.0.1:${meshmux.xdsPort}`, 1, { first: 1, policy: 'east' });
  });

  after(async () => {
    core.close();
    east.close();
    await meshmux.stop();
    await rig.close();
  });

  it('builds the east view from blocks the core view built, copying no byte', async () => {
    core.start();
    await core.synced(performance.now(), 30_000);
    const withCore = await quiet();
    assert.ok(withCore.blockBytesCopied > 0, 'the core view copied its objects into blocks');
    east.start();
    await east.synced(performance.now(), 30_000);
    await holdTheModel('the first sync');
    const withBoth = await quiet();
    assert.equal(
      withBoth.blockBytesCopied - withCore.blockBytesCopied,
      0,
      'nothing copied for the east view',
    );
  });

  it('copies an object both views serve once when it changes, as one only the core view serves', async () => {
    const west = await copiedFor('west');
    const both = await copiedFor('east');
    assert.ok(west > 0, 'the changed object was copied');
    // Objects of the benchmark differ in size by a few bytes; twice would be a copy per view.
    assert.ok(both < west * 1.5, `${both} bytes copied for an object of both views, ${west} for one of one`);
  });
});
