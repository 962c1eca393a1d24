/** Import boundaries of the layers: upstream -> merge -> downstream, wired only by src/app.ts. */
module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'upstream-stays-upstream',
      comment: 'Sources never see the merge or the serving side.',
      severity: 'error',
      from: { path: '^src/upstream/' },
      to: { path: '^src/(merge|downstream)/' },
    },
    {
      name: 'sources-are-siblings',
      comment:
        'One source folder never imports another; shared code lives in src/upstream/*.ts, the source runtime (runtime/) and the streaming kit (streaming/).',
      severity: 'error',
      from: { path: '^src/upstream/([^/]+)/' },
      to: { path: '^src/upstream/([^/]+)/', pathNot: '^src/upstream/($1|runtime|streaming)/' },
    },
    {
      name: 'runtime-knows-no-source',
      comment:
        'The source runtime (status, YAML file sets, time) serves every source and imports none, nor the streaming kit.',
      severity: 'error',
      from: { path: '^src/upstream/runtime/' },
      to: { path: '^src/upstream/[^/]+/', pathNot: '^src/upstream/runtime/' },
    },
    {
      name: 'merge-is-protocol-agnostic',
      comment: 'Merge sees bodies as opaque bytes: no schema, no protos, no sources, no serving.',
      severity: 'error',
      from: { path: '^src/merge/' },
      to: { path: '^src/(schema|upstream|downstream|http|wire)/' },
    },
    {
      name: 'downstream-never-sees-upstream',
      severity: 'error',
      from: { path: '^src/downstream/' },
      to: { path: '^src/upstream/' },
    },
    {
      name: 'only-app-wires-layers',
      comment: 'Outside the layers, only the composition root and the CLI import them all.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(app|cli)\\.ts$|^src/(upstream|merge|downstream|telemetry)/' },
      to: { path: '^src/(upstream|downstream)/' },
    },
    {
      name: 'telemetry-sees-only-hook-contracts',
      comment:
        'Telemetry implements the hook interfaces of the layers: it may read the ADS hook contract and client identities, nothing else downstream.',
      severity: 'error',
      from: { path: '^src/telemetry/' },
      to: {
        path: '^src/(upstream|downstream)/',
        pathNot: '^src/downstream/(ads-hooks|client-identity)\\.ts$',
      },
    },
    {
      name: 'wire-knows-only-the-protocol',
      comment:
        'src/wire holds protocol facts (wire types, type URLs, method paths, readers, writers, request builders): it imports core and the proto root, nothing of the layers.',
      severity: 'error',
      from: { path: '^src/wire/' },
      to: { path: '^src/', pathNot: '^src/(wire|core)/|^src/schema/proto-root\\.ts$' },
    },
    {
      name: 'tls-knows-no-layer',
      comment:
        'src/tls holds what every listener does with its TLS files (read, check, re-read): upstream and downstream both use it, so it imports neither.',
      severity: 'error',
      from: { path: '^src/tls/' },
      to: { path: '^src/', pathNot: '^src/(tls|core)/' },
    },
    {
      name: 'src-never-imports-tests',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
