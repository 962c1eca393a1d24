import { startMeshmux, type RunningMeshmux } from '../../src/app.js';
import { parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';
import { benchConfigYaml } from '../../bench/bench-config.js';
import type { Shape } from '../../bench/fixtures.js';
import { ShapeRig } from '../../bench/phases.js';
import { until } from './deadline.js';

/**
 * The benchmark's upstream simulators holding `shape`'s objects, and meshmux in this process on
 * the benchmark's configuration, once its merged snapshot is ready.
 */
export async function benchMeshmux(shape: Shape): Promise<{ rig: ShapeRig; meshmux: RunningMeshmux }> {
  const rig = new ShapeRig(shape);
  await rig.start();
  const meshmux = await startMeshmux(
    parseMeshmuxConfig(benchConfigYaml(rig.addresses), 'bench', process.cwd()),
  );
  await until(() => meshmux.engine.current().ready, 30_000, 'the merged snapshot to be ready', {
    intervalMs: 20,
  });
  return { rig, meshmux };
}
