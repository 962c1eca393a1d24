import type { ConfigSnapshot, Conflict, Rejection, SourceReport } from '../merge/config-snapshot.js';
import type { ReloadFailure } from '../telemetry/config-reloads.js';

/** One client's state as the status page shows it (structurally an ADS `StreamReport`). */
export interface StatusClient {
  readonly client: { readonly streamId: number; readonly peer: string; readonly nodeId: string };
  /** The policy that admitted the client, when policies are configured. */
  readonly policy?: string;
  readonly view: string;
  readonly connectedAt: string;
  readonly types: ReadonlyArray<{
    readonly typeUrl: string;
    readonly sentVersion?: string;
    readonly ackedVersion?: string;
    readonly awaitingAck: boolean;
    readonly nacks: number;
  }>;
}

export interface StatusPageOptions {
  /** Seconds between reloads. Default 5. */
  readonly refreshSeconds?: number;
  /** Rows shown per long table (rejections, conflicts); the rest is counted. Default 200. */
  readonly maxRows?: number;
  /** The time printed in the page. Default now. */
  readonly now?: Date;
  /** A configuration reload that was refused (the running configuration stayed): shown as a banner on top. */
  readonly reloadFailure?: ReloadFailure | undefined;
}

const STATE_CLASS: Readonly<Record<SourceReport['state'], string>> = {
  synced: 'ok',
  restored: 'warn',
  connecting: 'warn',
  stale: 'warn',
  failing: 'bad',
};

/**
 * The human status page served at `GET /`: sources with their state and last sync, clients with
 * their view and acknowledged versions, conflicts and rejections. Plain HTML that reloads itself;
 * every value from config, sources or clients is escaped.
 */
export function renderStatusPage(
  snapshot: ConfigSnapshot,
  clients: readonly StatusClient[],
  options: StatusPageOptions = {},
): string {
  const refresh = options.refreshSeconds ?? 5;
  const maxRows = options.maxRows ?? 200;
  const now = options.now ?? new Date();
  const rejections = snapshot.sources.flatMap((s) => s.rejections);
  const invalid = snapshot.sources.flatMap((s) =>
    s.errors.map((e) => ({ source: s.name, error: e.describe() })),
  );
  const objects = [...snapshot.kinds.values()].reduce((n, k) => n + k.resources.length, 0);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="${refresh}">
<title>meshmux status</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d1d1f}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;margin:.4em 0}
th,td{border:1px solid #ccc;padding:.2em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}code{font-size:.95em}
.ok{color:#176c2e;font-weight:600}.warn{color:#9a6700;font-weight:600}.bad{color:#b3261e;font-weight:600}
.muted{color:#666}
.banner{border:2px solid #b3261e;background:#fdecea;padding:.6em .9em;margin:.8em 0}
</style>
</head>
<body>
<h1>meshmux</h1>
${reloadBanner(options.reloadFailure)}<p id="summary">${snapshot.ready ? '<span class="ok">ready</span>' : `<span class="warn">waiting for ${esc(snapshot.waitingFor.join(', '))}</span>`}
· snapshot <code>${esc(snapshot.version)}</code> (generation ${snapshot.generation})
· ${objects} object(s) in ${snapshot.kinds.size} kind(s)
· ${clients.length} client(s)
· <span class="muted">as of ${esc(now.toISOString())}, reloads every ${refresh} s</span></p>
${sourcesTable(snapshot.sources)}
${clientsTable(clients)}
${conflictsTable(snapshot.conflicts, maxRows)}
${rejectionsTable(rejections, invalid, maxRows)}
</body>
</html>
`;
}

function reloadBanner(failure: ReloadFailure | undefined): string {
  if (failure === undefined) return '';
  return `<div class="banner" id="config-reload-error" role="alert"><span class="bad">configuration not reloaded</span>
at ${esc(failure.at.toISOString())}; still serving the configuration loaded at ${esc(failure.runningSince.toISOString())}.
<pre>${failure.errors.map(esc).join('\n')}</pre></div>
`;
}

function sourcesTable(sources: readonly SourceReport[]): string {
  const rows = sources.map(
    (
      s,
    ) => `<tr data-source="${esc(s.name)}"><td>${esc(s.name)}</td><td>${esc(s.type)}</td><td>${s.priority}</td>
<td class="${STATE_CLASS[s.state]}">${esc(s.state)}${s.staleSince === undefined ? '' : ` since ${esc(s.staleSince.toISOString())}`}${s.restoredFrom === undefined || s.everSynced ? '' : ` (state saved ${esc(s.restoredFrom.toISOString())})`}${s.missingKinds.length === 0 ? '' : `<br><span class="bad">not answered yet: ${esc(s.missingKinds.map((k) => k.slice(k.lastIndexOf('/') + 1)).join(', '))}${s.required ? '' : ' (not required)'}</span>`}</td>
<td>${s.lastSyncTime === undefined ? '<span class="muted">never</span>' : esc(s.lastSyncTime.toISOString())}</td>
<td><code>${esc(s.revision)}</code></td>
<td>${esc(
      Object.entries(s.counts)
        .map(([k, n]) => `${shortKind(k)} ${n}`)
        .join(', '),
    )}</td>
<td>${s.errors.length}</td><td>${s.rejections.length}</td>
<td>${s.held === undefined ? '' : `<span class="bad">${esc(s.held.reason)}: ${s.held.deletions} of ${s.held.total} deletion(s) held</span>`}
${s.lastError === undefined ? '' : `<span class="bad">${esc(s.lastError.describe())}</span>`}</td></tr>`,
  );
  return `<h2>Sources</h2>
<table id="sources"><thead><tr><th>source</th><th>type</th><th>priority</th><th>state</th><th>last sync</th><th>revision</th><th>objects</th><th>invalid</th><th>rejected</th><th>problems</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody></table>`;
}

function clientsTable(clients: readonly StatusClient[]): string {
  if (clients.length === 0) return '<h2>Clients</h2>\n<p id="clients" class="muted">no istiod connected</p>';
  const rows = clients.map((c) => {
    const types = [...c.types].sort((a, b) => (a.typeUrl < b.typeUrl ? -1 : 1));
    const acked = types
      .map((t) => {
        const state = t.awaitingAck
          ? '<span class="warn">awaiting ACK</span>'
          : t.ackedVersion === undefined
            ? '<span class="muted">not ACKed</span>'
            : `<code>${esc(t.ackedVersion)}</code>`;
        const nacks = t.nacks > 0 ? ` <span class="bad">${t.nacks} NACK(s)</span>` : '';
        return `${esc(t.typeUrl)}: ${state}${nacks}`;
      })
      .join('<br>');
    return `<tr data-stream="${c.client.streamId}"><td>${esc(c.client.nodeId === '' ? '(unidentified)' : c.client.nodeId)}</td><td>${esc(c.client.peer)}</td>
<td>${esc(c.policy ?? '')}</td><td><code>${esc(c.view)}</code></td><td>${esc(c.connectedAt)}</td><td>${acked}</td></tr>`;
  });
  return `<h2>Clients</h2>
<table id="clients"><thead><tr><th>node</th><th>peer</th><th>policy</th><th>view</th><th>connected</th><th>ACKed versions</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody></table>`;
}

function conflictsTable(conflicts: readonly Conflict[], maxRows: number): string {
  if (conflicts.length === 0) return '<h2>Conflicts</h2>\n<p id="conflicts" class="muted">none</p>';
  const rows = conflicts.slice(0, maxRows).map(
    (c) => `<tr><td>${esc(c.type)}</td><td><code>${esc(c.subject)}</code></td><td>${esc(c.resolution)}</td>
<td>${c.parties
      .map(
        (p) =>
          `${esc(p.source)} (priority ${p.priority}): ${esc(shortKind(p.kind))} ${esc(p.namespace)}/${esc(p.name)} ${p.served ? '<span class="ok">served</span>' : '<span class="muted">shadowed</span>'}`,
      )
      .join('<br>')}</td></tr>`,
  );
  return `<h2>Conflicts</h2>
<table id="conflicts"><thead><tr><th>type</th><th>subject</th><th>resolution</th><th>parties</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody></table>${more(conflicts.length, maxRows)}`;
}

function rejectionsTable(
  rejections: readonly Rejection[],
  invalid: ReadonlyArray<{ source: string; error: string }>,
  maxRows: number,
): string {
  if (rejections.length === 0 && invalid.length === 0) {
    return '<h2>Rejections</h2>\n<p id="rejections" class="muted">none</p>';
  }
  const rows = [
    ...invalid.map(
      (i) => `<tr><td>${esc(i.source)}</td><td>invalid</td><td colspan="2">${esc(i.error)}</td></tr>`,
    ),
    ...rejections.map(
      (r) =>
        `<tr><td>${esc(r.source)}</td><td>${esc(r.reason)}</td><td>${esc(shortKind(r.kind))}</td><td>${esc(r.namespace)}/${esc(r.name)}</td></tr>`,
    ),
  ];
  return `<h2>Rejections</h2>
<table id="rejections"><thead><tr><th>source</th><th>reason</th><th>kind</th><th>object</th></tr></thead>
<tbody>
${rows.slice(0, maxRows).join('\n')}
</tbody></table>${more(rows.length, maxRows)}`;
}

function more(total: number, shown: number): string {
  return total > shown
    ? `\n<p class="muted">and ${total - shown} more (see /debug/conflicts and /debug/rejections)</p>`
    : '';
}

/** `networking.istio.io/VirtualService` → `VirtualService`. */
function shortKind(key: string): string {
  return key.slice(key.lastIndexOf('/') + 1);
}

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Escapes text for HTML element content and quoted attribute values. */
export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}
