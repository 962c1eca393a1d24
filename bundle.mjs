/**
 * Bundles the compiled program (`dist/src`, written by tsc) into the few files that ship:
 *
 *   node bundle.mjs            (run by `npm run build` after tsc)
 *
 * `dist/bundle/cli.js` is the package's `bin` and what `npm start` and the image run; the YAML
 * worker is an entry of its own beside it (the pool starts it by its path), and code both share
 * goes into chunks in the same folder. The benchmark's server process is bundled the same way into
 * `dist/bench/bundle/`, so a timed start loads what an operator's start loads.
 *
 * Why: Node 20 reads, compiles and links each module on its own, and a start loaded some 650 files
 * (180 of them meshmux's, the rest its libraries') in about 0.6 s; bundled, eight in 0.3 s.
 * Libraries that read files next to their own code at run time (etcd3's protos), or that are large
 * and loaded only when a configuration asks for them (the Kubernetes client, the OpenTelemetry SDK
 * and exporter), or that meshmux loads with `require` on first use (the ZooKeeper client), stay
 * outside and are loaded from node_modules.
 */
import { rm } from 'node:fs/promises';
import { build } from 'esbuild';

// The OpenTelemetry API is inside (prom-client loads it at every start); the SDK outside loads its
// own copy, and the API's copies share their state through a global, as the API intends.
const EXTERNAL = [
  '@kubernetes/client-node',
  'etcd3',
  'cockatiel',
  'node-zookeeper-client',
  '@opentelemetry/core',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/resources',
  '@opentelemetry/sdk-trace-base',
  '@opentelemetry/semantic-conventions',
];

/**
 * The libraries written as CommonJS call `require` for Node's own modules (and the externals);
 * an ES module has none, so each file of the bundle makes one for itself.
 */
const BANNER =
  "import { createRequire as createRequireOfBundle } from 'node:module';\n" +
  'const require = createRequireOfBundle(import.meta.url);';

/**
 * Bundles `entryPoints` (paths of compiled files) into `outdir`, each entry under its own file name.
 * @param {string[]} entryPoints
 * @param {string} outdir
 */
async function bundle(entryPoints, outdir) {
  // Chunks are named by their content: those of an earlier build would stay beside the new ones.
  await rm(outdir, { recursive: true, force: true });
  await build({
    entryPoints,
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20.19',
    entryNames: '[name]',
    chunkNames: 'chunk-[hash]',
    external: EXTERNAL,
    banner: { js: BANNER },
    // tsc's source maps are followed, so a stack trace read with `node --enable-source-maps`
    // names the TypeScript source.
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'warning',
  });
}

const WORKER = 'dist/src/schema/yaml-worker-main.js';
await bundle(['dist/src/cli.js', WORKER], 'dist/bundle');
await bundle(['dist/bench/server-main.js', WORKER], 'dist/bench/bundle');
