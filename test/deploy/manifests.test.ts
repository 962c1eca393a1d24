/**
 * The deployment manifests under deploy/: each one valid against the Kubernetes (or
 * prometheus-operator) schema of its kind, and consistent with the code: ports and probe paths a
 * meshmux started from the shipped configuration really serves, selectors that select, names that
 * resolve, alert expressions over metrics meshmux exports, rules that promtool accepts.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it, type TestContext } from 'node:test';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { parseAllDocuments } from 'yaml';
import { parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { CONFIG_KINDS } from '../../src/schema/kinds.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { prometheusTools } from '../support/prometheus-server.js';
import { failOrSkipWithout } from '../support/required-peer.js';

const run = promisify(execFile);
const DEPLOY = path.join(PACKAGE_ROOT, 'deploy');

type Manifest = Record<string, unknown> & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
};

/** A validator per `apiVersion kind`: constructing the model and validating it throws on any schema error. */
const MODELS: Record<string, (m: Manifest) => void> = {
  'apps/v1 Deployment': (m) => new Deployment(m).validate(),
  'v1 Service': (m) => new Service(m).validate(),
  'v1 ServiceAccount': (m) => new ServiceAccount(m).validate(),
  'v1 ConfigMap': (m) => new ConfigMap(m).validate(),
  'policy/v1 PodDisruptionBudget': (m) => new PodDisruptionBudget(m).validate(),
  'networking.k8s.io/v1 NetworkPolicy': (m) => new NetworkPolicy(m).validate(),
  'rbac.authorization.k8s.io/v1 ClusterRole': (m) => new ClusterRole(m).validate(),
  'rbac.authorization.k8s.io/v1 ClusterRoleBinding': (m) => new ClusterRoleBinding(m as never).validate(),
  'monitoring.coreos.com/v1 ServiceMonitor': (m) => new ServiceMonitor(m as never).validate(),
  'monitoring.coreos.com/v1 PrometheusRule': (m) => new PrometheusRule(m as never).validate(),
};

/** Every YAML file under deploy/, relative path → its documents. */
async function readDeploy(): Promise<Map<string, Manifest[]>> {
  const out = new Map<string, Manifest[]>();
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(file);
      else if (/\.ya?ml$/.test(entry.name)) {
        const docs = parseAllDocuments(await readFile(file, 'utf8'));
        for (const d of docs) assert.deepEqual(d.errors, [], `${file} parses`);
        out.set(
          path.relative(DEPLOY, file),
          docs.map((d) => d.toJS() as Manifest),
        );
      }
    }
  };
  await walk(DEPLOY);
  return out;
}

function one(all: Map<string, Manifest[]>, kind: string, name = 'meshmux'): Manifest {
  const found = [...all.values()].flat().filter((m) => m.kind === kind && m.metadata.name === name);
  assert.equal(found.length, 1, `one ${kind} ${name}`);
  return found[0] as Manifest;
}

const at = (value: unknown, ...keys: Array<string | number>): unknown =>
  keys.reduce<unknown>((v, k) => (v as Record<string | number, unknown> | undefined)?.[k], value);

function matches(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

describe('deployment manifests', () => {
  let all: Map<string, Manifest[]>;
  before(async () => {
    all = await readDeploy();
  });

  it('validates every manifest against the schema of its kind', () => {
    let checked = 0;
    for (const [file, docs] of all) {
      for (const m of docs) {
        if (m.kind === 'Kustomization') continue;
        const validate = MODELS[`${m.apiVersion} ${m.kind}`];
        assert.ok(validate !== undefined, `${file}: a validator for ${m.apiVersion} ${m.kind}`);
        assert.doesNotThrow(() => validate(m), `${file}: ${m.kind} ${m.metadata.name}`);
        checked++;
      }
    }
    assert.ok(checked >= 11, `${checked} manifests checked`);
  });

  it('refuses a manifest with a schema error, so the check above can fail', () => {
    const broken = structuredClone(one(all, 'Deployment'));
    (broken['spec'] as Record<string, unknown>)['replicas'] = 'two';
    assert.throws(() => MODELS['apps/v1 Deployment']?.(broken), /replicas/);
  });

  it('lists every manifest of a folder in its kustomization, and only existing files', async () => {
    for (const folder of ['kubernetes', 'kubernetes/rbac', 'prometheus']) {
      const k = all.get(path.join(folder, 'kustomization.yaml'))?.[0];
      const listed = (at(k, 'resources') as string[]).slice().sort();
      const files = (await readdir(path.join(DEPLOY, folder)))
        .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
        .sort();
      assert.deepEqual(listed, files, folder);
    }
  });

  it('wires names and selectors together: service, pods, budget, policy, monitor, account, config maps', () => {
    const deployment = one(all, 'Deployment');
    const pod = at(deployment, 'spec', 'template') as Manifest;
    const podLabels = pod.metadata.labels;
    assert.ok(
      matches(at(deployment, 'spec', 'selector', 'matchLabels') as Record<string, string>, podLabels),
    );
    const service = one(all, 'Service');
    assert.ok(
      matches(at(service, 'spec', 'selector') as Record<string, string>, podLabels),
      'service selects the pods',
    );
    assert.ok(
      matches(
        at(one(all, 'PodDisruptionBudget'), 'spec', 'selector', 'matchLabels') as Record<string, string>,
        podLabels,
      ),
    );
    assert.ok(
      matches(
        at(one(all, 'NetworkPolicy'), 'spec', 'podSelector', 'matchLabels') as Record<string, string>,
        podLabels,
      ),
    );
    const monitor = one(all, 'ServiceMonitor');
    assert.ok(
      matches(
        at(monitor, 'spec', 'selector', 'matchLabels') as Record<string, string>,
        service.metadata.labels,
      ),
    );

    const container = at(pod, 'spec', 'containers', 0) as Record<string, unknown>;
    const containerPorts = new Map(
      (container['ports'] as Array<{ name: string; containerPort: number }>).map((p) => [
        p.name,
        p.containerPort,
      ]),
    );
    const servicePorts = at(service, 'spec', 'ports') as Array<{
      name: string;
      port: number;
      targetPort: string;
    }>;
    for (const p of servicePorts) {
      assert.ok(containerPorts.has(p.targetPort), `service port ${p.name} targets a container port`);
      assert.equal(containerPorts.get(p.targetPort), p.port, `${p.name} keeps its number`);
    }
    const monitorPort = at(monitor, 'spec', 'endpoints', 0, 'port');
    assert.ok(
      servicePorts.some((p) => p.name === monitorPort),
      'the monitor scrapes a named service port',
    );

    assert.equal(at(pod, 'spec', 'serviceAccountName'), one(all, 'ServiceAccount').metadata.name);
    for (const volume of at(pod, 'spec', 'volumes') as Array<{ configMap?: { name: string } }>) {
      if (volume.configMap !== undefined) one(all, 'ConfigMap', volume.configMap.name);
    }
  });

  it('lets the Kubernetes source list and watch every kind it reads, and write nothing', () => {
    const role = one(all, 'ClusterRole', 'meshmux-istio-config-reader');
    const rules = at(role, 'rules') as Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
    const granted = new Set(
      rules.flatMap((r) => r.apiGroups.flatMap((g) => r.resources.map((res) => `${g}/${res}`))),
    );
    const needed = CONFIG_KINDS.map((k) => `${k.group}/${k.plural}`).sort();
    assert.deepEqual([...granted].sort(), needed);
    for (const r of rules) assert.deepEqual(r.verbs.slice().sort(), ['get', 'list', 'watch']);
    const binding = one(all, 'ClusterRoleBinding', 'meshmux-istio-config-reader');
    assert.equal(at(binding, 'roleRef', 'name'), role.metadata.name);
    const account = one(all, 'ServiceAccount');
    assert.deepEqual(at(binding, 'subjects', 0), {
      kind: 'ServiceAccount',
      name: account.metadata.name,
      namespace: account.metadata.namespace,
    });
  });

  it('ships a meshmux configuration that loads, on the ports the pod declares, and serves the probe paths', async (t) => {
    const deployment = one(all, 'Deployment');
    const container = at(deployment, 'spec', 'template', 'spec', 'containers', 0) as Record<string, unknown>;
    const args = container['args'] as string[];
    const configPath = args[args.indexOf('--config') + 1] ?? '';
    const mounts = container['volumeMounts'] as Array<{ name: string; mountPath: string }>;
    const mount = mounts.find((m) => configPath.startsWith(`${m.mountPath}/`));
    assert.ok(mount !== undefined, `${configPath} is on a mounted volume`);
    const volume = (
      at(deployment, 'spec', 'template', 'spec', 'volumes') as Array<{
        name: string;
        configMap?: { name: string };
      }>
    ).find((v) => v.name === mount.name);
    const data = at(one(all, 'ConfigMap', volume?.configMap?.name ?? ''), 'data') as Record<string, string>;
    const text = data[path.basename(configPath)] ?? '';
    const config = parseMeshmuxConfig(text, configPath, path.dirname(configPath));
    const ports = new Map(
      (container['ports'] as Array<{ name: string; containerPort: number }>).map((p) => [
        p.name,
        p.containerPort,
      ]),
    );
    assert.equal(config.server.xds, `0.0.0.0:${ports.get('grpc-xds')}`);
    assert.equal(config.server.http, `0.0.0.0:${ports.get('http-monitoring')}`);
    assert.equal(config.state.dir, mounts.find((m) => m.name === 'state')?.mountPath);

    // The probe paths, on a meshmux started from that configuration (its folders replaced by
    // temporary ones, its addresses by loopback ports).
    const dir = await tempDir('meshmux-deploy-');
    t.after(() => dir.dispose());
    const meshDir = mounts.find((m) => m.name === 'mesh')?.mountPath ?? '';
    const mesh = at(one(all, 'ConfigMap', 'meshmux-mesh'), 'data') as Record<string, string>;
    for (const [name, yaml] of Object.entries(mesh)) await writeFile(path.join(dir.dir, name), yaml);
    const local = text.replaceAll(meshDir, dir.dir).replace(/dir: \/var\/lib\/meshmux/, 'dir: none');
    const meshmux = await startFromYaml(local.replace(/0\.0\.0\.0:\d+/g, '127.0.0.1:0'), dir.dir);
    t.after(() => meshmux.stop());
    for (const probe of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
      const probePath = at(container, probe, 'httpGet', 'path') as string;
      assert.equal(at(container, probe, 'httpGet', 'port'), 'http-monitoring');
      const deadline = performance.now() + 20_000;
      let status = 0;
      while (status !== 200 && performance.now() < deadline) {
        status = (await fetch(`${meshmux.http}${probePath}`)).status;
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(status, 200, `${probe} ${probePath}`);
    }
  });

  describe('alerts', () => {
    let metricsText = '';
    let stop: (() => Promise<void>) | undefined;
    before(async () => {
      const dir = await tempDir('meshmux-alerts-');
      const meshmux = await startFromYaml(
        `state: { dir: none }\nsources:\n  - name: local\n    type: file\n    path: ${JSON.stringify(dir.dir)}\n`,
        dir.dir,
      );
      stop = async () => {
        await meshmux.stop();
        await dir.dispose();
      };
      metricsText = await (await fetch(`${meshmux.http}/metrics`)).text();
    });
    after(() => stop?.());

    it('alerts only on metrics meshmux exports', () => {
      const rule = one(all, 'PrometheusRule');
      const exprs = (at(rule, 'spec', 'groups', 0, 'rules') as Array<{ alert: string; expr: string }>).map(
        (r) => [r.alert, r.expr] as const,
      );
      assert.ok(exprs.length >= 5);
      const exported = new Set([...metricsText.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
      for (const [alert, expr] of exprs) {
        const used = [...expr.matchAll(/\bmeshmux_[a-z_]+/g)].map((m) =>
          m[0].replace(/_(bucket|sum|count)$/, ''),
        );
        assert.ok(used.length > 0, `${alert} uses a meshmux metric`);
        for (const name of used) assert.ok(exported.has(name), `${alert}: ${name} is exported`);
      }
    });

    it('has rules promtool accepts', async (t: TestContext) => {
      const tools = await prometheusTools();
      if (failOrSkipWithout(t, 'missing' in tools ? tools.missing : undefined) || 'missing' in tools) return;
      const dir = await tempDir('meshmux-rules-');
      t.after(() => dir.dispose());
      const file = path.join(dir.dir, 'rules.json');
      await writeFile(file, JSON.stringify({ groups: at(one(all, 'PrometheusRule'), 'spec', 'groups') }));
      const { stdout } = await run(tools.promtool, ['check', 'rules', file]);
      assert.match(stdout, /SUCCESS: \d+ rules found/);
    });
  });
});
