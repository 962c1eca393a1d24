import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import { configProblems, parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';

const FILE_SOURCE = 'sources:\n  - name: local\n    type: file\n    path: ./mesh\n';

/** The problems of `yaml` as `file line N field F: reason` lines; [] when it is valid. */
function problems(yaml: string): string[] {
  try {
    parseMeshmuxConfig(yaml, 'meshmux.yaml', '/');
    return [];
  } catch (err) {
    assert.ok(err instanceof MeshmuxError && err.code === 'CONFIG', String(err));
    return configProblems(err).map((p) => p.describe());
  }
}

function policyWithCidrs(...cidrs: string[]): string {
  return `${FILE_SOURCE}policies:\n  - name: nodes\n    match:\n      peerCidrs: [${cidrs.map((c) => JSON.stringify(c)).join(', ')}]\n`;
}

describe('configuration validation', () => {
  it('refuses a kind in a source’s rules that matches no kind meshmux serves, suggesting the nearest', () => {
    const rules = (selector: string): string => `${FILE_SOURCE}    allow: ${selector}\n`;
    assert.deepEqual(problems(rules('{kinds: [VirtualServce]}')), [
      'meshmux.yaml line 5 field sources[0].allow.kinds[0]: VirtualServce matches no kind meshmux serves (did you mean VirtualService?)',
    ]);
    assert.match(
      problems(`${FILE_SOURCE}    deny: {kinds: ["Gateway*", "Nothing*"]}\n`)[0] ?? '',
      /deny\.kinds\[1\]: Nothing\* matches no kind meshmux serves$/,
    );
    for (const ok of [
      'VirtualService',
      'networking.istio.io/VirtualService',
      'networking.istio.io/*',
      'Destination*',
    ]) {
      assert.deepEqual(problems(rules(`{kinds: ["${ok}"]}`)), [], ok);
    }
  });

  it('refuses a CIDR whose prefix is out of range, naming the file, line and field', () => {
    assert.deepEqual(problems(policyWithCidrs('10.0.0.0/99')), [
      'meshmux.yaml line 8 field policies[0].match.peerCidrs[0]: prefix length must be 0 to 32 for an IPv4 address, got /99',
    ]);
    assert.match(
      problems(policyWithCidrs('fd00::/129'))[0] ?? '',
      /peerCidrs\[0\]: prefix length must be 0 to 128/,
    );
    assert.match(
      problems(policyWithCidrs('10.0.0.300/8'))[0] ?? '',
      /"10\.0\.0\.300" is not an IPv4 or IPv6 address/,
    );
    assert.match(problems(policyWithCidrs('10.0.0.0/8', '10.0.0.0/-1'))[0] ?? '', /peerCidrs\[1\]/);
    assert.deepEqual(problems(policyWithCidrs('10.0.0.0/8', '192.0.2.7', 'fd00::/8', '::1')), []);
  });

  it('refuses ports outside 1–65535 to dial, allows port 0 to listen, and checks hosts', () => {
    const xds = (address: string): string =>
      `sources:\n  - name: up\n    type: xds\n    address: ${JSON.stringify(address)}\n`;
    assert.match(
      problems(xds('127.0.0.1:99999'))[0] ?? '',
      /line 4 field sources\[0\]\.address: port must be a number from 1 to 65535/,
    );
    assert.match(problems(xds('127.0.0.1:0'))[0] ?? '', /port must be a number from 1 to 65535, got "0"/);
    assert.match(problems(xds('istiod.istio-system'))[0] ?? '', /no port/);
    assert.match(problems(xds(':15010'))[0] ?? '', /needs a host/);
    assert.match(problems(xds('bad_host:15010'))[0] ?? '', /not a host name or IP address/);
    assert.match(problems(xds('::1:15010'))[0] ?? '', /IPv6 address is written in brackets/);
    for (const ok of ['istiod.istio-system.svc:15012', '10.0.0.1:15010', '[::1]:15010']) {
      assert.deepEqual(problems(xds(ok)), [], ok);
    }
    const server = (xdsAddress: string): string =>
      `server:\n  xds: ${JSON.stringify(xdsAddress)}\n${FILE_SOURCE}`;
    assert.deepEqual(problems(server('127.0.0.1:0')), []);
    assert.deepEqual(problems(server(':15010')), []);
    assert.match(
      problems(server('127.0.0.1:65536'))[0] ?? '',
      /line 2 field server\.xds: port must be a number from 0 to 65535/,
    );
    const zk = `sources:\n  - name: dubbo\n    type: zookeeper\n    servers: zk-0:2181,zk-1:70000\n`;
    assert.match(problems(zk)[0] ?? '', /sources\[0\]\.servers: a comma-separated list of host:port/);
  });

  it('refuses a git path glob that could match nothing', () => {
    const git = (glob: string): string =>
      `sources:\n  - name: g\n    type: git\n    url: file:///srv/mesh.git\n    paths: [${JSON.stringify(glob)}]\n`;
    assert.match(
      problems(git('istio/**/*.{yaml'))[0] ?? '',
      /line 5 field sources\[0\]\.paths\[0\]: not a valid glob: Missing closing: "\}"/,
    );
    assert.match(problems(git('istio/[abc.yaml'))[0] ?? '', /not a valid glob/);
    assert.match(problems(git('istio/[z-a].yaml'))[0] ?? '', /not a valid glob: it can match no path/);
    assert.deepEqual(problems(git('istio/**/*.{yaml,yml}')), []);
  });

  it('refuses a name glob of a source rule, a policy or a Dubbo selector that would not compile', () => {
    assert.match(
      problems(
        'sources:\n  - name: f\n    type: file\n    path: /srv/mesh\n    allow: {namespaces: ["team-[ab"]}\n',
      )[0] ?? '',
      /line 5 field sources\[0\]\.allow\.namespaces\[0\]: not a valid glob/,
    );
    assert.match(
      problems(`${FILE_SOURCE}policies:\n  - name: p\n    match: {certSan: ["spiffe://{a"]}\n`)[0] ?? '',
      /field policies\[0\]\.match\.certSan\[0\]: not a valid glob: Missing closing: "\}"/,
    );
    assert.match(
      problems(
        'sources:\n  - name: z\n    type: zookeeper\n    servers: 127.0.0.1:2181\n    interfaces: {include: ["com.[z-a]"]}\n',
      )[0] ?? '',
      /field sources\[0\]\.interfaces\.include\[0\]: not a valid glob: it can match no value/,
    );
    assert.deepEqual(
      problems(
        `${FILE_SOURCE}policies:\n  - name: p\n    match: {certSan: ["spiffe://cluster.local/ns/x/*"]}\n    allow: {kinds: ["networking.istio.io/*"]}\n`,
      ),
      [],
    );
  });

  it('reads durations in exactly the syntax of Go and of Istio YAML durations', () => {
    const settle = (text: string): unknown =>
      parseMeshmuxConfig(`${FILE_SOURCE}    settle: ${JSON.stringify(text)}\n`, 'meshmux.yaml', '/')
        .sources[0]?.rules.settle;
    assert.equal(settle('1h30m'), 5_400_000);
    assert.equal(settle('1.5s'), 1500);
    assert.equal(settle('300ms'), 300);
    assert.equal(settle('2m0.5s'), 120_500);
    assert.equal(settle('0'), 0);
    assert.equal(settle('.5s'), 500);
    assert.equal(settle('500us'), 0.5);
    for (const bad of ['1d', '10', '1s2', '1.s.', 's', '', '1 s', '-1s']) {
      assert.match(
        problems(`${FILE_SOURCE}    settle: ${JSON.stringify(bad)}\n`)[0] ?? '',
        /line 5 field sources\[0\]\.settle: /,
        bad,
      );
    }
    assert.match(
      problems(`${FILE_SOURCE}    settle: "1d"\n`)[0] ?? '',
      /"1d" is not a valid duration: unknown unit "d"/,
    );
    assert.match(problems(`${FILE_SOURCE}    settle: "-1s"\n`)[0] ?? '', /negative/);
  });

  it('resolves local files of every kind of source against the configuration folder', () => {
    const config = parseMeshmuxConfig(
      [
        'sources:',
        '  - {name: east, type: kubernetes, kubeconfig: ./east.kubeconfig}',
        '  - {name: repo, type: git, url: "https://example.com/r.git", tokenFile: token, cacheDir: ./cache}',
        '  - {name: local, type: file, path: mesh}',
        '  - {name: up, type: xds, address: "127.0.0.1:15010", tls: {ca: ca.pem, cert: c.pem, key: k.pem}}',
      ].join('\n'),
      'meshmux.yaml',
      '/etc/meshmux',
    );
    const fields = config.sources.map((s) => JSON.stringify(s));
    assert.match(fields[0] ?? '', /"kubeconfig":"\/etc\/meshmux\/east\.kubeconfig"/);
    assert.match(
      fields[1] ?? '',
      /"tokenFile":"\/etc\/meshmux\/token".*"cacheDir":"\/etc\/meshmux\/cache"|"cacheDir":"\/etc\/meshmux\/cache".*"tokenFile":"\/etc\/meshmux\/token"/,
    );
    assert.match(fields[2] ?? '', /"path":"\/etc\/meshmux\/mesh"/);
    assert.match(
      fields[3] ?? '',
      /"ca":"\/etc\/meshmux\/ca\.pem","cert":"\/etc\/meshmux\/c\.pem","key":"\/etc\/meshmux\/k\.pem"/,
    );
  });

  it('links the status page only to an http or https dashboard', () => {
    const withDashboard = (url: string): string[] =>
      problems(`${FILE_SOURCE}server:\n  admin:\n    dashboardUrl: ${JSON.stringify(url)}\n`);
    assert.deepEqual(withDashboard('https://grafana.example.com/d/meshmux'), []);
    assert.deepEqual(withDashboard('javascript:alert(1)'), [
      'meshmux.yaml line 7 field server.admin.dashboardUrl: an http:// or https:// URL',
    ]);
  });

  it('names an unknown or missing source type, and lists the types', () => {
    assert.deepEqual(problems('sources:\n  - name: x\n    type: nonsense\n'), [
      'meshmux.yaml line 3 field sources[0].type: unknown source type "nonsense": one of file, git, zookeeper, kubernetes, xds, mcp, mcp-sink',
    ]);
    assert.match(
      problems('sources:\n  - name: x\n')[0] ?? '',
      /line 2 field sources\[0\]\.type: a source needs a type/,
    );
  });

  it('reports a YAML syntax error with its line, one problem per error', () => {
    const found = problems('sources:\n  - name: a\n    type: file\n   path: [\n');
    assert.ok(found.length >= 1);
    assert.match(found[0] ?? '', /^meshmux\.yaml line 4: not valid YAML: /);
  });

  it('reads maxFileSize as bytes or with a binary unit', () => {
    const withSize = (size: string): string => `${FILE_SOURCE}    maxFileSize: ${size}\n`;
    const size = (text: string): number | undefined => {
      const source = parseMeshmuxConfig(withSize(text), 'meshmux.yaml', '/').sources[0];
      return source?.type === 'file' ? source.maxFileSize : undefined;
    };
    assert.equal(size('1048576'), 1_048_576);
    assert.equal(size('32Mi'), 32 * 1024 * 1024);
    assert.equal(size('512KiB'), 512 * 1024);
    assert.match(problems(withSize('lots'))[0] ?? '', /field sources\[0\]\.maxFileSize/);
    assert.match(problems(withSize('0'))[0] ?? '', /field sources\[0\]\.maxFileSize/);
  });

  it("reads how often etcd's history is compacted: 1m by default, 0s for never, else 1s to 24h", () => {
    const withEtcd = (more: string): string =>
      `state:\n  etcd: { endpoints: ['http://127.0.0.1:2379']${more} }\n${FILE_SOURCE}`;
    const every = (more: string): number | undefined =>
      parseMeshmuxConfig(withEtcd(more), 'meshmux.yaml', '/').state.etcd?.compaction;
    assert.equal(every(''), 60_000);
    assert.equal(every(', compaction: 0s'), 0);
    assert.equal(every(', compaction: 5m'), 300_000);
    assert.match(problems(withEtcd(', compaction: 500ms'))[0] ?? '', /field state\.etcd\.compaction: 0s/);
    assert.match(problems(withEtcd(', compaction: 25h'))[0] ?? '', /field state\.etcd\.compaction/);
  });
});
