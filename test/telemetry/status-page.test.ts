import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import { esc, renderStatusPage, type StatusClient } from '../../src/http/status-page.js';
import { startRig, state, VS_URL, type Rig } from '../support/telemetry-rig.js';

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
          { typeUrl: VS_URL, sentVersion: 'v9', ackedVersion: 'v8', awaitingAck: true, nacks: 0 },
          { typeUrl: 'networking.istio.io/v1/Gateway', ackedVersion: 'g1', awaitingAck: false, nacks: 2 },
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
    assert.match(html, /<td>east<\/td><td><code>east@abc\|rev=<\/code><\/td>/);
    assert.match(html, /networking\.istio\.io\/v1\/Gateway: <code>g1<\/code> <span class="bad">2 NACK\(s\)/);
    assert.match(html, /VirtualService: <span class="warn">awaiting ACK/);
    assert.match(
      html,
      /<td>git<\/td><td>invalid<\/td><td colspan="2">routes\.yaml: bad field &lt;script&gt;/,
    );
    assert.ok(!html.includes('<script>'), 'nothing from sources or clients is markup');
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
