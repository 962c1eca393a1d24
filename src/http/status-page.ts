import type { ConfigSnapshot, Conflict, Rejection, SourceReport } from '../merge/config-snapshot.js';
import { KINDS } from '../schema/kinds.js';
import type { ReloadFailure } from '../telemetry/config-reloads.js';

/** Where an istiod stands on a type (as `meshmux status` and `/debug/syncz` say). */
export type ClientTypeSync = 'SYNCED' | 'STALE' | 'NACKED' | 'NOT SENT';

/** One client's state as the status page shows it (structurally an ADS `StreamReport`). */
export interface StatusClient {
  readonly client: { readonly streamId: number; readonly peer: string; readonly nodeId: string };
  /** The policy that admitted the client, when policies are configured. */
  readonly policy?: string;
  readonly view: string;
  readonly connectedAt: string;
  /** `sotw` (istiod) or `delta` (another meshmux). */
  readonly protocol?: string;
  readonly types: ReadonlyArray<{
    readonly typeUrl: string;
    readonly sentVersion?: string;
    readonly ackedVersion?: string;
    readonly awaitingAck: boolean;
    readonly nacks: number;
    readonly sync: ClientTypeSync;
  }>;
}

export interface StatusPageOptions {
  /** Seconds between reloads. Default 5. */
  readonly refreshSeconds?: number;
  /** Rows shown per long table (istiods, rejections, conflicts); the rest is counted. Default 200. */
  readonly maxRows?: number;
  /** The time printed in the page. Default now. */
  readonly now?: Date;
  /** A configuration reload that was refused (the running configuration stayed): shown as a banner on top. */
  readonly reloadFailure?: ReloadFailure | undefined;
  /** Settings the applied configuration changes that apply only on restart: shown as a notice on top. */
  readonly restartPending?: readonly string[];
  /** When the running configuration was loaded. */
  readonly configLoadedAt?: Date;
  /** A change of the policies the guard holds: shown as a banner on top, with the groups it narrows too far. */
  readonly heldPolicies?: HeldPolicyChange | undefined;
  /** A dashboard to link to (e.g. Grafana's meshmux dashboard). */
  readonly dashboardUrl?: string | undefined;
}

/** A held change of the policies, as the status page shows it. */
export interface HeldPolicyChange {
  readonly since: Date;
  readonly losses: ReadonlyArray<{
    readonly policy: string;
    readonly next?: string;
    readonly clients: number;
    readonly objects: number;
    readonly lost: number;
    readonly held?: string;
  }>;
}

/** The pages an operator may want next, linked from the top of the page. */
const LINKS: ReadonlyArray<readonly [string, string]> = [
  ['/debug/sources', 'sources'],
  ['/debug/syncz', 'syncz'],
  ['/debug/configz', 'configz'],
  ['/debug/conflicts', 'conflicts'],
  ['/debug/rejections', 'rejections'],
  ['/debug/state', 'state'],
  ['/debug/policies', 'policies'],
  ['/debug/counters', 'counters'],
  ['/debug/git', 'git'],
  ['/metrics', 'metrics'],
];

/** How bad each state is, for an istiod's overall state and for sorting. */
const SYNC_RANK: Readonly<Record<ClientTypeSync, number>> = { SYNCED: 0, 'NOT SENT': 1, STALE: 2, NACKED: 3 };
const SYNC_CLASS: Readonly<Record<ClientTypeSync, string>> = {
  SYNCED: 'b-ok',
  'NOT SENT': 'b-none',
  STALE: 'b-warn',
  NACKED: 'b-bad',
};

/** An istiod's overall state: the worst of its types (one without types is NOT SENT). */
function overall(c: StatusClient): ClientTypeSync {
  let worst: ClientTypeSync = c.types.length === 0 ? 'NOT SENT' : 'SYNCED';
  for (const t of c.types) if (SYNC_RANK[t.sync] > SYNC_RANK[worst]) worst = t.sync;
  return worst;
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
  const objects = [...snapshot.kinds.values()].reduce((n, k) => n + (k.list ?? k.resources).length, 0);
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
.notice{border:2px solid #b26a00;background:#fff4e0;padding:.6em .9em;margin:.8em 0}
nav{margin:.3em 0 .8em}
#fleet{font-size:1.15em;margin:.6em 0}
.badge{display:inline-block;padding:.05em .5em;border-radius:.3em;font-weight:600;font-size:.9em;color:#fff}
.b-ok{background:#1e7e34}.b-warn{background:#b26a00}.b-bad{background:#c62828}.b-none{background:#8a8a8a}
#clients td.t{text-align:center}
details summary{cursor:pointer;color:#555}
</style>
</head>
<body>
<h1>meshmux</h1>
${reloadBanner(options.reloadFailure)}${policyBanner(options.heldPolicies)}${restartNotice(options.restartPending)}<nav id="links">${LINKS.map(([href, label]) => `<a href="${href}">${label}</a>`).join(' · ')}${options.dashboardUrl === undefined ? '' : ` · <a href="${esc(options.dashboardUrl)}">dashboard</a>`}</nav>
${fleetSummary(clients)}
<p id="summary">${snapshot.ready ? '<span class="ok">ready</span>' : `<span class="warn">waiting for ${esc(snapshot.waitingFor.join(', '))}</span>`}
· snapshot <code>${esc(snapshot.version)}</code> (generation ${snapshot.generation})
· ${objects} object(s) in ${snapshot.kinds.size} kind(s)
· ${clients.length} client(s)
· configuration ${options.reloadFailure === undefined ? '<span class="ok">loaded</span>' : '<span class="bad">reload refused</span>'}${options.configLoadedAt === undefined ? '' : ` (running since ${esc(options.configLoadedAt.toISOString())})`}
· <span class="muted">as of ${esc(now.toISOString())}, reloads every ${refresh} s</span></p>
${sourcesTable(snapshot.sources)}
${clientsTable(clients, maxRows)}
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

/** Groups of istiods a held change of the policies lists at most on the page. */
const MAX_HELD_ROWS = 20;

function policyBanner(held: HeldPolicyChange | undefined): string {
  if (held === undefined) return '';
  const heldGroups = held.losses.filter((l) => l.held !== undefined);
  const rows = heldGroups
    .slice(0, MAX_HELD_ROWS)
    .map(
      (l) =>
        `<li>${l.clients} istiod(s) of policy <code>${esc(l.policy)}</code> would lose ${l.lost} of ${l.objects} object(s)${l.next === undefined ? ' (refused by the new policies)' : l.next === l.policy ? '' : ` (moved to policy <code>${esc(l.next)}</code>)`}</li>`,
    );
  return `<div class="banner" id="policies-held" role="alert"><span class="bad">change of the policies held</span> since ${esc(held.since.toISOString())};
the policies in force keep serving. <ul>${rows.join('')}${heldGroups.length > MAX_HELD_ROWS ? `<li>… ${heldGroups.length - MAX_HELD_ROWS} more group(s): <a href="/debug/policies">/debug/policies</a></li>` : ''}</ul>To apply it: <code>meshmux confirm --policies</code></div>
`;
}

function restartNotice(pending: readonly string[] | undefined): string {
  if (pending === undefined || pending.length === 0) return '';
  return `<div class="notice" id="config-restart-pending" role="status"><span class="warn">restart pending</span>:
the applied configuration changes ${pending.map((k) => `<code>${esc(k)}</code>`).join(', ')}; these apply only on restart,
and until then keep the values meshmux started with.</div>
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
<td>${s.held === undefined ? '' : `<span class="bad">${esc(s.held.reason)}${s.held.emptiedKinds === undefined ? '' : ` (${esc(s.held.emptiedKinds.join(', '))})`}: ${s.held.deletions} of ${s.held.total} deletion(s) held</span> — to apply it: <code>meshmux confirm ${esc(s.name)}</code>`}
${
  s.warnings.length === 0
    ? ''
    : `<span class="warn">${s.warnings.length} warning(s)</span>: ${s.warnings
        .slice(0, 3)
        .map((w) => esc(w.describe()))
        .join('; ')}`
}
${s.lastError === undefined ? '' : `<span class="bad">${esc(s.lastError.describe())}</span>`}</td></tr>`,
  );
  return `<h2>Sources</h2>
<table id="sources"><thead><tr><th>source</th><th>type</th><th>priority</th><th>state</th><th>last sync</th><th>revision</th><th>objects</th><th>invalid</th><th>rejected</th><th>problems</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody></table>`;
}

/** "N istiods: X in sync, Y behind, Z NACKing", each count a coloured badge. */
function fleetSummary(clients: readonly StatusClient[]): string {
  const counts: Record<ClientTypeSync, number> = { SYNCED: 0, STALE: 0, NACKED: 0, 'NOT SENT': 0 };
  for (const c of clients) counts[overall(c)]++;
  return `<p id="fleet">${clients.length} istiod(s): <span class="badge b-ok" id="fleet-synced">${counts.SYNCED} in sync</span>
<span class="badge b-warn" id="fleet-behind">${counts.STALE + counts['NOT SENT']} behind</span>
<span class="badge b-bad" id="fleet-nacking">${counts.NACKED} NACKing</span></p>`;
}

/**
 * One row per istiod, worst first, at most `maxRows` of them; one column per type URL of a kind
 * meshmux serves. A client may subscribe any type URL it makes up (each answered empty): those
 * are counted in one column, so the table stays rows x served kinds whatever the clients ask.
 */
function clientsTable(clients: readonly StatusClient[], maxRows: number): string {
  if (clients.length === 0) return '<h2>Istiods</h2>\n<p id="clients" class="muted">no istiod connected</p>';
  const served = (typeUrl: string): boolean => KINDS.resolveTypeUrl(typeUrl) !== undefined;
  const typeUrls = [
    ...new Set(clients.flatMap((c) => c.types.filter((t) => served(t.typeUrl)).map((t) => t.typeUrl))),
  ].sort();
  // Worst first: the istiods that need a look are at the top, and stay on the page when it is cut.
  const sorted = [...clients].sort(
    (a, b) => SYNC_RANK[overall(b)] - SYNC_RANK[overall(a)] || (a.client.nodeId < b.client.nodeId ? -1 : 1),
  );
  const rows = sorted.slice(0, maxRows).map((c) => {
    const state = overall(c);
    const types = c.types.filter((t) => served(t.typeUrl));
    const others = c.types.length - types.length;
    const byType = new Map(types.map((t) => [t.typeUrl, t]));
    const cells = typeUrls.map((u) => {
      const t = byType.get(u);
      if (t === undefined) return '<td class="t muted">–</td>';
      const nacks = t.nacks > 0 ? ` title="${t.nacks} NACK(s)"` : '';
      return `<td class="t"><span class="badge ${SYNC_CLASS[t.sync]}"${nacks}>${t.sync}</span></td>`;
    });
    cells.push(others === 0 ? '<td class="t muted">–</td>' : `<td class="t">${others}</td>`);
    const versions = types
      .map(
        (t) =>
          `${esc(t.typeUrl)}: sent <code>${esc(t.sentVersion ?? '-')}</code>, ACKed <code>${esc(t.ackedVersion ?? '-')}</code>${t.nacks > 0 ? `, ${t.nacks} NACK(s)` : ''}`,
      )
      .concat(others === 0 ? [] : [`${others} other type URL(s): <a href="/debug/syncz">/debug/syncz</a>`])
      .join('<br>');
    const node = c.client.nodeId === '' ? '(unidentified)' : c.client.nodeId;
    return `<tr data-stream="${c.client.streamId}" data-state="${state}" data-node="${esc(node)}"><td>${esc(node)}
<details><summary>details</summary>peer ${esc(c.client.peer)} · ${esc(c.protocol ?? 'sotw')} · view <code>${esc(c.view)}</code> · connected ${esc(c.connectedAt)}<br>${versions}</details></td>
<td>${esc(c.policy ?? '')}</td><td class="t"><span class="badge ${SYNC_CLASS[state]}">${state}</span></td>${cells.join('')}</tr>`;
  });
  const head = typeUrls.map((u) => `<th title="${esc(u)}">${esc(shortKind(u))}</th>`).join('');
  const cut =
    clients.length > maxRows
      ? `\n<p id="clients-more" class="muted">and ${clients.length - maxRows} more istiod(s), none worse off than those above (see /debug/syncz)</p>`
      : '';
  return `<h2>Istiods</h2>
<p><input id="filter" type="search" placeholder="filter by node or policy" size="40">
<select id="state-filter"><option value="">every state</option><option>NACKED</option><option>STALE</option><option>NOT SENT</option><option>SYNCED</option></select>
<span class="muted">click a column to sort</span></p>
<table id="clients"><thead><tr><th>istiod</th><th>policy</th><th>state</th>${head}<th title="type URLs of no kind meshmux serves">other types</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody></table>${cut}
<script>${CLIENTS_SCRIPT}</script>`;
}

/** Filtering and sorting of the istiods table, inline: the page loads nothing from elsewhere. */
const CLIENTS_SCRIPT = `(() => {
  const table = document.getElementById('clients');
  const text = document.getElementById('filter');
  const state = document.getElementById('state-filter');
  const apply = () => {
    const q = text.value.toLowerCase();
    for (const row of table.tBodies[0].rows) {
      const shown = row.textContent.toLowerCase().includes(q) && (state.value === '' || row.dataset.state === state.value);
      row.hidden = !shown;
    }
  };
  text.addEventListener('input', apply);
  state.addEventListener('change', apply);
  table.tHead.addEventListener('click', (e) => {
    const th = e.target.closest('th');
    if (!th) return;
    const col = th.cellIndex;
    const rows = [...table.tBodies[0].rows];
    const dir = th.dataset.dir === 'asc' ? -1 : 1;
    th.dataset.dir = dir === 1 ? 'asc' : 'desc';
    rows.sort((a, b) => dir * a.cells[col].textContent.localeCompare(b.cells[col].textContent));
    for (const r of rows) table.tBodies[0].appendChild(r);
  });
})();`;

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
