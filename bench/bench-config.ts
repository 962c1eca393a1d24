/** meshmux's configuration in the benchmark, shared by every server that has sources. */
import { policiesYaml, SOURCE_NAMES } from './fixtures.js';

/**
 * The configuration every server with sources runs: three xDS upstreams and the fleet's policies.
 * With `stateDir`, sources persist their state there (a fresh folder per run: a run must never
 * start from the state of the one before).
 */
export function benchConfigYaml(upstreams: readonly string[], stateDir = 'none'): string {
  const sources = upstreams.map((address, i) =>
    [
      `  - name: ${SOURCE_NAMES[i] ?? `u${i}`}`,
      '    type: xds',
      `    address: ${address}`,
      '    kinds: [ServiceEntry, VirtualService]',
      '    apiVersions: current',
      '    syncTimeout: 60s',
      '    reconnect: { initialDelay: 50ms, maxDelay: 500ms }',
    ].join('\n'),
  );
  return [
    'server:',
    '  xds: 127.0.0.1:0',
    '  http: 127.0.0.1:0',
    '  admin: {address: 127.0.0.1:0}',
    'syncTimeout: 120s',
    `state: { dir: ${JSON.stringify(stateDir)} }`,
    policiesYaml(),
    'sources:',
    ...sources,
  ].join('\n');
}
