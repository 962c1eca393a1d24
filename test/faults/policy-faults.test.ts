/**
 * A slip in the policies (a namespace misspelt in `allow`, a client match that no longer matches)
 * against meshmux running as its own process, with an istiod stand-in connected: on a live reload
 * and across a restart the stand-in must keep what it holds until the change is confirmed, while a
 * change that takes little applies at once. One file source: 20 VirtualServices in namespace `shop`,
 * one in `web`; one policy for istiods named `shop-*`.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { PolicyChangesPage } from '../../src/downstream/policy/policy-changes.js';
import { answeredAfter, inventory, lost, report, virtualServiceYaml } from '../support/fault-kit.js';
import { freePort } from '../support/free-port.js';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { runMeshmuxCli } from '../support/meshmux-cli.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { VS } from '../support/type-urls.js';

const WAIT_MS = 20_000;
const SHOP = 20;

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = performance.now() + WAIT_MS;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A configuration of the file source (`web` holding `web` objects) and the policies `write` is
 * given (one, or several); `extra` goes at the top level, `source` after the file source.
 */
async function setUp(prefix: string, options: { extra?: string; source?: string; web?: number } = {}) {
  const dir = await tempDir(prefix);
  await mkdir(path.join(dir.dir, 'local'));
  const shop = Array.from({ length: SHOP }, (_, i) => virtualServiceYaml('shop', `svc-${i}`)).join('');
  const web = Array.from({ length: options.web ?? 1 }, (_, i) =>
    virtualServiceYaml('web', i === 0 ? 'front' : `web-${i}`),
  ).join('');
  await writeFile(path.join(dir.dir, 'local', 'objects.yaml'), shop + web);
  const configFile = path.join(dir.dir, 'meshmux.yaml');
  const write = (policies: string | readonly string[]): Promise<void> =>
    writeFile(
      configFile,
      [
        'state: { dir: state }',
        options.extra ?? '',
        'sources:',
        '  - { name: local, type: file, path: ./local }',
        options.source ?? '',
        'policies:',
        ...(typeof policies === 'string' ? [policies] : policies).map((p) => `  - ${p}`),
        '',
      ].join('\n'),
    );
  await write(GOOD);
  return { dir, configFile, write };
}

/** Resolves once the state folder's policy record names `nodeIds`. */
function recorded(dir: string, ...nodeIds: string[]): Promise<void> {
  const file = path.join(dir, 'state', 'policies.json');
  return until(
    () =>
      readFile(file, 'utf8').then(
        (t) => nodeIds.every((n) => t.includes(n)),
        () => false,
      ),
    `the policy record naming ${nodeIds.join(', ')}`,
  );
}

const GOOD = "{ name: shops, match: { nodeId: 'shop-*' }, allow: { namespaces: [shop, web] } }";
const NAMESPACE_TYPO = "{ name: shops, match: { nodeId: 'shop-*' }, allow: { namespaces: [shp, web] } }";
const MATCH_TYPO = "{ name: shops, match: { nodeId: 'shpo-*' }, allow: { namespaces: [shop, web] } }";
const WITHOUT_WEB = "{ name: shops, match: { nodeId: 'shop-*' }, allow: { namespaces: [shop] } }";

function connect(xds: string): IstiodClient {
  return new IstiodClient({ address: xds, nodeId: 'shop-1', backoff: { initialMs: 20, maxMs: 200 } }).start();
}

const holdsAll = (c: IstiodClient): boolean => c.configs(VS).size === SHOP + 1;

async function held(meshmux: MeshmuxProcess): Promise<PolicyChangesPage['held']> {
  return (await meshmux.debug<PolicyChangesPage>('policies')).held;
}

/** Waits long enough for a change that is applied to reach the stand-in, then says what it lost. */
async function settledLoss(client: IstiodClient, before: ReadonlySet<string>): Promise<string[]> {
  await new Promise((r) => setTimeout(r, 1_000));
  return lost(before, inventory(client));
}

async function metric(meshmux: MeshmuxProcess, name: string): Promise<number> {
  const text = await (await fetch(`${meshmux.http}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1]);
}

describe('faults: a slip in the policies', () => {
  it('holds a reload whose allow list misspells a namespace, until meshmux confirm --policies', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-policy-reload-');
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connect(meshmux.xds);
    try {
      await client.waitFor(holdsAll, WAIT_MS, () => 'the first state');
      const before = inventory(client);
      await write(NAMESPACE_TYPO);
      await until(async () => (await held(meshmux)) !== undefined, 'the change held');
      assert.deepEqual(await settledLoss(client, before), [], 'objects lost by the reload');
      const page = await held(meshmux);
      assert.deepEqual(
        page?.losses.map((l) => ({ ...l })),
        [{ policy: 'shops', next: 'shops', clients: 1, objects: SHOP + 1, lost: SHOP, held: 'mass-delete' }],
      );
      assert.equal(await metric(meshmux, 'meshmux_policy_change_held_deletions'), SHOP);
      const status = await (await fetch(`${meshmux.admin}/`)).text();
      assert.match(status, /change of the policies held/);
      // Everything else is applied and served: a new object of the source reaches the stand-in.
      await writeFile(path.join(dir.dir, 'local', 'more.yaml'), virtualServiceYaml('shop', 'late'));
      await client.waitFor(
        (c) => c.configs(VS).has('shop/late'),
        WAIT_MS,
        () => 'the new object',
      );
      const statusCli = await runMeshmuxCli(['status', '--admin', meshmux.admin]);
      assert.match(statusCli.stdout, /POLICIES HELD/);
      assert.match(statusCli.stdout, /1 istiod\(s\) of policy shops: 20 of 21 object\(s\) withdrawn/);
      report('a namespace misspelt in a policy, on a live reload', {
        'objects lost': lost(before, inventory(client)).length,
        'objects the change withdraws': page?.losses[0]?.lost ?? -1,
      });
      // Confirmed: the narrowed view is what the stand-in holds from then on.
      const confirmed = await runMeshmuxCli(['confirm', '--policies', '--admin', meshmux.admin]);
      assert.equal(confirmed.code, 0, confirmed.stderr);
      assert.match(confirmed.stdout, /policies: applied \(shops\)/);
      await client.waitFor(
        (c) => c.configs(VS).size === 1,
        WAIT_MS,
        () => 'the confirmed change',
      );
      assert.ok(client.configs(VS).has('web/front'));
      assert.equal(await held(meshmux), undefined);
      assert.equal(await metric(meshmux, 'meshmux_policy_change_held_deletions'), 0);
      const again = await runMeshmuxCli(['confirm', '--policies', '--admin', meshmux.admin]);
      assert.equal(again.code, 1);
      assert.match(again.stderr, /no change of the policies is held/);
    } finally {
      client.close();
      await meshmux.stop();
      await dir.dispose();
    }
  });

  it('holds a reload whose client match no longer matches, and drops the hold when the edit is taken back', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-policy-match-');
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connect(meshmux.xds);
    try {
      await client.waitFor(holdsAll, WAIT_MS, () => 'the first state');
      const before = inventory(client);
      const streams = client.streams;
      await write(MATCH_TYPO);
      await until(async () => (await held(meshmux)) !== undefined, 'the change held');
      assert.deepEqual(await settledLoss(client, before), [], 'objects lost by the reload');
      assert.equal(client.streams, streams, 'the stand-in is still served on its stream');
      const page = await held(meshmux);
      assert.deepEqual(
        page?.losses.map((l) => ({ ...l })),
        [{ policy: 'shops', clients: 1, objects: SHOP + 1, lost: SHOP + 1, held: 'empty' }],
      );
      report('a client match misspelt in a policy, on a live reload', {
        'objects lost': lost(before, inventory(client)).length,
        'objects the change withdraws': page?.losses[0]?.lost ?? -1,
      });
      // The edit taken back: nothing held, nothing changed for the stand-in.
      await write(GOOD);
      await until(async () => (await held(meshmux)) === undefined, 'the hold dropped');
      assert.deepEqual(await settledLoss(client, before), []);
      assert.equal(client.streams, streams);
    } finally {
      client.close();
      await meshmux.stop();
      await dir.dispose();
    }
  });

  it('applies at once a change that takes less than the guards allow', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-policy-small-');
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connect(meshmux.xds);
    try {
      await client.waitFor(holdsAll, WAIT_MS, () => 'the first state');
      await write(WITHOUT_WEB);
      await client.waitFor(
        (c) => c.configs(VS).size === SHOP,
        WAIT_MS,
        () => 'the narrowed view',
      );
      assert.ok(!client.configs(VS).has('web/front'));
      assert.equal(await held(meshmux), undefined);
    } finally {
      client.close();
      await meshmux.stop();
      await dir.dispose();
    }
  });

  it('applies a held change once policyGuard.confirmAfter has passed', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-policy-after-', {
      extra: 'policyGuard: { confirmAfter: 1500ms }',
    });
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    const client = connect(meshmux.xds);
    try {
      await client.waitFor(holdsAll, WAIT_MS, () => 'the first state');
      await write(NAMESPACE_TYPO);
      await until(async () => (await held(meshmux)) !== undefined, 'the change held');
      const heldAt = performance.now();
      assert.equal(client.configs(VS).size, SHOP + 1);
      await client.waitFor(
        (c) => c.configs(VS).size === 1,
        WAIT_MS,
        () => 'the change applied',
      );
      const afterMs = performance.now() - heldAt;
      assert.ok(afterMs > 1_000, `applied ${Math.round(afterMs)} ms after it was held`);
      assert.equal(await held(meshmux), undefined);
    } finally {
      client.close();
      await meshmux.stop();
      await dir.dispose();
    }
  });

  it('holds a misspelt namespace found at a restart for the istiods the last run served', async () => {
    const { dir, configFile, write } = await setUp('meshmux-fault-policy-restart-');
    const xds = `127.0.0.1:${await freePort()}`;
    let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    const client = connect(xds);
    try {
      await client.waitFor(holdsAll, WAIT_MS, () => 'the first state');
      await recorded(dir.dir, 'shop-1');
      const before = inventory(client);
      await meshmux.kill('SIGKILL');
      await write(NAMESPACE_TYPO);
      const streams = client.streams;
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      await answeredAfter(client, streams, 'every type answered by the restarted meshmux');
      assert.deepEqual(await settledLoss(client, before), [], 'objects lost by the restart');
      const page = await held(meshmux);
      assert.equal(page?.losses[0]?.lost, SHOP);
      report('a namespace misspelt in a policy while meshmux was down', {
        'objects lost': lost(before, inventory(client)).length,
        'objects the change withdraws': page?.losses[0]?.lost ?? -1,
      });
      // Restarted again before confirming: still held (the record keeps the policies in force).
      await meshmux.stop();
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      await until(async () => (await held(meshmux)) !== undefined, 'held again after a second restart');
      assert.deepEqual(await settledLoss(client, before), []);
      const confirmed = await runMeshmuxCli(['confirm', '--policies', '--admin', meshmux.admin]);
      assert.equal(confirmed.code, 0, confirmed.stderr);
      await client.waitFor(
        (c) => c.configs(VS).size === 1,
        WAIT_MS,
        () => 'the confirmed change',
      );
    } finally {
      client.close();
      await meshmux.stop();
      await dir.dispose();
    }
  });

  it('judges a restart for an istiod slow to redial, across a second restart before it is back', async () => {
    const WEB = 15;
    const { dir, configFile, write } = await setUp('meshmux-fault-policy-slow-', { web: WEB });
    const shops = "{ name: shops, match: { nodeId: 'shop-*' }, allow: { namespaces: [shop] } }";
    const webs = (ns: string) => `{ name: webs, match: { nodeId: 'web-*' }, allow: { namespaces: [${ns}] } }`;
    await write([shops, webs('web')]);
    const xds = `127.0.0.1:${await freePort()}`;
    let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    const fast = connect(xds);
    // An istiod in backoff: it redials 12 s after losing its stream.
    const slow = new IstiodClient({
      address: xds,
      nodeId: 'web-1',
      backoff: { initialMs: 12_000, maxMs: 12_000, jitter: 0 },
    }).start();
    try {
      await fast.waitFor(
        (c) => c.configs(VS).size === SHOP,
        WAIT_MS,
        () => 'the fast istiod served',
      );
      await slow.waitFor(
        (c) => c.configs(VS).size === WEB,
        WAIT_MS,
        () => 'the slow istiod served',
      );
      await recorded(dir.dir, 'shop-1', 'web-1');
      const before = inventory(slow);
      await meshmux.kill('SIGKILL');
      await write([shops, webs('wbe')]);
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      await until(async () => (await held(meshmux)) !== undefined, 'held at the first restart');
      // Only the fast istiod is back when meshmux restarts again.
      await fast.waitFor(
        (c) => c.streams >= 2,
        WAIT_MS,
        () => 'the fast istiod back',
      );
      await new Promise((r) => setTimeout(r, 1_500));
      await meshmux.stop();
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      await until(async () => (await held(meshmux)) !== undefined, 'held at the second restart');
      const streams = slow.streams;
      await slow.waitFor(
        (c) => c.streams > streams,
        30_000,
        () => 'the slow istiod back',
      );
      assert.deepEqual(await settledLoss(slow, before), [], 'objects the slow istiod lost');
      report('a misspelt namespace found at two restarts while an istiod was redialling', {
        'objects lost': lost(before, inventory(slow)).length,
        'objects the change withdraws': (await held(meshmux))?.losses[0]?.lost ?? -1,
      });
    } finally {
      fast.close();
      slow.close();
      await meshmux.stop();
      await dir.dispose();
    }
  });

  it('judges the policies changed at a restart once syncTimeout passes, when a required source never answers', async () => {
    const dead = `127.0.0.1:${await freePort()}`;
    const { dir, configFile, write } = await setUp('meshmux-fault-policy-unready-', {
      extra: 'syncTimeout: 1s',
      source: `  - { name: upstream, type: xds, address: '${dead}', kinds: [DestinationRule] }`,
    });
    const xds = `127.0.0.1:${await freePort()}`;
    let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    const client = connect(xds);
    let web: IstiodClient | undefined;
    try {
      await client.waitFor(holdsAll, WAIT_MS, () => 'the first state');
      await recorded(dir.dir, 'shop-1');
      await meshmux.kill('SIGKILL');
      // A policy added for other istiods: it takes nothing from the recorded one.
      await write([GOOD, "{ name: webs, match: { nodeId: 'web-*' }, allow: { namespaces: [web] } }"]);
      meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
      web = new IstiodClient({
        address: xds,
        nodeId: 'web-1',
        backoff: { initialMs: 20, maxMs: 200 },
      }).start();
      await web.waitFor(
        (c) => c.configs(VS).size === 1,
        WAIT_MS,
        () => 'the new policy applied',
      );
      const page = await meshmux.debug<PolicyChangesPage>('policies');
      assert.deepEqual(page.inForce, ['shops', 'webs']);
      assert.equal(page.held, undefined);
      const ready = await fetch(`${meshmux.http}/ready`);
      assert.equal(ready.status, 503, 'the required source is still missing');
    } finally {
      client.close();
      web?.close();
      await meshmux.stop();
      await dir.dispose();
    }
  });

  it('names a policy record it cannot read on /debug/state', async () => {
    const { dir, configFile } = await setUp('meshmux-fault-policy-corrupt-');
    await mkdir(path.join(dir.dir, 'state'), { recursive: true });
    await writeFile(path.join(dir.dir, 'state', 'policies.json'), '{"savedAt":"2026-12-01T00:00:00Z","poli');
    const meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir });
    try {
      const state = await meshmux.debug<{ problems: string[] }>('state');
      assert.ok(
        state.problems.some((p) => p.includes('policies.json') && p.includes('cannot be read')),
        JSON.stringify(state.problems),
      );
      const client = connect(meshmux.xds);
      try {
        await client.waitFor(holdsAll, WAIT_MS, () => 'served under the configured policies');
      } finally {
        client.close();
      }
    } finally {
      await meshmux.stop();
      await dir.dispose();
    }
  });
});
