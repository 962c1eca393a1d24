import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import { esc, renderStatusPage, type StatusClient } from '../../src/http/status-page.js';
import { firstMatch } from '../support/deadline.js';
import { DR_URL, startRig, state, VS_URL, type Rig } from '../support/telemetry-rig.js';

const HOSTILE = '<script>alert("x")</script>';

describe('the status page', () => {
  const rigs: Rig[] = [];
  after(() => rigs.forEach((r) => r.stop()));

  it('shows sources with state and last sync, clients with policy, view and ACKed versions, and problems', async () => {
    const rig = startRig(['git', 'zk']);
    rigs.push(rig);
    await rig.send('git', {
      ...state(['reviews'], { revision: 'c0ffee' }),
      errors: [new MeshmuxError('SCHEMA', `bad field ${HOSTILE}`, { file: 'routes.yaml' })],
    });
    const snapshot = await rig.send('zk', {
      type: 'status',
      state: 'failing',
      error: new MeshmuxError('UNAVAILABLE', 'connection refused'),
    });
    const clients: StatusClient[] = [
      {
        client: { streamId: 3, peer: '10.0.0.3:5555', nodeId: HOSTILE },
        policy: 'east',
        view: 'east@abc|rev=',
        connectedAt: '2026-01-01T00:00:00.000Z',
        types: [
          {
            typeUrl: VS_URL,
            sentVersion: 'v9',
            ackedVersion: 'v8',
            awaitingAck: true,
            nacks: 0,
            sync: 'STALE',
          },
          {
            typeUrl: 'networking.istio.io/v1/Gateway',
            sentVersion: 'g2',
            ackedVersion: 'g1',
            awaitingAck: false,
            nacks: 2,
            sync: 'NACKED',
          },
        ],
      },
    ];
    const html = renderStatusPage(snapshot, clients, { refreshSeconds: 7 });
    assert.match(html, /<meta http-equiv="refresh" content="7">/);
    assert.match(html, /<tr data-source="git"><td>git<\/td><td>test<\/td>/);
    assert.match(html, /class="ok">synced/);
    assert.match(
      html,
      /<tr data-source="zk">[\s\S]*?class="bad">failing[\s\S]*?never[\s\S]*?connection refused/,
    );
    assert.match(html, /c0ffee/);
    assert.match(html, /VirtualService 1/);
    assert.match(html, /waiting for zk/);
    assert.match(html, /<tr data-source="zk">[\s\S]*?not answered yet: \*/);
    const gitRow = html.split('<tr data-source="git">')[1]?.split('</tr>')[0] ?? '';
    assert.match(gitRow, /synced/);
    assert.doesNotMatch(gitRow, /not answered yet/);
    // One row per istiod: its worst state, then one badge per type; versions only in its details.
    assert.match(
      html,
      /<tr data-stream="3" data-state="NACKED"[\s\S]*?<td>east<\/td><td class="t"><span class="badge b-bad">NACKED</,
    );
    assert.match(
      html,
      /<th title="networking\.istio\.io\/v1\/Gateway">Gateway<\/th><th title="[^"]*VirtualService">VirtualService<\/th>/,
    );
    assert.match(
      html,
      /<span class="badge b-bad" title="2 NACK\(s\)">NACKED<\/span><\/td><td class="t"><span class="badge b-warn">STALE/,
    );
    assert.match(
      html,
      /<details>[\s\S]*?view <code>east@abc\|rev=<\/code>[\s\S]*?Gateway: sent <code>g2<\/code>, ACKed <code>g1<\/code>, 2 NACK\(s\)/,
    );
    assert.match(
      html,
      /1 istiod\(s\): <span class="badge b-ok" id="fleet-synced">0 in sync[\s\S]*?0 behind[\s\S]*?1 NACKing/,
    );
    for (const page of ['/debug/syncz', '/debug/configz', '/debug/sources', '/metrics']) {
      assert.ok(html.includes(`<a href="${page}">`), `links to ${page}`);
    }
    assert.match(
      html,
      /<td>git<\/td><td>invalid<\/td><td colspan="2">routes\.yaml: bad field &lt;script&gt;/,
    );
    assert.equal(
      html.split('<script>').length,
      2,
      "the page's own script is the only one: nothing from sources or clients is markup",
    );
    assert.ok(!/<script>[^<]*alert/.test(html));
    assert.match(html, /&lt;script&gt;alert\(&quot;x&quot;\)&lt;\/script&gt;/);
  });

  it('says so when no istiod is connected and nothing conflicts', async () => {
    const rig = startRig(['git']);
    rigs.push(rig);
    const snapshot = await rig.send('git', state(['a']));
    const html = renderStatusPage(snapshot, []);
    assert.match(html, /<p id="clients" class="muted">no istiod connected<\/p>/);
    assert.match(html, /<p id="conflicts" class="muted">none<\/p>/);
    assert.match(html, /<span class="ok">ready<\/span>/);
  });

  it('escapes every character that could open markup or close an attribute', () => {
    assert.equal(
      esc(`<a href="x" title='y'>&</a>`),
      '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;',
    );
  });
});

describe('the status page for a fleet', () => {
  const rigs: Rig[] = [];
  after(() => rigs.forEach((r) => r.stop()));

  it('shows a column per served kind, counts made-up type URLs in one, and the worst istiods up to maxRows', async () => {
    const rig = startRig(['git']);
    rigs.push(rig);
    const snapshot = await rig.send('git', state(['a']));
    const type = (
      typeUrl: string,
      sync: StatusClient['types'][number]['sync'],
    ): StatusClient['types'][number] => ({
      typeUrl,
      sentVersion: 'v1',
      ackedVersion: sync === 'SYNCED' ? 'v1' : 'v0',
      awaitingAck: false,
      nacks: sync === 'NACKED' ? 1 : 0,
      sync,
    });
    // 250 tools, each subscribing VirtualServices and 20 type URLs of its own, each answered empty.
    const clients: StatusClient[] = Array.from({ length: 250 }, (_, i) => ({
      client: { streamId: i, peer: `10.0.0.1:${1000 + i}`, nodeId: `tool-${String(i).padStart(3, '0')}` },
      view: 'v',
      connectedAt: '2026-01-01T00:00:00.000Z',
      types: [
        type(VS_URL, i === 249 ? 'NACKED' : 'SYNCED'),
        ...(i === 7 ? [type(DR_URL, 'STALE')] : []),
        ...Array.from({ length: 20 }, (_, t) => type(`type.example.com/s${i}.t${t}`, 'SYNCED')),
      ],
    }));
    const html = renderStatusPage(snapshot, clients, { maxRows: 100 });
    const table = html.slice(
      html.indexOf('<table id="clients">'),
      html.indexOf('</table>', html.indexOf('<table id="clients">')),
    );
    const head = [
      ...(/<thead>([\s\S]*?)<\/thead>/.exec(table)?.[1] ?? '').matchAll(/<th[^>]*>([^<]*)<\/th>/g),
    ].map((m) => m[1]);
    assert.deepEqual(head, ['istiod', 'policy', 'state', 'DestinationRule', 'VirtualService', 'other types']);
    assert.ok(!html.includes('type.example.com'), 'no made-up type URL is a column or a line of details');
    const rows = [...table.matchAll(/<tr data-stream="\d+" data-state="([A-Z ]+)" data-node="([^"]*)"/g)];
    assert.equal(rows.length, 100, 'maxRows istiods are shown');
    assert.deepEqual(
      rows.slice(0, 2).map((r) => [r[1], r[2]]),
      [
        ['NACKED', 'tool-249'],
        ['STALE', 'tool-007'],
      ],
      'the worst first',
    );
    assert.match(table, /<td class="t">20<\/td><\/tr>/, 'the made-up type URLs are counted');
    assert.match(html, /20 other type URL\(s\)/);
    assert.match(html, /<p id="clients-more" class="muted">and 150 more istiod\(s\)/);
    assert.match(html, /250 istiod\(s\): <span class="badge b-ok" id="fleet-synced">248 in sync/);
    assert.ok(html.length < 500_000, `a page of ${html.length} characters`);
  });

  it('shows the exact confirm command for a held update and the configuration reload outcome', async () => {
    const rig = startRig(['git']);
    rigs.push(rig);
    await rig.send('git', state(['a', 'b']));
    rig.sources.get('git')?.next(state([]));
    // The hold comes after the source's settle window.
    const snapshot = await firstMatch(
      rig.engine.snapshots$,
      (x) => x.sources[0]?.held !== undefined,
      10_000,
      'the empty state held',
    );
    const held = renderStatusPage(snapshot, [], { configLoadedAt: new Date('2026-11-24T10:00:00Z') });
    assert.match(held, /to apply it: <code>meshmux confirm git<\/code>/);
    assert.match(
      held,
      /configuration <span class="ok">loaded<\/span> \(running since 2026-11-24T10:00:00\.000Z\)/,
    );
    const refused = renderStatusPage(snapshot, [], {
      reloadFailure: { errors: ['meshmux.yaml:3: bad'], at: new Date(), runningSince: new Date() },
    });
    assert.match(refused, /configuration <span class="bad">reload refused<\/span>/);
  });
});
